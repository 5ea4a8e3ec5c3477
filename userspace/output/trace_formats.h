// The trace formats gtrace writes, and what each needs from the command line: which format an
// output path means, the default output name, the files to check before the capture starts,
// and the writer.
//
//   pftrace  Perfetto's protobuf trace (the default): Perfetto UI, trace_processor; ~10x smaller
//   json     Chrome trace event JSON: chrome://tracing, Perfetto UI (legacy importer)
//   kineto   PyTorch profiler (Kineto) JSON, one file per rank in a directory: Holistic Trace
//            Analysis, TensorBoard's profiler plugin
//
// `-o` chooses by its extension (.pftrace/.perfetto-trace/.pb: pftrace, .json: json, .kineto or
// a trailing '/': kineto; anything else: the default); `--format` overrides it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decode/torch_range.h"
#include "foundation/output_file.h"
#include "foundation/result.h"
#include "model/trace_model.h"
#include "output/trace_writer.h"

namespace gtrace {

enum class TraceFormat { Pftrace, Json, Kineto };
constexpr TraceFormat kDefaultTraceFormat = TraceFormat::Pftrace;

const char* format_name(TraceFormat f);
// "pftrace", "json", "kineto" (ExitCode::Usage otherwise).
Result<TraceFormat> parse_format(const std::string& text);
// The format an output path's extension names, if it names one.
std::optional<TraceFormat> format_of_path(const std::string& path);
// `gtrace-<pid>-<stamp>` plus the format's extension (Kineto: a directory).
std::string default_output_name(TraceFormat f, const std::string& stem);

// What the capture writes: its format, and what -o gave (a file, or Kineto's directory).
struct TraceOutput {
    TraceFormat format = kDefaultTraceFormat;
    std::string path;
    std::string step_marker = kDefaultStepMarker; // Kineto's ProfilerStep#N ranges end at these ranges
};
// The format for `-o path` and `--format` (empty: none given): --format wins, else the
// extension, else the default.
Result<TraceFormat> choose_format(const std::string& path, const std::string& format_option);
// The trace's outputs and the command's other outputs (--summary-json, --folded), checked
// together before the capture starts (check_outputs; Kineto's directory: check_output_directory).
Result<void> check_trace_outputs(const TraceOutput& out, std::vector<OutputSpec> others, bool force);
// The writer, its files created. `model`: the capture's, which a writer may consult as events come
// (Kineto: each process's rank decides its file).
Result<std::unique_ptr<TraceWriter>> create_trace_writer(const TraceOutput& out, bool force, const TraceModel& model);

} // namespace gtrace
