// Symbols of one ELF file (.symtab and .dynsym), names held: lookup by name for probing, and
// by address for what names a few (elf_address_table.h names sampled addresses).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "foundation/elf_reading.h"
#include "foundation/input_file.h"
#include "foundation/result.h"

namespace gtrace {

struct ElfSymbol {
    uint64_t vaddr = 0;
    uint64_t size = 0;
    std::string name;
};

class ElfSymbols {
public:
    ElfSymbols() = default;
    // by_name_ views the names held in by_addr_: the object stays where it was built.
    ElfSymbols(const ElfSymbols&) = delete;
    ElfSymbols& operator=(const ElfSymbols&) = delete;
    // All function symbols, or with `only` set just the named functions and data objects.
    static Result<std::shared_ptr<const ElfSymbols>> load(const std::string& path,
                                                          const std::unordered_set<std::string_view>* only = nullptr);
    // The function symbols whose names `keep` accepts (a pattern rather than a list of names).
    static Result<std::shared_ptr<const ElfSymbols>> load_matching(const std::string& path,
                                                                   const std::function<bool(std::string_view)>& keep);

    // The defined function with this exact name, if any.
    const ElfSymbol* find(std::string_view name) const;
    // File offset of a virtual address (for uprobes), and back (for mapped addresses).
    std::optional<uint64_t> vaddr_to_offset(uint64_t vaddr) const;
    std::optional<uint64_t> offset_to_vaddr(uint64_t offset) const;
    // The symbol covering vaddr (or starting exactly at it when its size is 0).
    const ElfSymbol* covering(uint64_t vaddr) const;
    size_t size() const { return by_addr_.size(); }
    // About what the table holds in memory: symbols, their names' heap, the index by name.
    size_t memory_bytes() const;
    const std::vector<ElfSymbol>& all() const { return by_addr_; } // by address

private:
    static Result<std::shared_ptr<const ElfSymbols>> load_filtered(const std::string& path, bool objects,
                                                                   const std::function<bool(std::string_view)>& keep,
                                                                   bool index_names = true);
    static Result<std::shared_ptr<const ElfSymbols>> parse(InputFile file, const std::string& path, bool objects,
                                                           const std::function<bool(std::string_view)>& keep, bool index_names);
    void finish(bool index_names); // sorted by address, repeats dropped, indexed by name
    std::vector<ElfSymbol> by_addr_; // sorted by vaddr
    std::unordered_map<std::string_view, size_t> by_name_; // views of by_addr_'s names: one copy of each

    std::vector<elf_reading::LoadSegment> segments_;
};

// The DT_RUNPATH and DT_RPATH directories of an ELF file, $ORIGIN expanded to `origin`.
std::vector<std::string> elf_search_paths(const std::string& path, const std::string& origin);

// Demangled C++ name, or the input when it is not a mangled name.
std::string demangle(const std::string& name);

} // namespace gtrace
