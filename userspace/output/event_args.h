// The events' arguments, named and typed once for every writer (Chrome JSON, Kineto, .pftrace):
// for each kind of event a visitor (for_each_call_arg, for_each_gpu_op_arg,
// for_each_collective_arg, for_each_nvtx_arg) hands each argument it carries, in one order, to the
// writer, which only encodes it — the JSON writers with append_json_arg (output/json_event_file.h;
// Kineto renames a few as torch.profiler names them: "External id", "cuda_stream", "registers per
// thread", …); the .pftrace as debug annotations, with the byte-saving encodings
// docs/trace-formats.md lists (correlation in the flow, a launch's shape as one text, ret only when
// not 0, recorded_by in the category, the stack as an interned callstack, a GPU op's device and
// stream in its track). The k…ArgNames tables are the vocabulary; tests/runtime/docs_check.py holds
// docs/trace-formats.md to them.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "decode/api_call.h"
#include "decode/collective.h"
#include "decode/gpu_activity.h"
#include "decode/nvtx_range.h"
#include "format/api_table.h"
#include "format/nccl_names.h"

namespace gtrace {

// Time: nanoseconds on the trace's clock, written "NAME_us" (microseconds) in JSON, "NAME_ns" in .pftrace.
enum class ArgType : uint8_t { Int, Uint, Text, Pointer, Dims, Stack, Double, Flag, Time };

struct EventArg {
    std::string_view name;
    ArgType type = ArgType::Uint;
    int64_t number = 0;             // Int; Uint, Pointer and Time as their bits
    std::string_view text;          // Text
    std::array<int64_t, 3> dims{};  // Dims
    double real = 0;                // Double
    int decimals = -1;              // Double: its digits after the point in JSON; -1: as many as it takes
    const PyStack* stack = nullptr; // Stack: written as "source" and "py_stack"
    uint64_t unsigned_value() const { return static_cast<uint64_t>(number); }

    static EventArg of(std::string_view n, ArgType t, int64_t number = 0) {
        EventArg a;
        a.name = n, a.type = t, a.number = number;
        return a;
    }
    static EventArg integer(std::string_view n, int64_t v) { return of(n, ArgType::Int, v); }
    static EventArg uint(std::string_view n, uint64_t v) { return of(n, ArgType::Uint, static_cast<int64_t>(v)); }
    static EventArg pointer(std::string_view n, uint64_t v) { return of(n, ArgType::Pointer, static_cast<int64_t>(v)); }
    static EventArg time(std::string_view n, uint64_t ns) { return of(n, ArgType::Time, static_cast<int64_t>(ns)); }
    static EventArg flag(std::string_view n) { return of(n, ArgType::Flag, 1); }
    static EventArg string(std::string_view n, std::string_view v) {
        EventArg a = of(n, ArgType::Text);
        a.text = v;
        return a;
    }
    static EventArg triple(std::string_view n, int64_t x, int64_t y, int64_t z) {
        EventArg a = of(n, ArgType::Dims);
        a.dims = {x, y, z};
        return a;
    }
    static EventArg real_number(std::string_view n, double v, int decimals) {
        EventArg a = of(n, ArgType::Double);
        a.real = v, a.decimals = decimals;
        return a;
    }
    static EventArg py_stack(const PyStack* s) {
        EventArg a = of("py_stack", ArgType::Stack);
        a.stack = s;
        return a;
    }
};

// Every name a call's arguments may carry, in the order they are visited ("source" and
// "py_stack" are the one Stack argument's two JSON fields).
inline constexpr std::array<std::string_view, 19> kCallArgNames = {
    "correlation", "ret",    "recorded_by", "kernel", "grid",   "block",  "shared_mem", "stream",          "bytes",       "kind",
    "ptr",         "event",  "graph",       "handle", "source", "py_stack", "stack_of_thread", "sequence_nr", "forward_source"};

// Calls `visit(const EventArg&)` for each argument `c` carries.
template <typename Visit>
void for_each_call_arg(const ApiCall& c, Visit&& visit) {
    if (c.correlation) visit(EventArg::uint("correlation", c.correlation));
    visit(EventArg::integer("ret", c.ret));
    if (c.by_agent) visit(EventArg::string("recorded_by", "agent"));
    if (c.launch) {
        const LaunchArgs& l = *c.launch;
        visit(EventArg::string("kernel", c.kernel));
        visit(EventArg::triple("grid", l.grid.x, l.grid.y, l.grid.z));
        visit(EventArg::triple("block", l.block.x, l.block.y, l.block.z));
        visit(EventArg::uint("shared_mem", l.shared_mem));
    }
    if (c.stream) visit(EventArg::pointer("stream", *c.stream));
    if (c.bytes) visit(EventArg::uint("bytes", *c.bytes));
    if (c.copy_kind) visit(EventArg::string("kind", copy_kind_name(*c.copy_kind)));
    if (c.ptr) visit(EventArg::pointer("ptr", *c.ptr));
    if (c.event) visit(EventArg::pointer("event", *c.event));
    if (c.graph) visit(EventArg::pointer("graph", *c.graph));
    if (c.handle) visit(EventArg::pointer("handle", *c.handle));
    if (c.stack) visit(EventArg::py_stack(c.stack.get()));
    if (c.stack_thread) visit(EventArg::uint("stack_of_thread", c.stack_thread));
    if (c.sequence_nr) {
        visit(EventArg::uint("sequence_nr", *c.sequence_nr));
        if (c.forward_stack) visit(EventArg::string("forward_source", c.forward_stack->source));
    }
}

// A GPU op's (kernel, copy, set: CUPTI's activity record) arguments.
inline constexpr std::array<std::string_view, 13> kGpuOpArgNames = {
    "correlation", "device", "context", "stream", "grid", "block", "registers_per_thread", "shared_memory_static",
    "shared_memory_dynamic", "graph", "bytes", "kind", "bandwidth_GBps"};

template <typename Visit>
void for_each_gpu_op_arg(const GpuOp& op, Visit&& visit) {
    visit(EventArg::uint("correlation", op.correlation));
    visit(EventArg::uint("device", op.device));
    visit(EventArg::uint("context", op.context));
    visit(EventArg::uint("stream", op.stream));
    if (op.kind == GpuOpKind::Kernel) {
        visit(EventArg::triple("grid", op.grid[0], op.grid[1], op.grid[2]));
        visit(EventArg::triple("block", op.block[0], op.block[1], op.block[2]));
        visit(EventArg::uint("registers_per_thread", op.registers));
        visit(EventArg::uint("shared_memory_static", op.static_shared));
        visit(EventArg::uint("shared_memory_dynamic", op.dynamic_shared));
        if (op.graph) visit(EventArg::flag("graph"));
        return;
    }
    visit(EventArg::uint("bytes", op.bytes));
    if (op.kind == GpuOpKind::Memcpy) visit(EventArg::string("kind", op.copy_kind));
    visit(EventArg::real_number("bandwidth_GBps", op.bandwidth_gbps(), 3)); // a copy's and a set's
}

// A collective's arguments: an NCCL API call's, or a c10d call's or wait's ("issued": a wait's
// collective's call entry, which the analysis pairs the two by).
inline constexpr std::array<std::string_view, 14> kCollectiveArgNames = {
    "phase", "count", "bytes", "datatype", "redop", "stream", "peer", "nranks", "comm", "group_depth", "result", "op", "backend", "issued"};

template <typename Visit>
void for_each_collective_arg(const Collective& c, Visit&& visit) {
    if (const NcclArgs* a = c.nccl ? &*c.nccl : nullptr) {
        visit(EventArg::string("phase", "nccl"));
        if (nccl_api_moves_data(a->api)) {
            visit(EventArg::uint("count", a->count));
            visit(EventArg::uint("bytes", a->bytes));
            if (a->datatype) visit(EventArg::string("datatype", a->datatype));
            if (a->redop) visit(EventArg::string("redop", a->redop));
            visit(EventArg::pointer("stream", a->stream));
        }
        if (a->peer >= 0) visit(EventArg::uint("peer", static_cast<uint64_t>(a->peer)));
        if (a->nranks) visit(EventArg::uint("nranks", a->nranks));
        visit(EventArg::uint("comm", c.group));
        visit(EventArg::uint("group_depth", a->group_depth));
        if (a->result) visit(EventArg::uint("result", static_cast<uint32_t>(a->result)));
        return;
    }
    visit(EventArg::string("phase", c.wait ? "wait" : "issue"));
    if (c.op) visit(EventArg::string("op", c.op));
    if (c.backend) visit(EventArg::string("backend", c.backend));
    if (c.wait && c.issued_ns) visit(EventArg::time("issued", c.issued_ns));
}

// An NVTX range's arguments (`tid`: the thread it began on).
inline constexpr std::array<std::string_view, 5> kNvtxArgNames = {"domain", "kind", "category", "payload", "end_tid"};

template <typename Visit>
void for_each_nvtx_arg(const NvtxRangeInfo& n, uint32_t tid, Visit&& visit) {
    visit(EventArg::string("domain", n.domain));
    visit(EventArg::string("kind", n.push_pop ? "push_pop" : "start_end"));
    if (n.category) visit(EventArg::uint("category", n.category));
    if (n.payload) visit(EventArg::real_number("payload", *n.payload, -1));
    if (n.end_tid && n.end_tid != tid) visit(EventArg::uint("end_tid", n.end_tid));
}

} // namespace gtrace
