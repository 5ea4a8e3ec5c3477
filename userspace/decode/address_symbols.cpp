#include "decode/address_symbols.h"

#include "foundation/elf_symbols.h"

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

// Whether the file-backed mappings of two snapshots are the same, in order.
bool same_file_mappings(const std::vector<Mapping>& a, const std::vector<Mapping>& b) {
    auto ai = a.begin(), bi = b.begin();
    for (;;) {
        while (ai != a.end() && !ai->is_file()) ++ai;
        while (bi != b.end() && !bi->is_file()) ++bi;
        if (ai == a.end() || bi == b.end()) return ai == a.end() && bi == b.end();
        if (!(*ai++ == *bi++)) return false;
    }
}

constexpr size_t kMaxFiles = 1024;
// Files kept open to read names from; the others are opened again when one is asked for.
constexpr size_t kMaxOpenFiles = 64;
constexpr size_t kMaxNamesPerProcess = 1 << 16;

} // namespace

AddressSymbols::File* AddressSymbols::file_for(uint32_t pid, const Mapping& m) {
    FileKey key{m.dev, m.inode};
    auto it = files_.find(key);
    if (it == files_.end()) {
        File file;
        if (auto opened = target_files_.open_mapped(static_cast<int>(pid), m)) {
            file.open = std::make_shared<InputFile>(std::move(*opened));
            if (auto loaded = ElfAddressTable::load(*file.open, m.path)) file.table = *loaded;
        }
        file.bytes = file.table ? file.table->memory_bytes() : 0;
        bytes_held_ += file.bytes;
        it = files_.emplace(key, std::move(file)).first;
        trim_files(key);
    } else if (it->second.table && !it->second.open) { // its descriptor was closed meanwhile
        if (auto opened = target_files_.open_mapped(static_cast<int>(pid), m))
            it->second.open = std::make_shared<InputFile>(std::move(*opened));
    }
    it->second.last_use = ++uses_;
    close_idle_files(key);
    return &it->second;
}

std::string AddressSymbols::function_at(uint32_t pid, const Mapping& m, uint64_t offset) {
    File* file = file_for(pid, m);
    if (!file->table || !file->open) return {};
    auto vaddr = file->table->offset_to_vaddr(offset);
    auto name = vaddr ? file->table->name_covering(*vaddr, *file->open) : std::nullopt;
    return name ? demangle(*name) : std::string();
}

void AddressSymbols::close_idle_files(const FileKey& keep) {
    size_t open = 0;
    for (const auto& [key, file] : files_) open += file.open != nullptr;
    while (open > kMaxOpenFiles) {
        auto oldest = files_.end();
        for (auto it = files_.begin(); it != files_.end(); ++it)
            if (it->second.open && it->first != keep && (oldest == files_.end() || it->second.last_use < oldest->second.last_use))
                oldest = it;
        if (oldest == files_.end()) return;
        oldest->second.open.reset();
        --open;
    }
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
        name = function_at(pid, *m, offset);
        if (name.empty()) name = fmt::format("{}+{:#x}", basename(m->path), offset);
    }
    if (ps.names.size() >= kMaxNamesPerProcess) ps.names.clear(); // a hot loop's addresses come back at once
    ps.names.emplace(addr, name);
    return name;
}

void AddressSymbols::set_maps(uint32_t pid, std::vector<Mapping> maps) {
    if (maps.empty()) return;
    ProcessState& ps = processes_[pid];
    // The periodic rescan mostly finds anonymous memory come and gone (the allocators' arenas):
    // names are kept unless a file's mapping changed, and an address may now be another object's.
    bool same_files = same_file_mappings(ps.maps, maps);
    ps.maps = std::move(maps);
    if (!same_files) ps.names.clear();
}

void AddressSymbols::inherit(uint32_t child, uint32_t parent) {
    auto it = processes_.find(parent);
    if (it != processes_.end()) processes_[child].maps = it->second.maps;
}

void AddressSymbols::forget_process(uint32_t pid) { processes_.erase(pid); }

} // namespace gtrace
