#include "analyze/step_analysis.h"

#include <regex>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "analyze/collectives.h"
#include "analyze/memory_curve.h"
#include "decode/off_cpu.h"
#include "discover/proc_tree.h"
#include "foundation/redact.h"

namespace gtrace {
namespace {

bool is_sync_call(std::string_view name) {
    return name == "cudaDeviceSynchronize" || name.starts_with("cudaStreamSynchronize") ||
           name == "cudaEventSynchronize" || name == "cudaMemcpy" || name == "cudaMemcpy_ptds";
}

bool is_launch(std::string_view name) { return name.starts_with("cudaLaunchKernel") || name.starts_with("cuLaunchKernel"); }

bool is_dataloader_frame(std::string_view name) {
    return (name.starts_with("__next__ (") || name.starts_with("_next_data (")) && name.find("dataloader.py") != std::string::npos;
}

bool is_dataloader_range(std::string_view name) { return name.starts_with("enumerate(DataLoader)"); }

// The capture's start: its trace's first event. GPU memory counters are left out, since one may
// carry the state from before the capture (analyze/memory_curve.h puts that at the start).
uint64_t capture_start(const TraceData& trace) {
    uint64_t first = UINT64_MAX, first_memory = UINT64_MAX;
    auto earliest = [&first](const auto& spans) {
        for (const auto& s : spans) first = std::min(first, s.start_ns);
    };
    for (const auto& [pid, p] : trace.processes) {
        earliest(p.calls), earliest(p.gpu), earliest(p.main_samples), earliest(p.ranges), earliest(p.collectives), earliest(p.off_cpu);
        for (const auto& m : p.memory) first_memory = std::min(first_memory, m.ts_ns);
    }
    if (first == UINT64_MAX) first = first_memory;
    return first == UINT64_MAX ? 0 : first;
}

// "rank 0"; a process without a rank by its pid and command line, "pid 1234 (python3 train.py)".
std::string process_name(const ProcessData& p, bool redact) {
    if (p.rank) return fmt::format("rank {}", *p.rank);
    std::string cmd = short_command(redact ? redact_text(p.cmdline) : p.cmdline, 60);
    return cmd.empty() ? fmt::format("pid {}", p.pid) : fmt::format("pid {} ({})", p.pid, cmd);
}

// Steps end where the main thread's step-marker ranges end (Optimizer.step by default).
std::vector<Span> steps_from_ranges(const ProcessData& p, const std::regex& marker, const std::string& marker_text,
                                    std::string* rule) {
    std::vector<uint64_t> ends;
    std::string first_name;
    for (const auto& r : p.ranges)
        if (r.tid == p.pid && std::regex_search(r.name.begin(), r.name.end(), marker)) {
            ends.push_back(r.end_ns);
            if (first_name.empty()) first_name = std::string(r.name);
        }
    std::vector<Span> steps;
    if (ends.size() < 2) return steps;
    std::sort(ends.begin(), ends.end());
    for (size_t i = 1; i < ends.size(); ++i) steps.push_back({ends[i - 1], ends[i]});
    *rule = fmt::format("steps end at each {} range (step marker '{}')", first_name, marker_text);
    return steps;
}

// GPU records start when the agent is loaded (after attach) and stop at the capture's end, with
// kernels still running then missing: a step outside that span would show its GPU time as idle.
void trim_to_gpu_records(const ProcessData& p, std::vector<Span>& steps, std::string* rule) {
    if (p.gpu.empty() || steps.empty()) return;
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& g : p.gpu) {
        first = std::min(first, g.start_ns);
        last = std::max(last, g.end_ns);
    }
    size_t before = steps.size();
    std::erase_if(steps, [&](const Span& s) { return s.start_ns < first || s.end_ns > last; });
    if (steps.size() != before)
        *rule += fmt::format("; {} step(s) outside the span of the GPU records left out", before - steps.size());
}

// Without torch's record_function ranges, a training loop's steps show as the one synchronizing
// CUDA call site of the main thread that recurs most (the loss.item(), the synchronize).
std::vector<Span> steps_from_sync_calls(const ProcessData& p, std::string* rule) {
    std::map<std::string, std::vector<uint64_t>> ends_by_site;
    for (const auto& c : p.calls)
        if (c.tid == p.pid && is_sync_call(c.name)) ends_by_site[fmt::format("{} at {}", c.name, c.source.empty() ? "?" : c.source)].push_back(c.end_ns);
    const std::vector<uint64_t>* best = nullptr;
    for (const auto& [site, ends] : ends_by_site)
        if (!best || ends.size() > best->size()) {
            best = &ends;
            *rule = "steps end at " + site;
        }
    std::vector<Span> steps;
    if (!best || best->size() < 3) {
        rule->clear();
        return steps;
    }
    std::vector<uint64_t> ends = *best;
    std::sort(ends.begin(), ends.end());
    for (size_t i = 1; i < ends.size(); ++i) steps.push_back({ends[i - 1], ends[i]});
    return steps;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

// The CPU's pace of launching: from each launch to the next one on the same thread. A kernel
// shorter than that interval leaves the GPU idle until the next launch arrives (the GPU is
// starved: launch-bound), whatever the launch call itself costs.
struct LaunchPace {
    std::unordered_map<uint32_t, std::pair<const CallSpan*, double>> by_correlation; // call, interval µs (0: last)
    std::vector<double> intervals_us;
};

template <class Inside>
LaunchPace launch_pace(const ProcessData& p, const Inside& inside, std::vector<double>& launch_us) {
    std::unordered_map<uint32_t, std::vector<const CallSpan*>> per_thread;
    for (const auto& c : p.calls)
        if (is_launch(c.name) && inside(c)) {
            launch_us.push_back(static_cast<double>(c.dur()) / 1e3);
            per_thread[c.tid].push_back(&c);
        }
    LaunchPace pace;
    for (auto& [tid, calls] : per_thread) {
        std::sort(calls.begin(), calls.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
        for (size_t i = 0; i < calls.size(); ++i) {
            double gap = i + 1 < calls.size() ? static_cast<double>(calls[i + 1]->start_ns - calls[i]->start_ns) / 1e3 : 0;
            if (gap > 0) pace.intervals_us.push_back(gap);
            if (calls[i]->correlation) pace.by_correlation[calls[i]->correlation] = {calls[i], gap};
        }
    }
    return pace;
}

// Credits every instant of every step to its highest-priority active category (one sweep);
// `blocked_credit[i]`: what the main thread's off-CPU slice i got of Blocked.
void break_down(const ProcessData& p, std::vector<StepBreakdown>& steps, std::vector<uint64_t>& blocked_credit) {
    struct Edge {
        uint64_t t;
        int category; // kCategoryCount: a kernel's GPU-busy edge only
        int delta;
        int off_cpu = -1; // a Blocked edge: its slice's index
    };
    std::vector<Edge> edges;
    auto add = [&](const Span& s, int category) {
        if (s.end_ns <= s.start_ns) return;
        edges.push_back({s.start_ns, category, +1});
        edges.push_back({s.end_ns, category, -1});
    };
    blocked_credit.assign(p.off_cpu.size(), 0);
    for (size_t i = 0; i < p.off_cpu.size(); ++i) { // a thread's own slices never overlap
        const RangeSpan& s = p.off_cpu[i];
        if (s.tid != p.pid || s.end_ns <= s.start_ns) continue;
        edges.push_back({s.start_ns, kBlocked, +1, static_cast<int>(i)});
        edges.push_back({s.end_ns, kBlocked, -1, static_cast<int>(i)});
    }
    // Kernel names are interned: one verdict per distinct name, not per kernel.
    std::unordered_map<const char*, bool> communication;
    auto is_communication = [&](std::string_view name) {
        auto [it, fresh] = communication.try_emplace(name.data(), false);
        if (fresh) it->second = is_communication_kernel(name);
        return it->second;
    };
    for (const auto& g : p.gpu) {
        int c = g.kind == GpuKind::Memcpy ? kMemcpy : g.kind == GpuKind::Memset ? kMemset
                : is_communication(g.name)            ? kCommunication
                                                      : kKernel;
        add(g, c);
        if (g.kind == GpuKind::Kernel) add(g, kCategoryCount);
    }
    for (const auto& c : p.calls) add(c, kRuntime);
    // The DataLoader's own ranges are exact; sampled frames stand in only where there are none.
    bool loader_ranges = std::any_of(p.ranges.begin(), p.ranges.end(), [](const auto& r) { return is_dataloader_range(r.name); });
    for (const auto& s : p.main_samples) {
        add(s, kCpuExec);
        if (!loader_ranges && is_dataloader_frame(s.name)) add(s, kDataLoader);
    }
    // The main thread in a collective's call or blocked in the wait on it.
    for (const auto& c : p.collectives)
        if (c.tid == p.pid) add(c, kCommunication);
    // torch ranges of the main thread: waiting for a batch, or running the model and optimizer.
    // (Not Kineto's ProfilerStep#N: it is the step itself, not work in it.)
    for (const auto& r : p.ranges)
        if (r.tid == p.pid && !r.name.starts_with("ProfilerStep#")) add(r, is_dataloader_range(r.name) ? kDataLoader : kCpuExec);
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
    std::array<int, kCategoryCount + 1> active{};
    int asleep = -1; // the off-CPU slice the main thread is in
    auto apply = [&](const Edge& edge) {
        active[static_cast<size_t>(edge.category)] += edge.delta;
        if (edge.off_cpu >= 0) asleep = edge.delta > 0 ? edge.off_cpu : (asleep == edge.off_cpu ? -1 : asleep);
    };
    size_t step = 0, e = 0;
    uint64_t t = steps.empty() ? 0 : steps.front().span.start_ns;
    // Apply the edges before the first step, then walk segment by segment.
    for (; e < edges.size() && edges[e].t <= t; ++e) apply(edges[e]);
    while (step < steps.size()) {
        uint64_t step_end = steps[step].span.end_ns;
        uint64_t next = e < edges.size() ? std::min(edges[e].t, step_end) : step_end;
        if (next > t) {
            int cat = kOther;
            for (int c = 0; c < kOther; ++c)
                if (active[static_cast<size_t>(c)] > 0) {
                    cat = c;
                    break;
                }
            steps[step].ns[static_cast<size_t>(cat)] += next - t;
            if (cat == kBlocked && asleep >= 0) blocked_credit[static_cast<size_t>(asleep)] += next - t;
            if (active[kCategoryCount] > 0) steps[step].gpu_busy_ns += next - t;
            t = next;
        }
        if (t >= step_end) {
            ++step;
            continue;
        }
        for (; e < edges.size() && edges[e].t <= t; ++e) apply(edges[e]);
    }
}

// The Blocked category by kind, ms per step, each with the line it was credited most under.
std::vector<BlockedIn> blocked_by_kind(const ProcessData& p, const std::vector<uint64_t>& credit, size_t steps) {
    struct Kind {
        uint64_t ns = 0;
        std::map<std::string_view, uint64_t> where;
    };
    std::map<std::string_view, Kind> kinds;
    for (size_t i = 0; i < credit.size(); ++i) {
        if (!credit[i]) continue;
        std::string_view kind = off_cpu_kind(p.off_cpu[i].name);
        Kind& k = kinds[kind.empty() ? "other" : kind];
        k.ns += credit[i];
        k.where[p.off_cpu[i].source] += credit[i];
    }
    std::vector<BlockedIn> out;
    for (const auto& [kind, k] : kinds) {
        auto most = std::max_element(k.where.begin(), k.where.end(), [](auto& a, auto& b) { return a.second < b.second; });
        out.push_back({std::string(kind), std::string(most->first), static_cast<double>(k.ns) / 1e6 / static_cast<double>(steps)});
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ms_per_step > b.ms_per_step; });
    return out;
}

void summarize(const ProcessData& p, ProcessAnalysis& r) {
    uint64_t total = 0, busy = 0;
    std::array<uint64_t, kCategoryCount> sums{};
    for (const auto& s : r.steps) {
        total += s.span.dur();
        busy += s.gpu_busy_ns;
        for (size_t c = 0; c < kCategoryCount; ++c) sums[c] += s.ns[c];
    }
    if (!total) return;
    size_t n = r.steps.size();
    for (size_t c = 0; c < kCategoryCount; ++c) r.share[c] = static_cast<double>(sums[c]) / static_cast<double>(total);
    r.step_ms = static_cast<double>(total) / 1e6 / static_cast<double>(n);
    r.gpu_utilization = static_cast<double>(busy) / static_cast<double>(total);
    Span window{r.steps.front().span.start_ns, r.steps.back().span.end_ns};
    auto inside = [&](const Span& s) { return s.start_ns >= window.start_ns && s.start_ns < window.end_ns; };

    std::vector<double> launch_us, kernel_us;
    const LaunchPace pace = launch_pace(p, inside, launch_us);
    std::vector<double> delay_us; // launch call's start to its kernel's start: queueing and launch latency
    size_t shorter = 0, paired = 0;
    std::map<std::string_view, double> per_kernel;
    uint64_t h2d_bytes = 0, h2d_ns = 0, d2h_bytes = 0, d2h_ns = 0, kernel_ns = 0;
    for (const auto& g : p.gpu) {
        if (!inside(g)) continue;
        if (g.kind == GpuKind::Kernel) {
            double us = static_cast<double>(g.dur()) / 1e3;
            kernel_us.push_back(us);
            kernel_ns += g.dur();
            per_kernel[g.name] += us / 1e3;
            if (auto it = pace.by_correlation.find(g.correlation); g.correlation && it != pace.by_correlation.end()) {
                const auto& [call, gap_us] = it->second;
                if (gap_us > 0) ++paired, shorter += us < gap_us;
                if (g.start_ns >= call->start_ns) delay_us.push_back(static_cast<double>(g.start_ns - call->start_ns) / 1e3);
            }
        } else if (g.kind == GpuKind::Memcpy && g.copy_kind == "HtoD") {
            h2d_bytes += g.bytes, h2d_ns += g.dur();
        } else if (g.kind == GpuKind::Memcpy && g.copy_kind == "DtoH") {
            d2h_bytes += g.bytes, d2h_ns += g.dur();
        }
    }
    r.launches_per_step = static_cast<double>(launch_us.size()) / static_cast<double>(n);
    r.median_launch_us = median(launch_us);
    r.median_launch_interval_us = median(pace.intervals_us);
    if (!paired) // no correlation ids (no agent callbacks): against the typical interval instead
        for (double k : kernel_us) ++paired, shorter += k < r.median_launch_interval_us;
    r.median_kernel_us = median(kernel_us);
    r.median_launch_delay_us = median(delay_us);
    r.kernels_shorter_than_launch = paired ? static_cast<double>(shorter) / static_cast<double>(paired) : 0;
    r.kernel_ms_per_step = static_cast<double>(kernel_ns) / 1e6 / static_cast<double>(n);
    r.h2d_gbps = h2d_ns ? static_cast<double>(h2d_bytes) / static_cast<double>(h2d_ns) : 0;
    r.d2h_gbps = d2h_ns ? static_cast<double>(d2h_bytes) / static_cast<double>(d2h_ns) : 0;
    double sync_ns = 0, collective_ns = 0;
    for (const auto& c : p.calls)
        if (c.tid == p.pid && is_sync_call(c.name) && inside(c)) sync_ns += static_cast<double>(c.dur());
    for (const auto& c : p.collectives) // NCCL's calls enqueue (and lie inside c10d's, when torch makes them)
        if (c.tid == p.pid && !c.nccl && inside(c)) collective_ns += static_cast<double>(c.dur());
    r.waits = {collective_ns / 1e6 / static_cast<double>(n), r.share[kDataLoader] * r.step_ms, sync_ns / 1e6 / static_cast<double>(n),
               r.share[kBlocked] * r.step_ms, r.share[kOther] * r.step_ms};
    r.top_kernels_ms.assign(per_kernel.begin(), per_kernel.end());
    std::sort(r.top_kernels_ms.begin(), r.top_kernels_ms.end(), [](auto& a, auto& b) { return a.second > b.second; });
    if (r.top_kernels_ms.size() > 5) r.top_kernels_ms.resize(5);
}

} // namespace

const char* category_name(Category c) {
    static const char* names[] = {"Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "Blocked", "CPU Exec", "Other"};
    return c < kCategoryCount ? names[c] : "?";
}

bool report_order(const ProcessAnalysis& a, const ProcessAnalysis& b) {
    if (a.rank && b.rank) return *a.rank < *b.rank;
    if (a.rank || b.rank) return a.rank.has_value();
    return a.pid < b.pid;
}

std::vector<ProcessAnalysis> analyze_processes(const TraceData& trace, const AnalysisOptions& options) {
    const std::regex marker(options.step_marker, std::regex::ECMAScript | std::regex::optimize);
    const uint64_t origin = capture_start(trace);
    std::vector<ProcessAnalysis> out;
    for (const auto& [pid, p] : trace.processes) {
        if (p.forked || (!p.rank && p.calls.empty() && p.gpu.empty())) continue;
        ProcessAnalysis r;
        r.pid = pid;
        r.rank = p.rank;
        r.origin_ns = origin;
        r.host_cpu_pressure = trace.cpu_pressure;
        r.label = options.redact ? redact_text(p.label) : p.label; // a trace written with --no-redact, or before
        r.name = process_name(p, options.redact);
        std::vector<Span> steps = steps_from_ranges(p, marker, options.step_marker, &r.step_rule);
        if (steps.empty()) steps = steps_from_sync_calls(p, &r.step_rule);
        trim_to_gpu_records(p, steps, &r.step_rule);
        for (const Span& s : steps) r.steps.push_back({s, {}, 0, 0});
        r.memory = memory_curve(p.memory, origin);
        if (!r.steps.empty()) {
            std::vector<uint64_t> blocked_credit;
            break_down(p, r.steps, blocked_credit);
            summarize(p, r);
            r.blocked = blocked_by_kind(p, blocked_credit, r.steps.size());
        }
        out.push_back(std::move(r));
    }
    gather_collectives(trace, out); // matched across ranks by the job (analyze_job): ranks may be in several files
    std::stable_sort(out.begin(), out.end(), report_order);
    return out;
}

} // namespace gtrace
