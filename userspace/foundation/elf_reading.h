// What gtrace's ELF readers (elf_symbols.h, elf_address_table.h) share. A traced process's files
// are hostile input: they are read, never mapped (a library truncated by its owner while gtrace
// reads it must not fault gtrace with SIGBUS), each section is checked against the file's size
// before libelf allocates what its header claims, and a file on a FUSE or network file system
// is read with a deadline (its server may never answer).
#pragma once
#include <gelf.h>
#include <libelf.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "foundation/input_file.h"

namespace gtrace::elf_reading {

struct ElfHandle {
    InputFile file; // a regular file only: the path may be a hostile user's FIFO or device
    Elf* elf = nullptr;
    ElfHandle() = default;
    ElfHandle(const ElfHandle&) = delete;
    ElfHandle& operator=(const ElfHandle&) = delete;
    ~ElfHandle() {
        if (elf) elf_end(elf);
    }
};

// A section that lies inside the file.
bool section_fits(const GElf_Shdr& s, uint64_t file_size);

// FUSE and the network file systems: a server gtrace does not control answers their reads.
bool on_remote_file_system(int fd);
// Devices whose reads missed a deadline once: not read again.
bool unanswering_device(dev_t dev);
void mark_unanswering(dev_t dev);

// PT_LOAD segments: file offsets <-> virtual addresses.
struct LoadSegment {
    uint64_t vaddr, offset, filesz;
};
std::vector<LoadSegment> load_segments(Elf* elf);
std::optional<uint64_t> vaddr_to_offset(const std::vector<LoadSegment>& segments, uint64_t vaddr);
std::optional<uint64_t> offset_to_vaddr(const std::vector<LoadSegment>& segments, uint64_t offset);

// Every defined function symbol of .symtab and .dynsym (data objects too with `objects`), with
// the header of the string table its name is in.
void for_each_symbol(Elf* elf, uint64_t file_size, bool objects,
                     const std::function<void(const GElf_Sym& sym, size_t strings_index, const GElf_Shdr& strings)>& each);

} // namespace gtrace::elf_reading
