// What a capture says at its end: the trace's facts (otherData) and the summary on stderr.
#include <fmt/format.h>

#include "foundation/printable.h"
#include "capture/capture.h"
#include "discover/cpu_pressure.h"
#include "capture/lost_events.h"
#include "format/api_table.h"
#include "output/clocks.h"
#include "gtrace_version.h"

namespace gtrace {

nlohmann::json Capture::other_data(const std::string& stop_reason, double elapsed_s) const {
    nlohmann::json counters = nlohmann::json::object();
    for (unsigned i = 1; i < GT_CNT_COUNT; ++i)
        if (const char* name = counter_name(i)) counters[name] = model_.counters[i];
    nlohmann::json calls = nlohmann::json::object();
    auto per_api = model_.calls_per_api();
    for (const auto& api : kApis)
        if (per_api[api.id]) calls[std::string(api.name)] = per_api[api.id];
    nlohmann::json objects = nlohmann::json::array();
    for (const auto& [key, obj] : cuda_probes_.objects())
        objects.push_back({{"path", obj.path}, {"version", obj.version}, {"mapped", obj.mapped}, {"apis", obj.apis}, {"device", key.first},
                           {"inode", key.second}});
    ClockReading clocks = read_clocks();
    // The share of the capture in which some runnable task waited for a CPU (absent without PSI).
    nlohmann::json cpu_pressure;
    if (auto now = cpu_pressure_some_us(); now && cpu_pressure_at_start_us_ && *now >= *cpu_pressure_at_start_us_ && elapsed_s > 0)
        cpu_pressure = {{"some", std::min(1.0, static_cast<double>(*now - *cpu_pressure_at_start_us_) / 1e6 / elapsed_s)},
                        {"source", "/proc/pressure/cpu"}};
    return {{"tool", "gtrace"},
            {"version", kGtraceVersion},
            {"root_pid", options_.pid},
            {"host", host_name()},
            {"clock", "CLOCK_MONOTONIC"},
            {"clocks", {{"monotonic_ns", clocks.monotonic_ns}, {"boottime_ns", clocks.boottime_ns}, {"realtime_ns", clocks.realtime_ns}}},
            {"cpu_pressure", cpu_pressure},
            {"start_unix_ms", start_wall_unix_ms_},
            {"duration_s", elapsed_s},
            {"stop_reason", stop_reason},
            {"lost_events", model_.lost_events()},
            {"lost", lost_facts(model_)},
            {"samples", samples_.samples()},
            {"off_cpu", {{"slices", samples_.off_cpu_slices()}, {"left_out_not_analyzed", samples_.off_cpu_left_out()}}},
            {"sample_hz", options_.sample_hz},
            {"python_stacks_dropped_torn", python_frames_.torn_stacks()},
            {"counters", counters},
            {"calls", calls},
            {"probed_objects", objects},
            {"torch_libraries", torch_probes_.facts()},
            {"c10d_libraries", comm_probes_.facts()},
            {"collectives", ranges_.collectives()},
            {"collective_groups", collective_counts_.facts()},
            {"backward", backward_.facts()},
            {"autograd_links", options_.autograd_links ? autograd_.facts() : nlohmann::json()},
            {"capture_script", script_.facts()},
            {"bpf_stats", bpf_stats_facts()},
            {"api_capture", calls_.facts()},
            {"gpu", gpu_.facts()},
            {"processes_skipped", processes_.skipped().facts()},
            {"nvtx", nvtx_.facts()}};
}

nlohmann::json Capture::bpf_stats_facts() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& p : bpf_->program_stats())
        out[p.name] = {{"runs", p.runs}, {"run_ns", p.run_ns}, {"ns_per_run", p.runs ? p.run_ns / p.runs : 0}};
    return out;
}

void Capture::print_summary(const CaptureResult& r, double elapsed_s) const {
    size_t ranks = 0, threads = 0;
    for (const auto& [pid, p] : model_.processes()) {
        ranks += p.ranks.rank && !p.forked_from;
        threads += p.threads.size();
    }
    print_safe(stderr, "gtrace: capture ended after {:.1f} s: {}\n", elapsed_s, r.stop_reason);
    print_safe(stderr, "  processes: {} ({} ranks), threads with CUDA calls: {}\n", model_.processes().size(), ranks, threads);
    auto per_api = model_.calls_per_api();
    print_safe(stderr, "  CUDA API calls: {}\n", model_.total_calls());
    for (const auto& api : kApis)
        if (per_api[api.id]) print_safe(stderr, "    {:<28} {}\n", api.name, per_api[api.id]);
    for (const auto& [key, obj] : cuda_probes_.objects())
        if (obj.mapped)
            print_safe(stderr, "  probed: {} ({}{} functions)\n", obj.path, obj.version.empty() ? "" : obj.version + "; ", obj.apis.size());
    calls_.print_summary();
    if (size_t skipped = processes_.skipped().count())
        print_safe(stderr, "  processes left out: {} (otherData.processes_skipped says why: another user's, files that do not "
                           "answer, or maps and libraries gtrace could not read); the rest was traced\n", skipped);
    print_safe(stderr, "  {}\n", lost_summary(model_));
    if (options_.sample_hz) print_safe(stderr, "  samples: {} at {} Hz{}\n", samples_.samples(), options_.sample_hz,
                                       options_.folded.empty() ? "" : fmt::format(", folded stacks in {}", options_.folded));
    gpu_.print_summary();
    nvtx_.print_summary();
    if (uint64_t untraced = model_.counters[GT_CNT_ENTRY_STATE_FULL])
        print_safe(stderr, "  WARNING: {} calls were not traced: the kernel gave no per-thread state, or they nested deeper than "
                           "4 probed calls (not a full ring: --buffer-size does not help)\n", untraced);
    if (uint64_t torn = python_frames_.torn_stacks())
        print_safe(stderr, "  Python stacks left out: {} (read from the live process: it had exited, or its stack changed, "
                           "before gtrace read them)\n", torn);
    if (uint64_t inflight = model_.counters[GT_CNT_RETURN_WITHOUT_ENTRY])
        print_safe(stderr, "  calls already in flight at attach (not traced): {}\n", inflight);
    print_safe(stderr, "  trace: {} — open it in Perfetto UI (ui.perfetto.dev) or chrome://tracing\n", r.output);
}

} // namespace gtrace
