// An ELF file a traced process maps (its libraries are its owner's to craft): symbol tables
// (.symtab/.dynsym, their strings), program headers for file offsets, RUNPATH/RPATH, and the call
// and return sites found by disassembly (capstone). Section headers may claim any size and
// offset: nothing may be read or allocated past what the file holds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "attach/call_sites.h"
#include "foundation/elf_address_table.h"
#include "foundation/elf_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    static int fd = memfd_create("fuzz-elf", 0);
    if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    size_t sink = 0;
    if (auto syms = ElfSymbols::load(path)) {
        for (const ElfSymbol& s : (*syms)->all()) {
            sink += s.name.size();
            if (auto off = (*syms)->vaddr_to_offset(s.vaddr)) sink += static_cast<size_t>(*off);
            if ((*syms)->covering(s.vaddr + 1)) ++sink;
        }
        if (!(*syms)->all().empty()) {
            const ElfSymbol& first = (*syms)->all().front();
            if (auto sites = find_return_sites(path, {{first.vaddr, first.size}})) sink += sites->size();
        }
    }
    if (auto file = open_input_file(path))
        if (auto by_address = ElfAddressTable::load(*file, path)) {
            sink += (*by_address)->size();
            for (uint64_t offset : {uint64_t{0}, uint64_t{0x1000}, static_cast<uint64_t>(size / 2)})
                if (auto vaddr = (*by_address)->offset_to_vaddr(offset))
                    if (auto name = (*by_address)->name_covering(*vaddr, *file)) sink += name->size();
        }
    for (const auto& dir : elf_search_paths(path, "/origin")) sink += dir.size();
    if (auto calls = find_call_sites(path, {"cudaLaunchKernel"})) sink += calls->size();
    return sink == 0xdeadbeef;
}
