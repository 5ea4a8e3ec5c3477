#include "foundation/elf_symbols.h"

#include "foundation/input_file.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gtrace {
namespace {

struct ElfHandle {
    InputFile file; // a regular file only: the path may be a hostile user's FIFO or device
    Elf* elf = nullptr;
    ~ElfHandle() {
        if (elf) elf_end(elf);
    }
};

} // namespace

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load(const std::string& path,
                                                            const std::unordered_set<std::string_view>* only) {
    if (!only) return load_filtered(path, false, {});
    return load_filtered(path, true, [only](std::string_view name) { return only->contains(name); });
}

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load_matching(const std::string& path,
                                                                     const std::function<bool(std::string_view)>& keep) {
    return load_filtered(path, false, keep);
}

// `keep` empty: every function; `objects`: data objects too.
Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load_by_address(const std::string& path) {
    return load_filtered(path, false, {}, false);
}

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load_filtered(const std::string& path, bool objects,
                                                                     const std::function<bool(std::string_view)>& keep,
                                                                     bool index_names) {
    if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ExitCode::Internal, "libelf is unusable");
    ElfHandle h;
    auto file = open_input_file(path);
    if (!file) return make_error(ExitCode::Internal, file.error().message);
    h.file = std::move(*file);
    h.elf = elf_begin(h.file.fd(), ELF_C_READ_MMAP, nullptr);
    if (!h.elf || elf_kind(h.elf) != ELF_K_ELF)
        return make_error(ExitCode::Internal, path + " is not an ELF file");

    auto syms = std::make_shared<ElfSymbols>();
    size_t phnum = 0;
    elf_getphdrnum(h.elf, &phnum);
    for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(h.elf, i, &ph) && ph.p_type == PT_LOAD)
            syms->segments_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    }

    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(h.elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
            continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data) continue;
        size_t count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < count; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
            int type = GELF_ST_TYPE(sym.st_info);
            if (type != STT_FUNC && type != STT_GNU_IFUNC && !(objects && type == STT_OBJECT)) continue;
            const char* name = elf_strptr(h.elf, sh.sh_link, sym.st_name);
            if (!name || !*name || (keep && !keep(name))) continue;
            syms->by_addr_.push_back({sym.st_value, sym.st_size, name});
        }
    }
    std::sort(syms->by_addr_.begin(), syms->by_addr_.end(),
              [](const ElfSymbol& a, const ElfSymbol& b) { return a.vaddr < b.vaddr; });
    // .symtab and .dynsym repeat each other: keep one symbol per (address, name).
    syms->by_addr_.erase(std::unique(syms->by_addr_.begin(), syms->by_addr_.end(),
                                     [](const ElfSymbol& a, const ElfSymbol& b) {
                                         return a.vaddr == b.vaddr && a.name == b.name;
                                     }),
                         syms->by_addr_.end());
    syms->by_addr_.shrink_to_fit(); // kept for the whole capture: no room left from push_back's doubling
    if (index_names) {
        syms->by_name_.reserve(syms->by_addr_.size());
        for (size_t i = 0; i < syms->by_addr_.size(); ++i) syms->by_name_.emplace(syms->by_addr_[i].name, i);
    }
    return std::shared_ptr<const ElfSymbols>(std::move(syms));
}

const ElfSymbol* ElfSymbols::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &by_addr_[it->second];
}

std::optional<uint64_t> ElfSymbols::vaddr_to_offset(uint64_t vaddr) const {
    for (const auto& s : segments_)
        if (vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz) return vaddr - s.vaddr + s.offset;
    return std::nullopt;
}

std::optional<uint64_t> ElfSymbols::offset_to_vaddr(uint64_t offset) const {
    for (const auto& s : segments_)
        if (offset >= s.offset && offset < s.offset + s.filesz) return offset - s.offset + s.vaddr;
    return std::nullopt;
}

const ElfSymbol* ElfSymbols::covering(uint64_t vaddr) const {
    auto it = std::upper_bound(by_addr_.begin(), by_addr_.end(), vaddr,
                               [](uint64_t v, const ElfSymbol& s) { return v < s.vaddr; });
    // Walk back over symbols that start at or before vaddr; the first that covers it wins.
    for (int steps = 0; it != by_addr_.begin() && steps < 8; ++steps) {
        --it;
        if (vaddr == it->vaddr || vaddr < it->vaddr + it->size) return &*it;
    }
    return nullptr;
}

std::vector<std::string> elf_search_paths(const std::string& path, const std::string& origin) {
    std::vector<std::string> dirs;
    if (elf_version(EV_CURRENT) == EV_NONE) return dirs;
    ElfHandle h;
    auto file = open_input_file(path);
    if (!file) return dirs;
    h.file = std::move(*file);
    if (!(h.elf = elf_begin(h.file.fd(), ELF_C_READ_MMAP, nullptr))) return dirs;
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(h.elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
            GElf_Dyn dyn;
            if (!gelf_getdyn(data, static_cast<int>(i), &dyn) || (dyn.d_tag != DT_RUNPATH && dyn.d_tag != DT_RPATH)) continue;
            const char* value = elf_strptr(h.elf, sh.sh_link, dyn.d_un.d_val);
            std::string list = value ? value : "";
            for (size_t pos = 0; pos <= list.size();) {
                size_t end = list.find(':', pos);
                if (end == std::string::npos) end = list.size();
                std::string dir = list.substr(pos, end - pos);
                for (const char* token : {"$ORIGIN", "${ORIGIN}"})
                    if (auto at = dir.find(token); at != std::string::npos) dir.replace(at, strlen(token), origin);
                if (!dir.empty()) dirs.push_back(dir);
                pos = end + 1;
            }
        }
    }
    return dirs;
}

size_t ElfSymbols::memory_bytes() const {
    size_t bytes = by_addr_.capacity() * sizeof(ElfSymbol) + by_name_.size() * 48 + segments_.capacity() * sizeof(Segment);
    for (const ElfSymbol& s : by_addr_)
        if (s.name.capacity() > 15) bytes += s.name.capacity() + 1 + 16; // on the heap past the short-string buffer
    return bytes;
}

std::string demangle(const std::string& name) {
    if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
    int status = 0;
    char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status != 0 || !out) return name;
    std::string result(out);
    free(out);
    return result;
}

} // namespace gtrace
