// Reading the .pftrace gtrace writes (output/pftrace_writer.h) into the analysis's TraceData:
// a strict, bounded walk of the wire format over the mapped file (no copy of it), keeping per
// packet sequence only the interned ids the analysis needs (event names, categories, annotation
// names and string values, source locations) and per track its open slices.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analyze/trace_data.h"
#include "foundation/result.h"

namespace gtrace {

// Where the whole packets of a .pftrace end (a partial trace may stop anywhere, even inside a
// packet's length). Null: the bytes do not start like a trace gtrace wrote.
struct PftraceEnd {
    bool complete = false; // its last packet holds the capture's facts
    size_t cut = 0;        // bytes of whole packets
    uint64_t packets = 0;
};
std::optional<PftraceEnd> find_pftrace_end(std::string_view bytes);

// The bytes start like a Perfetto trace (a TracePacket field), not like JSON.
bool looks_like_pftrace(std::string_view bytes);

class TraceFile;
// Reads the packets in the file's first `length` bytes (whole ones: cut a partial first) into
// `t`. Errors: not a gtrace trace, or malformed (ExitCode::BadTrace, naming `path`).
Result<void> read_pftrace(const TraceFile& file, size_t length, const std::string& path, TraceData& t);

} // namespace gtrace
