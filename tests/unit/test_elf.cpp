// ELF symbol lookup: finding CUDA exports for probes and naming stub addresses.
#include <catch2/catch.hpp>

#include <algorithm>

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

TEST_CASE("an executable's RUNPATH is read, with $ORIGIN expanded") {
    auto dirs = elf_search_paths(std::string(TEST_PROGRAMS) + "/cuda_calls", "/origin");
    CHECK(std::find(dirs.begin(), dirs.end(), std::string(CUDA_LIB)) != dirs.end());
    CHECK(elf_search_paths("/etc/hostname", "/").empty());
}
