#include <catch2/catch.hpp>

#include <map>

#include "attach/call_sites.h"
#include "foundation/elf_symbols.h"

using namespace gtrace;

TEST_CASE("call sites: every call and tail call of a function through its PLT, with the immediate second argument") {
    std::string lib = std::string(TEST_PROGRAMS) + "/libcall_sites_lib.so";
    auto found = find_call_sites(lib, {"gt_target", "no_such_function"});
    REQUIRE(found);
    REQUIRE(found->contains("gt_target"));
    REQUIRE_FALSE(found->contains("no_such_function"));
    auto syms = ElfSymbols::load(lib);
    REQUIRE(syms);
    std::map<std::string, const CallSite*> by_caller;
    for (const CallSite& c : found->at("gt_target")) {
        const ElfSymbol* caller = (*syms)->covering(c.vaddr);
        REQUIRE(caller);
        CHECK(caller->vaddr == c.function); // the function start came from .eh_frame_hdr
        CHECK((*syms)->vaddr_to_offset(c.vaddr) == c.offset);
        by_caller[caller->name] = &c;
    }
    REQUIRE(by_caller.size() == 4);
    CHECK(by_caller.at("gt_caller_user")->second_arg == 7u);
    CHECK(by_caller.at("gt_caller_other")->second_arg == 2u);
    CHECK_FALSE(by_caller.at("gt_caller_variable")->second_arg.has_value());
    CHECK(by_caller.at("gt_caller_tail")->second_arg == 7u);
}

TEST_CASE("call sites: a file that is not an ELF object is refused") {
    CHECK_FALSE(find_call_sites("/etc/hostname", {"x"}));
    CHECK_FALSE(find_call_sites("/dev/null", {"x"}));
}

TEST_CASE("return sites: every ret instruction of a function, and the jmp of one that leaves by a tail call") {
    std::string lib = std::string(TEST_PROGRAMS) + "/libcall_sites_lib.so";
    auto syms = ElfSymbols::load(lib);
    REQUIRE(syms);
    const ElfSymbol* target = (*syms)->find("gt_target");
    const ElfSymbol* user = (*syms)->find("gt_caller_user");
    const ElfSymbol* tail = (*syms)->find("gt_caller_tail");
    REQUIRE((target && user && tail));
    auto rets = find_return_sites(lib, {{target->vaddr, target->size}, {user->vaddr, user->size}, {tail->vaddr, tail->size}});
    REQUIRE(rets);
    FILE* f = fopen(lib.c_str(), "rb");
    REQUIRE(f);
    // jmp gt_target@plt: the function is over there (its frame gone; gt_target returns to its caller).
    REQUIRE(rets->at(tail->vaddr).size() == 1);
    fseek(f, static_cast<long>(rets->at(tail->vaddr).front()), SEEK_SET);
    CHECK(fgetc(f) == 0xe9);
    for (const ElfSymbol* s : {target, user}) {
        REQUIRE_FALSE(rets->at(s->vaddr).empty());
        for (uint64_t offset : rets->at(s->vaddr)) {
            auto start = (*syms)->vaddr_to_offset(s->vaddr);
            REQUIRE(start);
            CHECK(offset >= *start);
            CHECK(offset < *start + s->size);
            fseek(f, static_cast<long>(offset), SEEK_SET);
            int byte = fgetc(f);
            if (byte == 0xf3) byte = fgetc(f); // repz ret
            CHECK(byte == 0xc3);
        }
    }
    fclose(f);
    CHECK_FALSE(find_return_sites("/etc/hostname", {{0, 1}}));
}
