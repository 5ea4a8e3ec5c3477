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
#include "format/pftrace_scan.h"
#include "foundation/result.h"

namespace gtrace {

class TraceFile;

// Reads the packets in the file's first `length` bytes (whole ones: cut a partial first) into
// `t`. Errors: not a gtrace trace, or malformed (ExitCode::BadTrace, naming `path`).
Result<void> read_pftrace(const TraceFile& file, size_t length, const std::string& path, TraceData& t);


} // namespace gtrace
