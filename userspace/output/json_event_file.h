// A JSON trace file of the Chrome trace event kind (gtrace's own JSON, Kineto's): a fixed
// header, then one event object a line, separated by ",\n", then a closing — streamed through a
// TraceSink, so that a write error leaves a complete file cut back to an event boundary.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foundation/result.h"
#include "output/event_args.h"
#include "output/trace_sink.h"
#include "output/trace_writer.h"

namespace gtrace {

// Appends s to out as the contents of a JSON string (without quotes). Bytes that are not
// printable ASCII become '?' (symbol names are ASCII; never emit invalid UTF-8).
void append_json_escaped(std::string& out, std::string_view s);
// ... and as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view s);
// Nanoseconds as microseconds with three decimals ("5000003022.500").
void append_us(std::string& out, uint64_t ns);
// One argument (output/event_args.h) as JSON, led by a comma: ,"name":value — pointers as "0x…"
// texts, dims as [x,y,z] arrays, a Time as "name_us" in microseconds. `name`: the argument's, or
// what a format calls it (Kineto's "External id", …).
void append_json_arg(std::string& out, std::string_view name, const EventArg& a);
// ,"args":{...}: `fill(out)` appends the arguments, each led by a comma (append_json_arg); the
// first one's comma is dropped. An event with none gets "args":{}.
template <class Fill> void append_args_object(std::string& out, Fill&& fill) {
    out += ",\"args\":{";
    const size_t open = out.size();
    fill(out);
    if (out.size() > open) out.erase(open, 1);
    out += '}';
}
// A collective slice's arguments (for_each_collective_arg), in both JSON formats:
// ,"args":{"phase":...,...} (the analysis pairs a wait with its issue by issued_us).
void append_collective_args(std::string& out, const Collective& c);
// An NVTX range's arguments, each led by a comma: ,"domain":...,"kind":"push_pop"|"start_end"
// and, when set, ,"category":N,"payload":X,"end_tid":T.
void append_nvtx_args(std::string& out, const NvtxRangeInfo& n, uint32_t tid);

// A GPU memory counter in both JSON formats: its category ("gpu_memory" for the allocated curve,
// as in earlier traces; "gpu_memory_at_attach" for the figures read at attach, which readers of
// earlier traces leave alone) and its args object: {"allocated_bytes":N,"device":D[,"at_attach":true]}
// or {"bytes":N,"device":D}.
const char* memory_counter_category(const MemorySample& m);
void append_memory_args(std::string& out, const MemorySample& m);

class JsonEventFile {
public:
    static Result<JsonEventFile> create(const std::string& path, bool force, std::string_view header);

    void emit(std::string_view event); // one complete event object
    uint64_t events() const { return events_; }

    // What ends the file: events not written yet (`all`: every one, after a cut), and the rest
    // after the event array ("\n],\n...}\n"). `cut`: null unless a write error cut the file.
    struct Closing {
        std::vector<std::string> events;
        std::string rest;
    };
    using ClosingFn = std::function<Closing(const TraceCut* cut)>;
    Result<std::optional<TraceCut>> finish(const ClosingFn& closing);

    void flush() { sink_.flush(); }
    bool failed() const { return sink_.failed(); }
    std::string error() const;
    const std::string& path() const { return sink_.path(); }
    const std::string& partial_path() const { return sink_.partial_path(); }

private:
    explicit JsonEventFile(TraceSink sink) : sink_(std::move(sink)) {}
    TraceSink sink_;
    uint64_t events_ = 0; // handed to the sink, metadata included
};

} // namespace gtrace
