// The function symbols of one ELF file sorted by address, for naming sampled native addresses:
// 16 bytes a symbol, each name read from the file when it is asked for (an address is named once
// per process). pip torch 2.x's libtorch_cpu alone has 390,000 functions whose names take 60 MiB:
// held, they made a table too big for the tables' budget, reloaded sample after sample.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foundation/elf_reading.h"
#include "foundation/input_file.h"
#include "foundation/result.h"

namespace gtrace {

class ElfAddressTable {
public:
    // Reads `file`'s .symtab and .dynsym and its load segments (`shown` names it in errors).
    static Result<std::shared_ptr<const ElfAddressTable>> load(const InputFile& file, const std::string& shown);

    std::optional<uint64_t> offset_to_vaddr(uint64_t offset) const;
    // The (mangled) name of the function covering vaddr, or starting exactly there when its size
    // is 0, read from `file`: the file load() read. nullopt when none covers it or it is unreadable.
    std::optional<std::string> name_covering(uint64_t vaddr, const InputFile& file) const;

    size_t size() const { return entries_.size(); }
    size_t memory_bytes() const;

private:
    struct Entry {
        uint64_t vaddr;
        uint32_t size; // clipped: no function is 4 GiB long
        uint32_t name; // file offset of the name (a symbol named past 4 GiB in its file is left out)
    };
    struct Strings {
        uint64_t begin, end; // a string table's bytes in the file
    };
    std::optional<std::string> read_name(const Entry& e, const InputFile& file) const;

    std::vector<Entry> entries_; // sorted by vaddr, one per address
    std::vector<Strings> strings_;
    std::vector<elf_reading::LoadSegment> segments_;
    bool remote_ = false; // on a FUSE or network file system: names are read with a deadline
};

} // namespace gtrace
