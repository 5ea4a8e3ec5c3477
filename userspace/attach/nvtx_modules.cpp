#include "attach/nvtx_modules.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "foundation/input_file.h"
#include "discover/target_files.h"

namespace gtrace {
namespace {

constexpr std::string_view kNvtxEnvironment = "NVTX_INJECTION64_PATH"; // read by every NVTX v3 init

// Read a chunk at a time from the file: a section's size is the file's word, not a buffer's.
bool section_holds(const InputFile& file, const GElf_Shdr& sh, std::string_view text) {
    if (sh.sh_offset > file.size()) return false;
    return find_in_file(file.fd(), sh.sh_offset, std::min<uint64_t>(sh.sh_size, file.size() - sh.sh_offset), text).has_value();
}

std::optional<uint64_t> vaddr_to_offset(Elf* elf, uint64_t vaddr) {
    size_t phnum = 0;
    elf_getphdrnum(elf, &phnum);
    for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
            return vaddr - ph.p_vaddr + ph.p_offset;
    }
    return std::nullopt;
}

std::optional<uint64_t> table_vaddr(Elf* elf, Elf_Scn* symtab, const GElf_Shdr& sh) {
    Elf_Data* data = elf_getdata(symtab, nullptr);
    if (!data || !sh.sh_entsize) return std::nullopt;
    for (size_t i = 0, n = sh.sh_size / sh.sh_entsize; i < n; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
            continue;
        const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (name && std::strcmp(name, kNvtxTableSymbol) == 0) return sym.st_value;
    }
    return std::nullopt;
}

} // namespace

NvtxModuleScan::FileFacts NvtxModuleScan::read_file(const InputFile& file) {
    FileFacts facts;
    if (elf_version(EV_CURRENT) == EV_NONE) return facts;
    // Read, not mapped: a file its owner truncates meanwhile must not fault gtrace (SIGBUS).
    Elf* elf = elf_begin(file.fd(), ELF_C_READ, nullptr);
    if (!elf) return facts;
    size_t shstrndx = 0;
    elf_getshdrstrndx(elf, &shstrndx);
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (sh.sh_type == SHT_SYMTAB && !facts.table_offset) {
            if (sh.sh_size > file.size()) continue; // claims more than the file holds
            if (auto vaddr = table_vaddr(elf, scn, sh)) facts.table_offset = vaddr_to_offset(elf, *vaddr);
        } else if (name && std::strcmp(name, ".rodata") == 0 && sh.sh_type == SHT_PROGBITS) {
            facts.uses_nvtx = section_holds(file, sh, kNvtxEnvironment);
        }
    }
    elf_end(elf);
    return facts;
}

NvtxModules NvtxModuleScan::find(int pid, const std::vector<Mapping>& maps, TargetFiles& files) {
    NvtxModules found;
    // The modules not read before, opened as the process maps them (one batch, bounded in time).
    for (auto& opened : files.open_mapped(pid, maps, [this](const Mapping& m) {
             return m.executable && !files_.contains({m.dev, m.inode});
         }))
        files_[{opened.mapping.dev, opened.mapping.inode}] = read_file(opened.file);
    std::set<std::pair<uint64_t, uint64_t>> done;
    for (const Mapping& m : maps) {
        if (!m.executable || !m.is_file() || !done.insert({m.dev, m.inode}).second) continue;
        auto it = files_.find({m.dev, m.inode});
        if (it == files_.end()) continue; // could not be opened as the file mapped
        const FileFacts& f = it->second;
        if (!f.table_offset) {
            if (f.uses_nvtx) found.unreachable.push_back(m.path);
            continue;
        }
        // The table is initialized data: in the file, in the module's writable data mapping. Not
        // the read-only one before it, whose last page can map the same file page (the data
        // segment starts mid-page: pip torch 2.x's libraries) at another address.
        for (const Mapping& d : maps)
            if (d.dev == m.dev && d.inode == m.inode && d.writable && *f.table_offset >= d.offset &&
                *f.table_offset + 8 <= d.offset + (d.end - d.start)) {
                found.tables.emplace_back(d.start + (*f.table_offset - d.offset), m.path);
                break;
            }
    }
    return found;
}

} // namespace gtrace
