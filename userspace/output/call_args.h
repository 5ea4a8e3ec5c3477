// A CUDA call event's arguments, named and typed once for every writer (Chrome JSON, Kineto,
// .pftrace): for_each_call_arg visits them in one order, and each writer only encodes what it is
// given — the JSON writers as numbers, texts and [x,y,z] arrays (pointers as "0x…" texts); the
// .pftrace as debug annotations, with the byte-saving encodings docs/trace-formats.md lists
// (correlation in the flow, the launch's shape as one text, ret only when not 0, recorded_by in
// the category, the stack as an interned callstack). kCallArgNames is the vocabulary;
// tests/runtime/docs_check.py holds docs/trace-formats.md to it.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "decode/api_call.h"
#include "format/api_table.h"

namespace gtrace {

enum class CallArgType : uint8_t { Int, Uint, Text, Pointer, Dims, Stack };

struct CallArg {
    std::string_view name;
    CallArgType type = CallArgType::Uint;
    int64_t number = 0;              // Int; Uint and Pointer as their bits
    std::string_view text;           // Text
    std::array<uint32_t, 3> dims{};  // Dims
    const PyStack* stack = nullptr;  // Stack: written as "source" and "py_stack"
    uint64_t unsigned_value() const { return static_cast<uint64_t>(number); }
};

// Every name a call's arguments may carry, in the order they are visited ("source" and
// "py_stack" are the one Stack argument's two JSON fields).
inline constexpr std::array<std::string_view, 19> kCallArgNames = {
    "correlation", "ret",    "recorded_by", "kernel", "grid",   "block",  "shared_mem", "stream",          "bytes",       "kind",
    "ptr",         "event",  "graph",       "handle", "source", "py_stack", "stack_of_thread", "sequence_nr", "forward_source"};

// Calls `visit(const CallArg&)` for each argument `c` carries.
template <typename Visit>
void for_each_call_arg(const ApiCall& c, Visit&& visit) {
    auto uint = [&](std::string_view name, uint64_t v) { visit(CallArg{name, CallArgType::Uint, static_cast<int64_t>(v), {}, {}, nullptr}); };
    auto pointer = [&](std::string_view name, uint64_t v) {
        visit(CallArg{name, CallArgType::Pointer, static_cast<int64_t>(v), {}, {}, nullptr});
    };
    auto text = [&](std::string_view name, std::string_view v) { visit(CallArg{name, CallArgType::Text, 0, v, {}, nullptr}); };
    if (c.correlation) uint("correlation", c.correlation);
    visit(CallArg{"ret", CallArgType::Int, c.ret, {}, {}, nullptr});
    if (c.by_agent) text("recorded_by", "agent");
    if (c.launch) {
        const LaunchArgs& l = *c.launch;
        text("kernel", c.kernel);
        visit(CallArg{"grid", CallArgType::Dims, 0, {}, {l.grid.x, l.grid.y, l.grid.z}, nullptr});
        visit(CallArg{"block", CallArgType::Dims, 0, {}, {l.block.x, l.block.y, l.block.z}, nullptr});
        uint("shared_mem", l.shared_mem);
    }
    if (c.stream) pointer("stream", *c.stream);
    if (c.bytes) uint("bytes", *c.bytes);
    if (c.copy_kind) text("kind", copy_kind_name(*c.copy_kind));
    if (c.ptr) pointer("ptr", *c.ptr);
    if (c.event) pointer("event", *c.event);
    if (c.graph) pointer("graph", *c.graph);
    if (c.handle) pointer("handle", *c.handle);
    if (c.stack) visit(CallArg{"py_stack", CallArgType::Stack, 0, {}, {}, c.stack.get()});
    if (c.stack_thread) uint("stack_of_thread", c.stack_thread);
    if (c.sequence_nr) {
        uint("sequence_nr", *c.sequence_nr);
        if (c.forward_stack) text("forward_source", c.forward_stack->source);
    }
}

} // namespace gtrace
