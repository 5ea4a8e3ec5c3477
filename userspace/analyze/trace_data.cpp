#include "analyze/trace_data.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "output/sample_tracks.h"

namespace gtrace {
namespace {

uint64_t us_to_ns(const nlohmann::json& v) { return static_cast<uint64_t>(v.get<double>() * 1000.0 + 0.5); }

} // namespace

Result<TraceData> load_trace(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error(ExitCode::Usage, fmt::format("cannot read {}: {}; give the path of a trace gtrace wrote", path, strerror(errno)));
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded())
        return make_error(ExitCode::BadTrace, fmt::format("{} is not valid JSON (truncated or corrupted?); re-capture it", path));
    if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
        return make_error(ExitCode::BadTrace, fmt::format("{} is not a Chrome trace (no traceEvents array)", path));
    const auto& other = j.value("otherData", nlohmann::json::object());
    if (other.value("tool", "") != "gtrace")
        return make_error(ExitCode::BadTrace, fmt::format("{} was not written by gtrace (otherData.tool is missing); "
                                                          "gtrace report reads gtrace's own traces", path));
    TraceData t;
    t.path = path;
    t.has_gpu = other.contains("gpu") && other["gpu"].value("enabled", false);
    for (const auto& e : j["traceEvents"]) {
        if (!e.is_object() || !e.contains("pid")) continue;
        uint32_t pid = e["pid"].get<uint32_t>();
        std::string ph = e.value("ph", "");
        if (ph == "M") {
            ProcessData& p = t.processes[pid];
            p.pid = pid;
            if (e.value("name", "") == "process_name") p.label = e["args"].value("name", "");
            if (e.value("name", "") == "process_labels") {
                auto labels = nlohmann::json::parse(e["args"].value("labels", "{}"), nullptr, false);
                if (labels.is_object()) {
                    if (labels.contains("rank")) p.rank = labels["rank"].get<int>();
                    p.forked = labels.contains("forked_from");
                }
            }
            continue;
        }
        if (ph != "X" || !e.contains("ts") || !e.contains("dur")) continue;
        std::string cat = e.value("cat", "");
        uint32_t tid = e.value("tid", 0u);
        uint64_t start = us_to_ns(e["ts"]), end = start + us_to_ns(e["dur"]);
        ProcessData& p = t.processes[pid];
        p.pid = pid;
        const auto& args = e.value("args", nlohmann::json::object());
        if (cat == "cuda_api") {
            CallSpan c;
            c.start_ns = start, c.end_ns = end, c.name = e.value("name", ""), c.tid = tid;
            c.source = args.value("source", "");
            c.bytes = args.value("bytes", uint64_t{0});
            c.kind = args.value("kind", "");
            c.correlation = args.value("correlation", 0u);
            p.calls.push_back(std::move(c));
        } else if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
            GpuSpan g;
            g.start_ns = start, g.end_ns = end, g.name = e.value("name", "");
            g.kind = cat == "kernel" ? GpuKind::Kernel : cat == "gpu_memcpy" ? GpuKind::Memcpy : GpuKind::Memset;
            g.bytes = args.value("bytes", uint64_t{0});
            g.copy_kind = args.value("kind", "");
            g.correlation = args.value("correlation", 0u);
            p.gpu.push_back(std::move(g));
        } else if (cat == "sample" && tid == pid + kSampleTrackTidOffset) {
            CallSpan s;
            s.start_ns = start, s.end_ns = end, s.name = e.value("name", ""), s.tid = pid;
            p.main_samples.push_back(std::move(s));
        }
    }
    return t;
}

} // namespace gtrace
