#include "foundation/elf_reading.h"

#include <sys/vfs.h>

#include <mutex>
#include <set>

namespace gtrace::elf_reading {

bool section_fits(const GElf_Shdr& s, uint64_t file_size) {
    return s.sh_type == SHT_NOBITS || (s.sh_offset <= file_size && s.sh_size <= file_size - s.sh_offset);
}

bool on_remote_file_system(int fd) {
    struct statfs fs {};
    if (fstatfs(fd, &fs) != 0) return false;
    switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x65735546: // FUSE
    case 0x6969:     // NFS
    case 0xFF534D42: // CIFS
    case 0xFE534D42: // SMB2
    case 0x01021997: // 9P
    case 0x00C36400: // Ceph
    case 0x013111A8: // IBRIX
    case 0x47504653: // GPFS
    case 0x0BD00BD0: // Lustre
        return true;
    default:
        return false;
    }
}

namespace {
std::mutex unanswering_mutex;
std::set<dev_t> unanswering;
} // namespace

bool unanswering_device(dev_t dev) {
    std::lock_guard lock(unanswering_mutex);
    return unanswering.contains(dev);
}

void mark_unanswering(dev_t dev) {
    std::lock_guard lock(unanswering_mutex);
    unanswering.insert(dev);
}

std::vector<LoadSegment> load_segments(Elf* elf) {
    std::vector<LoadSegment> segments;
    size_t phnum = 0;
    elf_getphdrnum(elf, &phnum);
    for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) segments.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    }
    return segments;
}

std::optional<uint64_t> vaddr_to_offset(const std::vector<LoadSegment>& segments, uint64_t vaddr) {
    for (const auto& s : segments)
        if (vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz) return vaddr - s.vaddr + s.offset;
    return std::nullopt;
}

std::optional<uint64_t> offset_to_vaddr(const std::vector<LoadSegment>& segments, uint64_t offset) {
    for (const auto& s : segments)
        if (offset >= s.offset && offset < s.offset + s.filesz) return offset - s.offset + s.vaddr;
    return std::nullopt;
}

void for_each_symbol(Elf* elf, uint64_t file_size, bool objects,
                     const std::function<void(const GElf_Sym&, size_t, const GElf_Shdr&)>& each) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize ||
            !section_fits(sh, file_size))
            continue;
        GElf_Shdr strings;
        Elf_Scn* strscn = elf_getscn(elf, sh.sh_link);
        if (!strscn || !gelf_getshdr(strscn, &strings) || strings.sh_type != SHT_STRTAB || !section_fits(strings, file_size)) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data) continue;
        size_t count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < count; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
            int type = GELF_ST_TYPE(sym.st_info);
            if (type != STT_FUNC && type != STT_GNU_IFUNC && !(objects && type == STT_OBJECT)) continue;
            each(sym, sh.sh_link, strings);
        }
    }
}

} // namespace gtrace::elf_reading
