// Call sites of a function inside one ELF file, found in its code: every direct `call` (or tail
// call, `jmp`) to the function or to its PLT stub, confirmed by disassembling the enclosing function (Capstone) from
// its start as .eh_frame_hdr gives it — a uprobe placed on a byte that is not an instruction's
// first would corrupt the process, so a site is only returned once it decodes as that call.
//
// Probing the call sites that matter instead of the function's entry keeps a probe off the hot
// paths that call the same function: libtorch constructs an at::RecordFunction for every
// autograd node, but only a handful of sites construct user-scope ranges.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct CallSite {
    uint64_t vaddr = 0;    // the call (or tail-call jmp) instruction
    uint64_t offset = 0;   // its file offset: where a uprobe goes
    uint64_t function = 0; // start of the function holding it
    // The second argument (%esi/%rsi) when an immediate sets it in the straight-line code right
    // before the call (no branch target, call or jump in between); empty when not known.
    std::optional<uint64_t> second_arg;
};

// Call sites in `path` of each named function (its dynamic or static symbol), keyed by name.
// Names without a definition or a PLT stub in the file are left out. An error means the file
// cannot be analysed (no .eh_frame_hdr, not x86-64): probe the functions' entries instead.
Result<std::map<std::string, std::vector<CallSite>>> find_call_sites(const std::string& path,
                                                                     const std::vector<std::string>& functions);

// The displacements of the memory loads (`mov REG, [BASE + DISP]`) of a function's first
// straight-line code, in order, up to its first jump, call or ret: how a small accessor reaches a
// field (a getter's `[rdi+0x10]` then `[rax+OFFSET]`). Empty when its code cannot be read.
std::vector<int64_t> first_load_displacements(const std::string& path, uint64_t vaddr, uint64_t size);

// The instructions by which each function (start vaddr, size) in `path` leaves — its `ret`s and
// its tail calls (a `jmp` to another function's start or a PLT stub) — as file offsets, keyed by
// the function's start: an entry probe there sees the function return without a return probe,
// whose replaced return address breaks C++ exceptions thrown through the frame. Found by
// disassembling the function from its start; a function whose code cannot be read has none.
Result<std::map<uint64_t, std::vector<uint64_t>>> find_return_sites(const std::string& path,
                                                                    const std::vector<std::pair<uint64_t, uint64_t>>& functions);

} // namespace gtrace
