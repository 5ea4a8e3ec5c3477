// What a .pftrace gtrace wrote holds, found from its wire format alone (no analysis): where its
// whole packets end, its attributes, and the slices its packets leave open — what completing a
// cut trace (output/pftrace_writer.h, gtrace recover) and merging traces need.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

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

// The slices a trace's whole packets leave open, per track, and its latest event's time: what the
// closing of a trace cut short (a full disk, gtrace killed) must end. Null: malformed packets.
struct PftraceOpenSlices {
    std::vector<std::pair<uint64_t, size_t>> tracks; // track uuid, slices open on it
    uint64_t last_ts = 0;
};
std::optional<PftraceOpenSlices> pftrace_open_slices(std::string_view whole_packets);

// Each key and string value of a trace's attributes (entries of field 1: key 1, value 3), in order,
// until `entry` returns false. False when the bytes are malformed.
bool for_each_pftrace_attribute(std::string_view attributes,
                                const std::function<bool(std::string_view key, std::string_view value)>& entry);

} // namespace gtrace
