#include "output/json_event_file.h"

#include <cstring>

#include <fmt/format.h>

#include "format/json_traces.h"
#include "format/nccl_names.h"

namespace gtrace {

void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    append_json_escaped(out, s);
    out += '"';
}

void append_json_escaped(std::string& out, std::string_view s) {
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
            else out += json_trace_char(c);
        }
    }
}

void append_us(std::string& out, uint64_t ns) { fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000); }

void append_json_arg(std::string& out, std::string_view name, const EventArg& a) {
    auto to = std::back_inserter(out);
    fmt::format_to(to, ",\"{}{}\":", name, a.type == ArgType::Time ? "_us" : "");
    switch (a.type) {
    case ArgType::Int: fmt::format_to(to, "{}", a.number); break;
    case ArgType::Uint: fmt::format_to(to, "{}", a.unsigned_value()); break;
    case ArgType::Text: append_json_string(out, a.text); break;
    case ArgType::Pointer: fmt::format_to(to, "\"{:#x}\"", a.unsigned_value()); break;
    case ArgType::Dims: fmt::format_to(to, "[{},{},{}]", a.dims[0], a.dims[1], a.dims[2]); break;
    case ArgType::Double:
        if (a.decimals >= 0) fmt::format_to(to, "{:.{}f}", a.real, a.decimals);
        else fmt::format_to(to, "{}", a.real);
        break;
    case ArgType::Flag: out += "true"; break;
    case ArgType::Time: append_us(out, a.unsigned_value()); break;
    case ArgType::Stack: out += "null"; break; // the writer's: "source" and "py_stack" (append_py_stack_args)
    }
}

void append_collective_args(std::string& out, const Collective& c) {
    append_args_object(out, [&](std::string& o) { for_each_collective_arg(c, [&](const EventArg& a) { append_json_arg(o, a.name, a); }); });
}

// Counters carry their value only (Perfetto makes a track of every argument, and fails on one
// that is not a number): the device is in the name, the curve's first point says so in its category.
const char* memory_counter_category(const MemorySample& m) {
    if (m.counter != MemoryCounter::Allocated) return "gpu_memory_at_attach";
    return m.at_attach ? "gpu_memory,at_attach" : "gpu_memory";
}

void append_memory_args(std::string& out, const MemorySample& m) {
    fmt::format_to(std::back_inserter(out), "{{\"{}\":{}}}", m.counter == MemoryCounter::Allocated ? "allocated_bytes" : "bytes",
                   m.allocated_bytes);
}

void append_nvtx_args(std::string& out, const NvtxRangeInfo& n, uint32_t tid) {
    for_each_nvtx_arg(n, tid, [&](const EventArg& a) { append_json_arg(out, a.name, a); });
}

Result<JsonEventFile> JsonEventFile::create(const std::string& path, bool force, std::string_view header) {
    auto sink = TraceSink::create(path, force, header);
    if (!sink) return sink.error();
    return JsonEventFile(std::move(*sink));
}

void JsonEventFile::emit(std::string_view event) {
    if (events_++) sink_.append(",\n");
    sink_.append(event);
    sink_.commit();
}

std::string JsonEventFile::error() const { return strerror(sink_.error()); }

Result<std::optional<TraceCut>> JsonEventFile::finish(const ClosingFn& closing) {
    auto tail = [&](const SinkCut* sink_cut) {
        std::optional<TraceCut> cut;
        if (sink_cut) cut = TraceCut{sink_cut->error, sink_cut->units_kept, events_ - sink_cut->units_kept};
        Closing c = closing(cut ? &*cut : nullptr);
        uint64_t events = cut ? cut->events_kept : events_;
        std::string bytes;
        for (const auto& ev : c.events) {
            if (events++) bytes += ",\n";
            bytes += ev;
        }
        return bytes + c.rest;
    };
    auto cut = sink_.finish(tail);
    if (!cut) return cut.error();
    if (!*cut) return std::optional<TraceCut>();
    return std::optional<TraceCut>(TraceCut{(*cut)->error, (*cut)->units_kept, events_ - (*cut)->units_kept});
}

} // namespace gtrace
