#include "foundation/elf_symbols.h"

#include "foundation/bounded_call.h"
#include "foundation/elf_reading.h"
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
using namespace elf_reading;

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load(const std::string& path,
                                                            const std::unordered_set<std::string_view>* only) {
    if (!only) return load_filtered(path, false, {});
    return load_filtered(path, true, [only](std::string_view name) { return only->contains(name); });
}

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load_matching(const std::string& path,
                                                                     const std::function<bool(std::string_view)>& keep) {
    return load_filtered(path, false, keep);
}

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::load_filtered(const std::string& path, bool objects,
                                                                     const std::function<bool(std::string_view)>& keep,
                                                                     bool index_names) {
    if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ExitCode::Internal, "libelf is unusable");
    auto file = open_input_file(path);
    if (!file) return make_error(ExitCode::Internal, file.error().message);
    auto dev = file->stat().st_dev;
    if (!on_remote_file_system(file->fd())) return parse(std::move(*file), path, objects, keep, index_names);
    // A FUSE or network file system may never answer (its server stopped, or was made to): the
    // whole table is read on a worker with a deadline, and filtered here. Past the deadline its
    // device is not read again.
    if (unanswering_device(dev)) return make_error(ExitCode::Internal, path + ": its file system did not answer before");
    auto shared = std::make_shared<InputFile>(std::move(*file));
    auto all = bounded_call<Result<std::shared_ptr<const ElfSymbols>>>([shared, path, objects] {
        return parse(std::move(*shared), path, objects, {}, false);
    });
    if (!all) {
        mark_unanswering(dev);
        return make_error(ExitCode::Internal, path + ": its file system does not answer");
    }
    if (!*all) return all->error();
    auto syms = std::make_shared<ElfSymbols>();
    syms->segments_ = (**all)->segments_;
    for (const ElfSymbol& sym : (**all)->by_addr_)
        if (!keep || keep(sym.name)) syms->by_addr_.push_back(sym);
    syms->finish(index_names);
    return std::shared_ptr<const ElfSymbols>(std::move(syms));
}

Result<std::shared_ptr<const ElfSymbols>> ElfSymbols::parse(InputFile file, const std::string& path, bool objects,
                                                             const std::function<bool(std::string_view)>& keep,
                                                             bool index_names) {
    ElfHandle h;
    h.file = std::move(file);
    h.elf = elf_begin(h.file.fd(), ELF_C_READ, nullptr);
    if (!h.elf || elf_kind(h.elf) != ELF_K_ELF)
        return make_error(ExitCode::Internal, path + " is not an ELF file");

    auto syms = std::make_shared<ElfSymbols>();
    syms->segments_ = load_segments(h.elf);
    for_each_symbol(h.elf, h.file.size(), objects, [&](const GElf_Sym& sym, size_t strings, const GElf_Shdr&) {
        const char* name = elf_strptr(h.elf, strings, sym.st_name);
        if (name && *name && (!keep || keep(name))) syms->by_addr_.push_back({sym.st_value, sym.st_size, name});
    });
    syms->finish(index_names);
    return std::shared_ptr<const ElfSymbols>(std::move(syms));
}

void ElfSymbols::finish(bool index_names) {
    std::sort(by_addr_.begin(), by_addr_.end(), [](const ElfSymbol& a, const ElfSymbol& b) { return a.vaddr < b.vaddr; });
    // .symtab and .dynsym repeat each other: keep one symbol per (address, name).
    by_addr_.erase(std::unique(by_addr_.begin(), by_addr_.end(),
                               [](const ElfSymbol& a, const ElfSymbol& b) { return a.vaddr == b.vaddr && a.name == b.name; }),
                   by_addr_.end());
    by_addr_.shrink_to_fit(); // kept for the whole capture: no room left from push_back's doubling
    if (index_names) {
        by_name_.reserve(by_addr_.size());
        for (size_t i = 0; i < by_addr_.size(); ++i) by_name_.emplace(by_addr_[i].name, i);
    }
}

const ElfSymbol* ElfSymbols::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &by_addr_[it->second];
}

std::optional<uint64_t> ElfSymbols::vaddr_to_offset(uint64_t vaddr) const { return elf_reading::vaddr_to_offset(segments_, vaddr); }

std::optional<uint64_t> ElfSymbols::offset_to_vaddr(uint64_t offset) const { return elf_reading::offset_to_vaddr(segments_, offset); }

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
    if (!(h.elf = elf_begin(h.file.fd(), ELF_C_READ, nullptr))) return dirs;
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(h.elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize || !section_fits(sh, h.file.size())) continue;
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
    size_t bytes = by_addr_.capacity() * sizeof(ElfSymbol) + by_name_.size() * 48 + segments_.capacity() * sizeof(elf_reading::LoadSegment);
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
