#include "output/gpu_tracks.h"

#include <fmt/format.h>

#include "decode/api_table.h"

namespace gtrace {
namespace {

void append_us(std::string& out, uint64_t ns) { fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000); }

const char* category(GpuOpKind k) {
    switch (k) {
    case GpuOpKind::Kernel: return "kernel";
    case GpuOpKind::Memcpy: return "gpu_memcpy";
    case GpuOpKind::Memset: return "gpu_memset";
    default: return "gpu_sync";
    }
}

} // namespace

void GpuTracks::write_op(const GpuOp& op) {
    if (!writer_.admit(op.start_ns)) return;
    uint32_t tid = gpu_track_tid(op.device, op.stream);
    auto key = std::make_pair(op.pid, tid);
    if (!names_.contains(key)) names_[key] = fmt::format("GPU {} · stream {}", op.device, op.stream);
    buf_.clear();
    auto out = std::back_inserter(buf_);
    buf_ += "{\"name\":\"";
    append_json_escaped(buf_, op.name);
    fmt::format_to(out, "\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", category(op.kind), op.pid, tid);
    append_us(buf_, op.start_ns);
    buf_ += ",\"dur\":";
    append_us(buf_, op.end_ns > op.start_ns ? op.end_ns - op.start_ns : 0);
    fmt::format_to(out, ",\"args\":{{\"correlation\":{},\"device\":{},\"context\":{},\"stream\":{}", op.correlation,
                   op.device, op.context, op.stream);
    if (op.kind == GpuOpKind::Kernel) {
        fmt::format_to(out, ",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"registers_per_thread\":{},"
                            "\"shared_memory_static\":{},\"shared_memory_dynamic\":{}",
                       op.grid[0], op.grid[1], op.grid[2], op.block[0], op.block[1], op.block[2], op.registers,
                       op.static_shared, op.dynamic_shared);
        if (op.graph) buf_ += ",\"graph\":true";
    } else {
        fmt::format_to(out, ",\"bytes\":{}", op.bytes);
        if (op.kind == GpuOpKind::Memcpy)
            fmt::format_to(out, ",\"kind\":\"{}\",\"bandwidth_GBps\":{:.3f}", op.copy_kind, op.bandwidth_gbps());
    }
    buf_ += "}}";
    writer_.write_event(buf_);
}

void GpuTracks::write_flow(const CallRef& call, const GpuOp& op) {
    if (!writer_.in_window(call.start_ns) || !writer_.in_window(op.start_ns)) return;
    uint64_t id = next_flow_++;
    buf_.clear();
    auto out = std::back_inserter(buf_);
    // The start binds to the call's slice (its midpoint lies inside it), the end to the GPU slice.
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"ac2g\",\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   api_name(call.api), id, call.pid, call.tid);
    append_us(buf_, call.start_ns + (call.end_ns - call.start_ns) / 2);
    buf_ += "}";
    writer_.write_event(buf_);
    buf_.clear();
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"ac2g\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                   api_name(call.api), id, op.pid, gpu_track_tid(op.device, op.stream));
    append_us(buf_, op.start_ns);
    fmt::format_to(out, ",\"args\":{{\"correlation\":{},\"launch_tid\":{}}}}}", op.correlation, call.tid);
    writer_.write_event(buf_);
}

} // namespace gtrace
