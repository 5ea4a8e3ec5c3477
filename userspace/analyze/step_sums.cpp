#include "analyze/step_sums.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "analyze/collectives.h"
#include "decode/off_cpu.h"

namespace gtrace {
namespace {

constexpr double kBucketBase = 1.01;          // a bucket's values are within 1% of each other
constexpr uint64_t kPendingForNs = 10'000'000'000; // a launch's kernel not seen 10 s after it: none will come

bool is_launch(std::string_view name) { return name.starts_with("cudaLaunchKernel") || name.starts_with("cuLaunchKernel"); }

bool is_dataloader_frame(std::string_view name) {
    return (name.starts_with("__next__ (") || name.starts_with("_next_data (")) && name.find("dataloader.py") != std::string::npos;
}

double us_of(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

// Credits every instant of every step to its highest-priority active category (one sweep);
// `blocked_credit[i]`: what the main thread's off-CPU slice i got of Blocked.
void break_down(const ProcessData& p, std::vector<StepBreakdown>& steps, const std::vector<CallSpan>& open_samples, bool loader_ranges,
                std::vector<uint64_t>& blocked_credit) {
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
    for (const auto* samples : {&p.main_samples, &open_samples})
        for (const auto& s : *samples) {
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

// A launch as the CPU's pace of launching sees it: from each launch to the next one on the same
// thread. A kernel shorter than that interval leaves the GPU idle until the next launch arrives
// (the GPU is starved: launch-bound), whatever the launch call itself costs.
struct Launch {
    uint64_t start_ns = 0;
    uint32_t correlation = 0;
    bool carried = false; // a thread's last launch of an earlier part
};

struct Joined {
    uint64_t start_ns = 0;
    double interval_us = 0; // 0: its thread's last launch so far
    uint32_t tid = 0;
};

// The launches' intervals, and each launch by correlation id with its interval; the threads'
// last launches become `carry.tails` (their kernels are moved along in add_kernels).
std::unordered_map<uint32_t, Joined> pace_launches(const ProcessData& p, const Span& window, StepSums& sums, LaunchCarry& carry,
                                                   std::map<uint32_t, LaunchCarry::Tail>& old_tails) {
    std::map<uint32_t, std::vector<Launch>> per_thread;
    for (const auto& [tid, tail] : carry.tails) per_thread[tid].push_back({tail.start_ns, tail.correlation, true});
    for (const auto& c : p.calls)
        if (is_launch(c.name) && c.start_ns >= window.start_ns && c.start_ns < window.end_ns) {
            sums.launch_us.add(us_of(c.dur()));
            per_thread[c.tid].push_back({c.start_ns, c.correlation});
        }
    old_tails = std::move(carry.tails);
    carry.tails.clear();
    std::unordered_map<uint32_t, Joined> by_correlation;
    for (auto& [tid, launches] : per_thread) {
        std::stable_sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) { return a.start_ns < b.start_ns; });
        for (size_t i = 0; i < launches.size(); ++i) {
            const Launch& l = launches[i];
            double gap = i + 1 < launches.size() ? us_of(launches[i + 1].start_ns - l.start_ns) : 0;
            if (gap > 0) sums.interval_us.add(gap);
            if (l.carried) { // an earlier part's last launch: its kernels seen then are judged now
                auto& waiting = old_tails[tid].kernel_us;
                if (gap > 0)
                    for (double k : waiting) ++sums.paired, sums.shorter += k < gap;
                if (gap > 0) waiting.clear();
            }
            if (l.correlation) by_correlation[l.correlation] = {l.start_ns, gap, tid};
        }
        const Launch& last = launches.back();
        LaunchCarry::Tail tail{last.start_ns, last.correlation, {}};
        if (last.carried) tail.kernel_us = std::move(old_tails[tid].kernel_us);
        carry.tails[tid] = std::move(tail);
    }
    return by_correlation;
}

void add_kernels_and_copies(const ProcessData& p, const Span& window, std::unordered_map<uint32_t, Joined>& launches, StepSums& sums,
                            LaunchCarry& carry) {
    std::unordered_set<uint32_t> joined;
    for (const auto& g : p.gpu) {
        if (g.start_ns < window.start_ns || g.start_ns >= window.end_ns) continue;
        if (g.kind == GpuKind::Kernel) {
            double us = us_of(g.dur());
            sums.kernel_us.add(us);
            sums.kernel_ns += g.dur();
            sums.kernel_ns_by_name[std::string(g.name)] += g.dur();
            if (!g.correlation) continue;
            Joined launch;
            if (auto it = launches.find(g.correlation); it != launches.end()) launch = it->second;
            else if (auto pend = carry.pending.find(g.correlation); pend != carry.pending.end())
                launch = {pend->second.start_ns, pend->second.interval_us, 0};
            else continue;
            joined.insert(g.correlation);
            if (launch.interval_us > 0) ++sums.paired, sums.shorter += us < launch.interval_us;
            else if (auto tail = carry.tails.find(launch.tid); tail != carry.tails.end() && tail->second.correlation == g.correlation)
                tail->second.kernel_us.push_back(us); // its interval is known once its thread launches again
            if (g.start_ns >= launch.start_ns) sums.delay_us.add(us_of(g.start_ns - launch.start_ns));
        } else if (g.kind == GpuKind::Memcpy && g.copy_kind == "HtoD") {
            sums.h2d_bytes += g.bytes, sums.h2d_ns += g.dur();
        } else if (g.kind == GpuKind::Memcpy && g.copy_kind == "DtoH") {
            sums.d2h_bytes += g.bytes, sums.d2h_ns += g.dur();
        }
    }
    // Launches whose kernel may start in a later part (not the threads' last: their tails carry them).
    for (uint32_t c : joined) carry.pending.erase(c);
    for (const auto& [correlation, launch] : launches)
        if (!joined.count(correlation) && launch.interval_us > 0) carry.pending[correlation] = {launch.start_ns, launch.interval_us};
    std::erase_if(carry.pending, [&](const auto& e) { return e.second.start_ns + kPendingForNs < window.end_ns; });
}

} // namespace

int Quantiles::bucket_of(double v) {
    if (!(v > 0)) return INT32_MIN; // zero (and below): a bucket of its own
    return static_cast<int>(std::ceil(std::log(v) / std::log(kBucketBase)));
}

double Quantiles::value_of(int bucket) {
    if (bucket == INT32_MIN) return 0;
    double upper = std::pow(kBucketBase, bucket);
    return 2 * upper / (1 + kBucketBase); // the middle (harmonic) of (upper / base, upper]
}

void Quantiles::add(double v) {
    ++n_;
    if (buckets_.empty() && exact_.size() < kExact) {
        exact_.push_back(v);
        return;
    }
    if (buckets_.empty()) { // past the exact ones: all counted in buckets from now on
        for (double e : exact_) add_bucketed(e);
        exact_ = {};
    }
    add_bucketed(v);
}

double Quantiles::median() const {
    if (!n_) return 0;
    if (buckets_.empty()) {
        std::vector<double> v = exact_;
        std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
        return v[v.size() / 2];
    }
    uint64_t rank = n_ / 2, seen = 0;
    for (const auto& [bucket, count] : buckets_)
        if ((seen += count) > rank) return value_of(bucket);
    return value_of(buckets_.rbegin()->first);
}

size_t Quantiles::count_below(double x) const {
    if (buckets_.empty()) return static_cast<size_t>(std::count_if(exact_.begin(), exact_.end(), [x](double v) { return v < x; }));
    size_t below = 0;
    for (const auto& [bucket, count] : buckets_)
        if (value_of(bucket) < x) below += count;
    return below;
}

uint64_t StepSums::bytes() const {
    return launch_us.bytes() + interval_us.bytes() + kernel_us.bytes() + delay_us.bytes() + kernel_ns_by_name.size() * 96 +
           blocked.size() * 128;
}

bool is_dataloader_range(std::string_view name) { return name.starts_with("enumerate(DataLoader)"); }

bool is_sync_call(std::string_view name) {
    return name == "cudaDeviceSynchronize" || name.starts_with("cudaStreamSynchronize") ||
           name == "cudaEventSynchronize" || name == "cudaMemcpy" || name == "cudaMemcpy_ptds";
}

void add_steps(const ProcessData& p, std::vector<StepBreakdown>& steps, const std::vector<CallSpan>& open_samples, StepSums& sums,
               LaunchCarry& carry) {
    if (steps.empty()) return;
    sums.loader_ranges = sums.loader_ranges || std::any_of(p.ranges.begin(), p.ranges.end(), [](const auto& r) { return is_dataloader_range(r.name); });
    std::vector<uint64_t> credit;
    break_down(p, steps, open_samples, sums.loader_ranges, credit);
    for (size_t i = 0; i < credit.size(); ++i) {
        if (!credit[i]) continue;
        std::string_view kind = off_cpu_kind(p.off_cpu[i].name);
        BlockedSum& b = sums.blocked[std::string(kind.empty() ? "other" : kind)];
        b.ns += credit[i];
        b.where[std::string(p.off_cpu[i].source)] += credit[i];
    }
    const Span window{steps.front().span.start_ns, steps.back().span.end_ns};
    auto inside = [&](const Span& s) { return s.start_ns >= window.start_ns && s.start_ns < window.end_ns; };
    std::map<uint32_t, LaunchCarry::Tail> old_tails;
    auto launches = pace_launches(p, window, sums, carry, old_tails);
    add_kernels_and_copies(p, window, launches, sums, carry);
    for (const auto& c : p.calls)
        if (c.tid == p.pid && is_sync_call(c.name) && inside(c)) sums.sync_ns += c.dur();
    for (const auto& c : p.collectives) // NCCL's calls enqueue (and lie inside c10d's, when torch makes them)
        if (c.tid == p.pid && !c.nccl && inside(c)) sums.collective_ns += c.dur();
}

void figures_from_sums(const StepSums& sums, ProcessAnalysis& r) {
    uint64_t total = 0, busy = 0;
    std::array<uint64_t, kCategoryCount> by_category{};
    for (const auto& s : r.steps) {
        total += s.span.dur();
        busy += s.gpu_busy_ns;
        for (size_t c = 0; c < kCategoryCount; ++c) by_category[c] += s.ns[c];
    }
    if (!total) return;
    const double n = static_cast<double>(r.steps.size());
    auto ms_per_step = [n](uint64_t ns) { return static_cast<double>(ns) / 1e6 / n; };
    for (size_t c = 0; c < kCategoryCount; ++c) r.share[c] = static_cast<double>(by_category[c]) / static_cast<double>(total);
    r.step_ms = ms_per_step(total);
    r.gpu_utilization = static_cast<double>(busy) / static_cast<double>(total);
    r.launches_per_step = static_cast<double>(sums.launch_us.size()) / n;
    r.median_launch_us = sums.launch_us.median();
    r.median_launch_interval_us = sums.interval_us.median();
    uint64_t paired = sums.paired, shorter = sums.shorter;
    if (!paired) // no correlation ids (no agent callbacks): against the typical interval instead
        paired = sums.kernel_us.size(), shorter = sums.kernel_us.count_below(r.median_launch_interval_us);
    r.median_kernel_us = sums.kernel_us.median();
    r.median_launch_delay_us = sums.delay_us.median();
    r.kernels_shorter_than_launch = paired ? static_cast<double>(shorter) / static_cast<double>(paired) : 0;
    r.kernel_ms_per_step = ms_per_step(sums.kernel_ns);
    r.h2d_gbps = sums.h2d_ns ? static_cast<double>(sums.h2d_bytes) / static_cast<double>(sums.h2d_ns) : 0;
    r.d2h_gbps = sums.d2h_ns ? static_cast<double>(sums.d2h_bytes) / static_cast<double>(sums.d2h_ns) : 0;
    r.waits = {ms_per_step(sums.collective_ns), r.share[kDataLoader] * r.step_ms, ms_per_step(sums.sync_ns), r.share[kBlocked] * r.step_ms,
               r.share[kOther] * r.step_ms};
    r.top_kernels_ms.clear();
    for (const auto& [name, ns] : sums.kernel_ns_by_name) r.top_kernels_ms.emplace_back(name, static_cast<double>(ns) / 1e6);
    std::stable_sort(r.top_kernels_ms.begin(), r.top_kernels_ms.end(), [](auto& a, auto& b) { return a.second > b.second; });
    if (r.top_kernels_ms.size() > 5) r.top_kernels_ms.resize(5);
    // The Blocked category by kind, ms per step, each with the line it was credited most under.
    r.blocked.clear();
    for (const auto& [kind, b] : sums.blocked) {
        auto most = std::max_element(b.where.begin(), b.where.end(), [](auto& x, auto& y) { return x.second < y.second; });
        r.blocked.push_back({kind, most->first, ms_per_step(b.ns)});
    }
    std::stable_sort(r.blocked.begin(), r.blocked.end(), [](const auto& a, const auto& b) { return a.ms_per_step > b.ms_per_step; });
}

} // namespace gtrace
