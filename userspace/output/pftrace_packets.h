// The packets of a .pftrace written outside any track's event stream (output/pftrace_writer.h):
// the header, clock snapshots, the capture's facts, and the slice ends that close a cut trace.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "format/pftrace_scan.h"
#include "output/clocks.h"

namespace gtrace {

// The attribute keys gtrace puts in TraceAttributes (shown as trace_attribute.<key>).
constexpr std::string_view kPftraceToolKey = "tool";
constexpr std::string_view kPftraceFactsKey = "other_data";

// The header every gtrace .pftrace starts with (its TraceSink header); the partial reader and
// `gtrace recover` recognize a gtrace trace by its first packet.
std::string pftrace_header(const ClockReading& clocks);
// The packet that ends a trace: the capture's facts.
std::string pftrace_facts_packet(const nlohmann::json& facts);
// A ClockSnapshot packet.
std::string pftrace_clock_packet(const ClockReading& clocks);
// Packets that end the slices a cut trace leaves open, at its last event.
std::string pftrace_slice_ends(const PftraceOpenSlices& open);

} // namespace gtrace
