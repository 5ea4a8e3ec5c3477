// ELF symbol lookup: finding CUDA exports for probes and naming stub addresses.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cstdio>
#include <exception>

#include <unistd.h>

#include "decode/address_symbols.h"
#include "discover/proc_maps.h"
#include "foundation/elf_address_table.h"
#include "foundation/elf_symbols.h"

using namespace gtrace;

TEST_CASE("libcudart exports the probed runtime API, with file offsets") {
    auto syms = ElfSymbols::load(std::string(CUDA_LIB) + "/libcudart.so");
    REQUIRE(syms);
    for (const char* name : {"cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaMemcpyAsync", "cudaGraphLaunch"}) {
        const ElfSymbol* s = (*syms)->find(name);
        REQUIRE(s);
        auto off = (*syms)->vaddr_to_offset(s->vaddr);
        REQUIRE(off);
        CHECK((*syms)->offset_to_vaddr(*off) == s->vaddr);
        CHECK((*syms)->covering(s->vaddr + 1)->name == name);
    }
    CHECK_FALSE((*syms)->find("definitelyNotASymbol"));
}

TEST_CASE("a name filter keeps only the asked-for symbols") {
    std::unordered_set<std::string_view> only{"cudaMalloc", "cuLaunchKernel"};
    auto syms = ElfSymbols::load(std::string(CUDA_LIB) + "/libcudart.so", &only);
    REQUIRE(syms);
    CHECK((*syms)->size() == 1);
    CHECK((*syms)->find("cudaMalloc"));
}

TEST_CASE("kernel stubs are named from the test program's symbols, demangled") {
    auto syms = ElfSymbols::load(std::string(TEST_PROGRAMS) + "/cuda_calls");
    REQUIRE(syms);
    bool found = false;
    for (const char* mangled : {"_ZN11gtrace_test10vector_addEPfPKfi"})
        if (const ElfSymbol* s = (*syms)->find(mangled)) found = demangle(s->name) == "gtrace_test::vector_add(float*, float const*, int)";
    CHECK(found);
    CHECK(demangle("cudaLaunchKernel") == "cudaLaunchKernel");
    CHECK_FALSE(ElfSymbols::load("/etc/hostname"));
}

TEST_CASE("addresses are named the same when the symbol tables' budget lets files go and come back") {
    // A budget of one byte: every lookup in the other library evicts the last one's table.
    TargetFiles files;
    AddressSymbols tight(files, 1), roomy(files);
    auto self = static_cast<uint32_t>(getpid());
    for (AddressSymbols* a : {&tight, &roomy}) a->set_maps(self, read_maps(getpid()));
    auto in_libc = reinterpret_cast<uint64_t>(&fopen) + 1, in_libstdcxx = reinterpret_cast<uint64_t>(&std::terminate) + 1;
    std::string libc_name = roomy.name_at(self, in_libc), cxx_name = roomy.name_at(self, in_libstdcxx);
    CHECK(libc_name.find("fopen") != std::string::npos);
    CHECK(cxx_name.find("terminate") != std::string::npos);
    for (int round = 0; round < 3; ++round) {
        AddressSymbols fresh(files, 1); // the per-process name cache would hide a reload
        fresh.set_maps(self, read_maps(getpid()));
        CHECK(fresh.name_at(self, in_libc) == libc_name);
        CHECK(fresh.name_at(self, in_libstdcxx) == cxx_name);
        CHECK(fresh.name_at(self, in_libc + 1) == libc_name);
        CHECK(tight.name_at(self, in_libstdcxx + round) == cxx_name);
        CHECK(tight.name_at(self, in_libc + round) == libc_name);
    }
}

TEST_CASE("the address table names each function as the full symbol table does, holding 16 bytes a symbol") {
    // cuda_calls keeps its .symtab (local functions too) beside .dynsym.
    std::string path = std::string(TEST_PROGRAMS) + "/cuda_calls";
    auto full = ElfSymbols::load(path);
    auto file = open_input_file(path);
    REQUIRE(full);
    REQUIRE(file);
    auto table = ElfAddressTable::load(*file, path);
    REQUIRE(table);
    CHECK((*table)->memory_bytes() <= (*table)->size() * 16 + 1024);
    size_t named = 0;
    for (const ElfSymbol& s : (*full)->all()) {
        if (s.size == 0) continue;
        auto name = (*table)->name_covering(s.vaddr + s.size - 1, *file);
        REQUIRE(name);
        // Aliases share an address: the name is one of the symbols there.
        bool alias = false;
        for (const ElfSymbol& other : (*full)->all()) alias = alias || (other.vaddr == s.vaddr && other.name == *name);
        CHECK(alias);
        ++named;
    }
    CHECK(named > 10);
    CHECK_FALSE((*table)->name_covering(0, *file));
    auto not_elf = open_input_file("/etc/hostname");
    REQUIRE(not_elf);
    CHECK_FALSE(ElfAddressTable::load(*not_elf, "/etc/hostname"));
}

TEST_CASE("an executable's RUNPATH is read, with $ORIGIN expanded") {
    auto dirs = elf_search_paths(std::string(TEST_PROGRAMS) + "/cuda_calls", "/origin");
    CHECK(std::find(dirs.begin(), dirs.end(), std::string(CUDA_LIB)) != dirs.end());
    CHECK(elf_search_paths("/etc/hostname", "/").empty());
}
