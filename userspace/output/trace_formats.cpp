#include "output/trace_formats.h"

#include <fmt/format.h>

#include "output/chrome_trace.h"
#include "output/pftrace_writer.h"

namespace gtrace {

const char* format_name(TraceFormat f) {
    switch (f) {
    case TraceFormat::Pftrace: return "pftrace";
    case TraceFormat::Json: return "json";
    case TraceFormat::Kineto: return "kineto";
    }
    return "?";
}

Result<TraceFormat> parse_format(const std::string& text) {
    for (TraceFormat f : {TraceFormat::Pftrace, TraceFormat::Json, TraceFormat::Kineto})
        if (text == format_name(f)) return f;
    return make_error(ExitCode::Usage, fmt::format("--format {}: use pftrace (the default), json or kineto", text));
}

std::optional<TraceFormat> format_of_path(const std::string& path) {
    for (const char* ext : {".pftrace", ".perfetto-trace", ".pb"})
        if (path.ends_with(ext)) return TraceFormat::Pftrace;
    if (path.ends_with(".json")) return TraceFormat::Json;
    return std::nullopt;
}

std::string default_output_name(TraceFormat f, const std::string& stem) {
    switch (f) {
    case TraceFormat::Pftrace: return stem + ".pftrace";
    case TraceFormat::Json: return stem + ".json";
    case TraceFormat::Kineto: return stem + ".kineto";
    }
    return stem;
}

Result<TraceFormat> choose_format(const std::string& path, const std::string& format_option) {
    if (!format_option.empty()) return parse_format(format_option);
    return format_of_path(path).value_or(kDefaultTraceFormat);
}

std::vector<OutputSpec> trace_output_specs(const TraceOutput& out) { return trace_outputs(out.path); }

Result<std::unique_ptr<TraceWriter>> create_trace_writer(const TraceOutput& out, bool force, const TraceModel& model) {
    if (auto ok = check_outputs(trace_output_specs(out), {}, force); !ok) return ok.error();
    switch (out.format) {
    case TraceFormat::Json: {
        auto w = ChromeTraceWriter::create(out.path, force);
        if (!w) return w.error();
        return std::unique_ptr<TraceWriter>(std::move(*w));
    }
    case TraceFormat::Pftrace: {
        auto w = PftraceWriter::create(out.path, force, model);
        if (!w) return w.error();
        return std::unique_ptr<TraceWriter>(std::move(*w));
    }
    default: break;
    }
    return make_error(ExitCode::Usage, fmt::format("--format {} is not implemented", format_name(out.format)));
}

} // namespace gtrace
