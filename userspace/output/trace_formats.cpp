#include "output/trace_formats.h"
#include "foundation/test_hooks.h"

#include <fmt/format.h>

#include "output/chrome_trace.h"
#include "output/kineto_writer.h"
#include "output/pftrace_writer.h"
#include "output/tee_writer.h"

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
    if (path.ends_with(".kineto") || path.ends_with(".kineto/") || path.ends_with('/')) return TraceFormat::Kineto;
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

Result<void> check_trace_outputs(const TraceOutput& out, std::vector<OutputSpec> others, bool force) {
    if (out.format == TraceFormat::Kineto) {
        if (auto r = check_output_directory("-o", out.path, force); !r) return r;
        // The directory and its files are the trace's: no other output there.
        std::string dir = out.path;
        while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
        dir = absolute_output_path(dir);
        for (const auto& o : others)
            if (std::string p = absolute_output_path(o.path); p == dir || p.starts_with(dir + "/"))
                return make_error(ExitCode::Usage, fmt::format("-o {} and {} {} name the same place (a Kineto trace is a directory of "
                                                               "files); give each output a path of its own", out.path, o.option, o.path));
    } else {
        auto trace = trace_outputs(out.path);
        others.insert(others.begin(), trace.begin(), trace.end());
    }
    return check_outputs(others, {}, force);
}

namespace {

Result<std::unique_ptr<TraceWriter>> create_one(const TraceOutput& out, bool force, const TraceModel& model) {
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
    case TraceFormat::Kineto: {
        std::string dir = out.path;
        while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
        auto w = KinetoWriter::create(dir, force, model, out.step_marker);
        if (!w) return w.error();
        return std::unique_ptr<TraceWriter>(std::move(*w));
    }
    }
    return make_error(ExitCode::Internal, "unknown trace format");
}

} // namespace

Result<std::unique_ptr<TraceWriter>> create_trace_writer(const TraceOutput& out, bool force, const TraceModel& model) {
    if (auto ok = check_trace_outputs(out, {}, force); !ok) return ok.error();
    auto writer = create_one(out, force, model);
    if (!writer) return writer.error();
    // Tests: the same events in more formats (GTRACE_TEST_TEE=PATH[:PATH]), to compare them.
    const char* tee = GTRACE_TEST_HOOK("TEE");
    for (std::string_view rest = tee ? tee : ""; !rest.empty();) {
        size_t colon = std::min(rest.find(':'), rest.size());
        TraceOutput more = out;
        more.path = std::string(rest.substr(0, colon));
        more.format = format_of_path(more.path).value_or(TraceFormat::Kineto);
        rest.remove_prefix(std::min(colon + 1, rest.size()));
        auto other = create_one(more, force, model);
        if (!other) return other.error();
        *writer = std::make_unique<TeeWriter>(std::move(*writer), std::move(*other));
    }
    return writer;
}

} // namespace gtrace
