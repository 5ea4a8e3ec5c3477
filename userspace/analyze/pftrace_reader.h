// Reading the .pftrace gtrace writes (output/pftrace_writer.h) into the analysis's TraceData:
// a strict, bounded walk of the wire format over the mapped file (no copy of it), keeping per
// packet sequence only the interned ids the analysis needs (event names, categories, annotation
// names and string values, source locations) and per track its open slices.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// The slices a trace's whole packets leave open, per track, and its latest event's time: what the
// closing of a trace cut short (a full disk, gtrace killed) must end. Null: malformed packets.
struct PftraceOpenSlices {
    std::vector<std::pair<uint64_t, size_t>> tracks; // track uuid, slices open on it
    uint64_t last_ts = 0;
};
std::optional<PftraceOpenSlices> pftrace_open_slices(std::string_view whole_packets);

// Reads the packets in the file's first `length` bytes (whole ones: cut a partial first) into
// `t`. Errors: not a gtrace trace, or malformed (ExitCode::BadTrace, naming `path`).
Result<void> read_pftrace(const TraceFile& file, size_t length, const std::string& path, TraceData& t);

// Each key and string value of a trace's attributes (entries of field 1: key 1, value 3), in order,
// until `entry` returns false. False when the bytes are malformed.
bool for_each_pftrace_attribute(std::string_view attributes,
                                const std::function<bool(std::string_view key, std::string_view value)>& entry);

} // namespace gtrace
