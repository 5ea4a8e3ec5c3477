#include "decode/address_symbols.h"

#include <fmt/format.h>

namespace gtrace {
namespace {

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr) {
    for (const auto& m : maps)
        if (addr >= m.start && addr < m.end) return &m;
    return nullptr;
}

std::string basename(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

constexpr size_t kMaxFiles = 1024;
constexpr size_t kMaxNamesPerProcess = 1 << 16;

} // namespace

std::shared_ptr<const ElfSymbols> AddressSymbols::symbols_for(uint32_t pid, const Mapping& m) {
    FileKey key{m.dev, m.inode};
    if (auto it = files_.find(key); it != files_.end()) {
        it->second.last_use = ++uses_;
        return it->second.symbols;
    }
    std::shared_ptr<const ElfSymbols> syms;
    if (auto file = target_files_.open_mapped(static_cast<int>(pid), m))
        if (auto loaded = ElfSymbols::load_by_address(file->fd_path())) syms = *loaded;
    size_t bytes = syms ? syms->memory_bytes() : 0;
    files_.emplace(key, File{syms, ++uses_, bytes});
    bytes_held_ += bytes;
    trim_files(key);
    return syms;
}

void AddressSymbols::trim_files(const FileKey& keep) {
    while ((bytes_held_ > max_bytes_ || files_.size() > kMaxFiles) && files_.size() > 1) {
        auto oldest = files_.end();
        for (auto it = files_.begin(); it != files_.end(); ++it)
            if (it->first != keep && (oldest == files_.end() || it->second.last_use < oldest->second.last_use)) oldest = it;
        bytes_held_ -= oldest->second.bytes;
        files_.erase(oldest);
    }
}

std::string AddressSymbols::name_at(uint32_t pid, uint64_t addr) {
    ProcessState& ps = processes_[pid];
    if (auto it = ps.names.find(addr); it != ps.names.end()) return it->second;

    const Mapping* m = find_mapping(ps.maps, addr);
    if (!m) { // a library mapped since the last snapshot
        if (auto fresh = read_maps(static_cast<int>(pid)); !fresh.empty()) ps.maps = std::move(fresh);
        m = find_mapping(ps.maps, addr);
    }
    std::string name;
    if (m && m->is_file()) {
        uint64_t offset = addr - m->start + m->offset;
        if (auto syms = symbols_for(pid, *m)) {
            auto vaddr = syms->offset_to_vaddr(offset);
            if (const ElfSymbol* sym = vaddr ? syms->covering(*vaddr) : nullptr) name = demangle(sym->name);
        }
        if (name.empty()) name = fmt::format("{}+{:#x}", basename(m->path), offset);
    }
    if (ps.names.size() >= kMaxNamesPerProcess) ps.names.clear(); // a hot loop's addresses come back at once
    ps.names.emplace(addr, name);
    return name;
}

void AddressSymbols::set_maps(uint32_t pid, std::vector<Mapping> maps) {
    if (maps.empty()) return;
    ProcessState& ps = processes_[pid];
    if (ps.maps == maps) return; // the periodic rescan usually finds nothing new: keep the names
    ps.maps = std::move(maps);
    ps.names.clear(); // an address may now belong to another object
}

void AddressSymbols::inherit(uint32_t child, uint32_t parent) {
    auto it = processes_.find(parent);
    if (it != processes_.end()) processes_[child].maps = it->second.maps;
}

void AddressSymbols::forget_process(uint32_t pid) { processes_.erase(pid); }

} // namespace gtrace
