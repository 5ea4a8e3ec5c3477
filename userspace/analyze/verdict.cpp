#include "analyze/verdict.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyze/clock_alignment.h" // kContendedCpuShare

namespace gtrace {
namespace {

std::string pct(double share) { return fmt::format("{:.0f}%", share * 100); }

// What the figures point to, before asking whether it dominates: the verdict, the figures, and
// the step categories that make up its cause.
struct Candidate {
    std::string verdict, evidence;
    std::vector<Category> parts;
};

using Shares = std::array<double, kCategoryCount>;

// A rank's own time: its step less what it waits for the other ranks to arrive at a collective
// (a DDP rank waiting in backward for a slower one). That wait is not this rank's to fix — the
// job's verdict weighs it (stragglers) — so a rank is judged on the rest, as shares of the rest.
// `waiting`: the share of the step left out.
Shares own_shares(const ProcessAnalysis& r, double* waiting) {
    Shares s = r.share;
    double w = r.step_ms > 0 ? std::clamp(r.collective_wait_ms_per_step / r.step_ms, 0.0, s[kCommunication]) : 0;
    if (w < 0.01 || w > 0.95) w = 0; // nothing to speak of; or nothing left to judge (the straggler rule speaks)
    s[kCommunication] -= w;
    for (double& x : s) x /= 1 - w;
    *waiting = w;
    return s;
}

bool data_loading_bound(const Shares& s) { return s[kDataLoader] >= 0.25; }

// Many launches, and the GPU finishes most kernels before the CPU issues the next one.
bool launch_bound(const ProcessAnalysis& r, const Shares&) {
    return r.launches_per_step >= 50 && r.kernels_shorter_than_launch >= 0.5 && r.gpu_utilization < 0.5;
}

std::string bandwidths(const ProcessAnalysis& r) {
    std::string out;
    if (r.h2d_gbps > 0) out = fmt::format("HtoD {:.1f} GB/s", r.h2d_gbps);
    if (r.d2h_gbps > 0) out += fmt::format("{}DtoH {:.1f} GB/s", out.empty() ? "" : ", ", r.d2h_gbps);
    return out.empty() ? "no timed copies" : out;
}

// "all_reduce 31.20 ms per step (2 calls), 30.10 ms of it waiting for rank 1": the two largest.
std::string collective_summary(const ProcessAnalysis& r) {
    std::string out;
    double n = static_cast<double>(r.step_count());
    for (size_t i = 0; i < r.collectives.size() && i < 2; ++i) {
        const CollectiveFigures& f = r.collectives[i];
        double per_step = static_cast<double>(f.count) / n;
        out += fmt::format("{}{} {:.2f} ms per step ({:.3g} {}{} per step)", out.empty() ? "" : "; ", f.name, f.ms / n, per_step,
                           f.gpu ? "kernel" : "call", per_step == 1 ? "" : "s");
        auto most = std::max_element(f.waited_for_ms.begin(), f.waited_for_ms.end(), [](auto& a, auto& b) { return a.second < b.second; });
        if (most != f.waited_for_ms.end() && f.wait_ms / n >= 0.01)
            out += fmt::format(", {:.2f} ms of it waiting for {}", f.wait_ms / n,
                               f.waited_for_ms.size() == 1 ? fmt::format("rank {}", most->first) : "the last rank to arrive");
    }
    return out;
}

// "a lock 8.10 ms per step under train.py:40; sleep 1.02 ms per step": the three largest kinds.
std::string blocked_summary(const ProcessAnalysis& r) {
    std::string out;
    for (size_t i = 0; i < r.blocked.size() && i < 3; ++i)
        out += fmt::format("{}{} {:.2f} ms per step{}", out.empty() ? "" : "; ", r.blocked[i].kind, r.blocked[i].ms_per_step,
                           r.blocked[i].where.empty() ? "" : " under " + r.blocked[i].where);
    return out;
}

// What the main thread sleeps in most names the verdict: the DataLoader's queue is data loading,
// a collective communication, a CUDA sync the GPU; a lock, future, sleep or I/O is its own.
std::string blocked_verdict(const std::string& kind) {
    if (kind == "the DataLoader" || kind == "a queue") return "data_loading";
    if (kind == "a collective") return "communication";
    if (kind == "a CUDA sync") return "gpu";
    return "blocked";
}

Candidate candidate(const ProcessAnalysis& r, const Shares& s) {
    std::string busy = fmt::format("GPU busy {} of the step", pct(r.gpu_utilization));
    if (s[kBlocked] >= 0.3 && !r.blocked.empty() && s[kBlocked] >= s[kKernel] && s[kBlocked] >= s[kCommunication])
        return {blocked_verdict(r.blocked.front().kind),
                fmt::format("the main thread sleeps, off the CPU, {} of the step ({:.2f} ms per step) outside CUDA calls, "
                            "collectives and DataLoader ranges: {}; {}",
                            pct(s[kBlocked]), r.share[kBlocked] * r.step_ms, blocked_summary(r), busy),
                {kBlocked}};
    if (s[kCommunication] >= 0.3)
        return {"communication",
                fmt::format("in collectives {} of the step ({:.2f} ms per step){}", pct(s[kCommunication]),
                            r.share[kCommunication] * r.step_ms, r.collectives.empty() ? "" : ": " + collective_summary(r)),
                {kCommunication}};
    if (s[kMemcpy] >= 0.3 && s[kMemcpy] >= s[kKernel])
        return {"copy",
                fmt::format("Memcpy {} of the step ({:.2f} ms per step; {}); {}", pct(s[kMemcpy]), r.share[kMemcpy] * r.step_ms,
                            bandwidths(r), busy),
                {kMemcpy, kMemset}};
    if (s[kKernel] >= 0.5)
        return {"gpu", fmt::format("kernels {} of the step ({:.2f} ms per step); {}", pct(s[kKernel]), r.kernel_ms_per_step, busy), {kKernel}};
    if (data_loading_bound(s) || launch_bound(r, s)) {
        // Both can hold (workers starved of CPU by a busy main thread): the larger time wins,
        // the wait for batches against the CPU time spent issuing work.
        if (launch_bound(r, s) && (!data_loading_bound(s) || s[kRuntime] + s[kCpuExec] > s[kDataLoader]))
            return {"launch_overhead",
                    fmt::format("{:.0f} launches per step, {} of kernels shorter than the CPU's time from one launch to the "
                                "next (median kernel {:.1f} µs, launch interval {:.1f} µs, launch call {:.1f} µs, launch to "
                                "kernel start {:.1f} µs); CUDA runtime {} and CPU {} of the step; {}",
                                r.launches_per_step, pct(r.kernels_shorter_than_launch), r.median_kernel_us,
                                r.median_launch_interval_us, r.median_launch_us, r.median_launch_delay_us, pct(s[kRuntime]),
                                pct(s[kCpuExec]), busy),
                    // The GPU idles while the host issues launches: all the host's time is the issuing loop.
                    {kRuntime, kCpuExec, kOther}};
        return {"data_loading",
                fmt::format("waiting for the DataLoader {} of the step ({:.2f} ms per step); {}", pct(s[kDataLoader]),
                            r.share[kDataLoader] * r.step_ms, busy),
                {kDataLoader}};
    }
    if (s[kOther] >= 0.5 && r.gpu_utilization < 0.2 && r.host_cpu_pressure && *r.host_cpu_pressure >= kContendedCpuShare)
        // On a host whose CPUs were contended, a main thread that is runnable but waits for a CPU
        // is neither sampled (on-CPU only) nor asleep (a preemption is not a sleep): Other.
        return {"cpu",
                fmt::format("the main thread is neither in CUDA, collectives or DataLoader ranges, nor sampled on a CPU, nor "
                            "asleep, for {} of the step ({:.2f} ms per step): on this host, whose CPUs were contended {} of the "
                            "capture (/proc/pressure/cpu), that is a runnable thread waiting for a CPU; {}",
                            pct(s[kOther]), r.share[kOther] * r.step_ms, pct(*r.host_cpu_pressure), busy),
                {kOther, kCpuExec}};
    if (s[kOther] >= 0.5 && r.gpu_utilization < 0.2)
        // Sampling sees on-CPU time only: a main thread that is neither in CUDA nor running
        // Python is blocked — in a training loop, waiting for its next batch.
        return {"data_loading",
                fmt::format("the main thread is blocked outside CUDA, collectives and DataLoader ranges for {} of the step "
                            "({:.2f} ms per step: no probe names what it waits in; in a training loop typically the DataLoader's "
                            "next batch); {}",
                            pct(s[kOther]), r.share[kOther] * r.step_ms, busy),
                {kOther}};
    auto top = static_cast<Category>(std::max_element(s.begin(), s.begin() + kOther) - s.begin());
    std::string verdict = top == kKernel                      ? "gpu"
                          : top == kMemcpy || top == kMemset  ? "copy"
                          : top == kCommunication             ? "communication"
                          : top == kRuntime                   ? "launch_overhead"
                          : top == kDataLoader                ? "data_loading"
                                                              : "cpu";
    std::vector<Category> parts{top};
    // Many launches while the GPU idles (no GPU records to time the kernels by): the host's issuing loop.
    if (top == kRuntime && r.launches_per_step >= 50 && r.gpu_utilization < 0.2) parts = {kRuntime, kCpuExec, kOther};
    return {verdict,
            fmt::format("largest part besides Other: {} {} of the step; {:.0f} launches per step; {}", category_name(top), pct(s[top]),
                        r.launches_per_step, busy),
            parts};
}

std::string ranked(const std::vector<std::pair<Category, double>>& causes) {
    std::string out;
    for (const auto& [c, share] : causes)
        if (share >= 0.005) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", category_name(c), pct(share));
    return out;
}

struct Judgment {
    std::string verdict, leading, evidence;
    std::vector<std::pair<Category, double>> causes;
    double cause_share = 0;
};

// The candidate, if it dominates the step; else `mixed`, leading with the candidate.
Judgment judge_figures(const ProcessAnalysis& r) {
    Judgment j;
    for (int c = 0; c < kCategoryCount; ++c)
        if (r.share[static_cast<size_t>(c)] > 0) j.causes.emplace_back(static_cast<Category>(c), r.share[static_cast<size_t>(c)]);
    std::stable_sort(j.causes.begin(), j.causes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    double waiting = 0;
    Shares s = own_shares(r, &waiting);
    Candidate c = candidate(r, s);
    if (waiting > 0)
        c.evidence += fmt::format(" (shares of the step less the {} it waits for other ranks in collectives)", pct(waiting));
    double own = 0, next = 0;
    for (int k = 0; k < kCategoryCount; ++k) {
        double share = s[static_cast<size_t>(k)];
        if (std::find(c.parts.begin(), c.parts.end(), k) != c.parts.end()) {
            own += share;
            j.cause_share += r.share[static_cast<size_t>(k)];
        } else {
            next = std::max(next, share);
        }
    }
    if (own >= kDominantShare || own >= kDominantLead * next) {
        j.verdict = c.verdict, j.evidence = c.evidence;
        return j;
    }
    j.verdict = "mixed", j.leading = c.verdict;
    j.evidence = fmt::format("no dominant cause (none takes {} of the step or {:.0f}x every other part): {}; leading cause: {} — {}",
                             pct(kDominantShare), kDominantLead, ranked(j.causes), c.verdict, c.evidence);
    return j;
}

} // namespace

void judge_process(ProcessAnalysis& r, const std::string& step_marker) {
    if (r.steps.empty()) {
        r.evidence = fmt::format("no steps found: no torch range matches '{}' and no synchronizing CUDA call recurs on "
                                 "the main thread", step_marker);
        return;
    }
    Judgment j = judge_figures(r);
    r.verdict = std::move(j.verdict), r.leading = std::move(j.leading), r.evidence = std::move(j.evidence), r.causes = std::move(j.causes);
    r.cause_share = j.cause_share;
}

std::string remedy(const std::string& verdict, const std::string& leading) {
    if (verdict == "data_loading")
        return "more DataLoader workers (num_workers), persistent_workers, pin_memory, lighter per-item work or "
               "pre-processed data";
    if (verdict == "copy")
        return "pinned host memory (pin_memory=True) with non_blocking copies, fewer .item()/.cpu() syncs in the loop, "
               "keep tensors on the GPU, overlap copies with compute on a side stream";
    if (verdict == "launch_overhead")
        return "fewer, larger kernels: CUDA graphs or torch.compile, fused optimizers (foreach/fused=True), bigger "
               "batches, no per-step .item()";
    if (verdict == "gpu") return "the GPU is the limit: look at the top kernels (mixed precision, better algorithms)";
    if (verdict == "communication") return "overlap communication with compute (bucket sizes), fewer syncs";
    if (verdict == "cpu")
        return "the main thread's CPU work holds the GPU back: look at its samples (--folded) for the hot Python or "
               "CPU operators, move them to the GPU or compile them (torch.compile)";
    if (verdict == "blocked")
        return "the main thread sleeps, not computing: see what it waits in (the evidence's line) and what holds that — "
               "another thread holding the lock, a slow producer, a sleep or a blocking read in the loop; move it off the "
               "step's path or make it asynchronous";
    if (verdict == "straggler")
        return "find why that rank is slower (its data, its GPU, its host); the other ranks wait for it in every collective";
    if (verdict == "mixed")
        return leading.empty() ? "no single bottleneck: work on the largest parts of the step first"
                               : "no single bottleneck: start with the leading cause (" + leading + "): " + remedy(leading);
    return "";
}

namespace {

// One rank slower than the rest: its GPU time per step well above the others'.
std::optional<Straggler> straggler(const std::vector<const ProcessAnalysis*>& ranks) {
    if (ranks.size() < 2) return std::nullopt;
    auto slowest = *std::max_element(ranks.begin(), ranks.end(),
                                     [](const auto* a, const auto* b) { return a->kernel_ms_per_step < b->kernel_ms_per_step; });
    std::vector<double> others;
    for (const auto* r : ranks)
        if (r != slowest) others.push_back(r->kernel_ms_per_step);
    std::sort(others.begin(), others.end());
    double typical = others[others.size() / 2];
    if (slowest->kernel_ms_per_step > 1.5 * typical && slowest->kernel_ms_per_step - typical > 0.1 * slowest->step_ms)
        return Straggler{*slowest->rank, slowest->kernel_ms_per_step, typical, {}, -1, 0};
    return std::nullopt;
}

// A rank's wait per step for `rank` in collectives, and the collective it waits in most.
std::pair<double, std::string> waits_for(const ProcessAnalysis& r, int rank) {
    double total = 0, most = 0;
    std::string in;
    for (const auto& f : r.collectives)
        if (auto it = f.waited_for_ms.find(rank); it != f.waited_for_ms.end()) {
            total += it->second;
            if (it->second > most) most = it->second, in = f.name;
        }
    return {r.step_count() == 0 ? 0 : total / static_cast<double>(r.step_count()), in};
}

// Measured: the rank another waits for longest in collectives, when that wait is a tenth of the
// waiting rank's step or more and the one waited for waits less than half as long itself.
std::optional<Straggler> collective_straggler(const std::vector<const ProcessAnalysis*>& ranks) {
    std::optional<Straggler> best;
    for (const auto* w : ranks)
        for (const auto* s : ranks) {
            if (w == s) continue;
            auto [ms, in] = waits_for(*w, *s->rank);
            if (ms < 0.1 * w->step_ms || ms < 0.05 || s->collective_wait_ms_per_step >= 0.5 * ms || (best && ms <= best->wait_ms)) continue;
            best = Straggler{*s->rank, s->kernel_ms_per_step, w->kernel_ms_per_step, in, *w->rank, ms};
        }
    return best;
}

// Summaries of several nodes: the rank that spends least of its step in collectives (the last to
// arrive waits least), when the others' median is a tenth of a step or more and it is under half
// of that; the rank that spends most is named as waiting for it, by the difference.
std::optional<Straggler> least_in_collectives(const std::vector<const ProcessAnalysis*>& ranks) {
    if (ranks.size() < 2) return std::nullopt;
    auto in_collectives = [](const ProcessAnalysis* r) { return r->share[kCommunication] * r->step_ms; };
    auto by_time = [&](const auto* a, const auto* b) { return in_collectives(a) < in_collectives(b); };
    const ProcessAnalysis* least = *std::min_element(ranks.begin(), ranks.end(), by_time);
    const ProcessAnalysis* most = *std::max_element(ranks.begin(), ranks.end(), by_time);
    std::vector<double> others;
    for (const auto* r : ranks)
        if (r != least) others.push_back(in_collectives(r));
    std::nth_element(others.begin(), others.begin() + static_cast<long>(others.size() / 2), others.end());
    const double median = others[others.size() / 2];
    if (median < 0.1 * most->step_ms || in_collectives(least) >= 0.5 * median) return std::nullopt;
    std::string in = most->collectives.empty() ? "collectives" : most->collectives.front().name;
    Straggler s{*least->rank, least->kernel_ms_per_step, most->kernel_ms_per_step, in, *most->rank,
                in_collectives(most) - in_collectives(least)};
    s.inferred = true, s.in_collectives_ms = in_collectives(least), s.others_in_collectives_ms = median;
    return s;
}

// Measured stragglers only: whether every rank's own verdict is the straggler's, and that cause
// takes more of the waiting rank's whole step than its wait for the straggler does — or is data
// loading, measured (a quarter of the waiting rank's step less its wait in its DataLoader ranges):
// a rank that still waits for its DataLoader after waiting for the straggler is bound by
// its own loader (its workers had the whole wait to get ahead, and did not), and which rank's
// loader comes last each step is a matter of phase, not of one slower rank (seen in the demo's
// slow_loader: the same loaders, the wait 52% or 18% of a step from run to run).
bool shared_cause_outweighs(const std::vector<const ProcessAnalysis*>& ranks, const Straggler& slow) {
    if (slow.collective.empty()) return false;
    const ProcessAnalysis *straggling = nullptr, *waiting = nullptr;
    for (const auto* r : ranks) {
        if (*r->rank == slow.rank) straggling = r;
        if (*r->rank == slow.waiting_rank) waiting = r;
    }
    if (!straggling || !waiting || waiting->step_ms <= 0) return false;
    const std::string& cause = straggling->verdict;
    if (cause == "mixed" || cause == "communication" || cause.empty()) return false;
    for (const auto* r : ranks)
        if (r->verdict != cause) return false;
    const double wait_share = slow.wait_ms / waiting->step_ms;
    if (cause == "data_loading") // measured in its DataLoader ranges, not inferred from unnamed waits
        return wait_share < 1 && waiting->share[kDataLoader] / (1 - wait_share) >= 0.25;
    return waiting->cause_share > wait_share;
}

} // namespace

namespace {

// Ranks step in lockstep: the one that waits least for the others — least of its step in Other
// and Blocked (asleep outside CUDA: a CPU collective such as gloo's) and Communication (NCCL
// kernels) — is the one the others wait for. Its step is the job's bottleneck.
const ProcessAnalysis* bounding_rank(const std::vector<const ProcessAnalysis*>& ranks) {
    auto waiting = [](const ProcessAnalysis* r) { return r->share[kOther] + r->share[kBlocked] + r->share[kCommunication]; };
    return *std::min_element(ranks.begin(), ranks.end(), [&](const auto* a, const auto* b) { return waiting(a) < waiting(b); });
}

// Without ranks (processes that do not step together): the most common verdict, ties to the
// first process's.
const ProcessAnalysis* most_common(const std::vector<const ProcessAnalysis*>& ps) {
    const ProcessAnalysis* best = nullptr;
    long best_count = 0;
    for (const auto* p : ps) {
        long n = std::count_if(ps.begin(), ps.end(), [&](const auto* q) { return q->verdict == p->verdict && q->leading == p->leading; });
        if (n > best_count) best = p, best_count = n;
    }
    return best;
}

} // namespace

JobVerdict judge_job(std::vector<ProcessAnalysis>& processes, CollectiveMatching matching) {
    bool has_ranks = std::any_of(processes.begin(), processes.end(), [](const auto& p) { return p.rank.has_value(); });
    std::vector<const ProcessAnalysis*> judged; // the ranks with steps; without ranks, every process with steps
    for (const auto& p : processes)
        if (p.step_count() > 0 && (p.rank || !has_ranks)) judged.push_back(&p);
    JobVerdict v;
    if (judged.empty()) return v;
    const ProcessAnalysis* lead = has_ranks ? bounding_rank(judged) : most_common(judged);
    if (has_ranks) v.bounding_rank = lead->rank;
    v.verdict = lead->verdict, v.leading = lead->leading, v.causes = lead->causes, v.evidence = lead->evidence;
    if (judged.size() > 1 && has_ranks)
        v.evidence = fmt::format("{} waits least for the others ({} of its step in Other, Blocked and Communication), so they wait "
                                 "for it: {}",
                                 lead->name, pct(lead->share[kOther] + lead->share[kBlocked] + lead->share[kCommunication]), lead->evidence);
    else if (judged.size() > 1)
        v.evidence = fmt::format("the verdict of {} of {} processes, e.g. {}: {}",
                                 std::count_if(judged.begin(), judged.end(), [&](const auto* q) { return q->verdict == lead->verdict; }),
                                 judged.size(), lead->name, lead->evidence);
    // The straggler is measured in collectives where they were probed; else judged on kernel
    // time, which blaming leaves alone.
    if (has_ranks) v.straggler = collective_straggler(judged);
    if (has_ranks && !v.straggler && matching == CollectiveMatching::WithinNodes) v.straggler = least_in_collectives(judged);
    if (has_ranks && !v.straggler) v.straggler = straggler(judged);
    if (v.straggler && shared_cause_outweighs(judged, *v.straggler)) {
        // Every rank is held back by the same cause, one a little more this time (each waits for
        // its DataLoader, one's slower): fixing that cause helps every rank more than evening
        // them out. The wait is said, the job's verdict stays the ranks' own.
        const Straggler& slow = *v.straggler;
        std::string also = fmt::format("; rank {} also waits in {} for rank {} ({:.2f} ms per step)", slow.waiting_rank,
                                       slow.collective, slow.rank, slow.wait_ms);
        v.evidence += also;
        for (auto& r : processes)
            if (r.rank && *r.rank == slow.waiting_rank)
                r.evidence += fmt::format("; waits in {} for rank {} ({:.2f} ms per step)", slow.collective, slow.rank, slow.wait_ms);
        v.straggler.reset();
    }
    if (v.straggler) {
        const Straggler& slow = *v.straggler;
        v.verdict = "straggler", v.leading.clear();
        if (slow.collective.empty())
            v.evidence = fmt::format("rank {} runs {:.2f} ms of kernels per step, the others about {:.2f} ms", slow.rank, slow.kernel_ms,
                                     slow.others_ms);
        else if (slow.inferred)
            v.evidence = fmt::format("rank {} spends least of its step in collectives ({:.2f} ms per step; the other ranks {:.2f} ms "
                                     "at the median, rank {} most: {:.2f} ms more, in {} above all): the others wait for it "
                                     "(inferred: the nodes' summaries hold no collective times to match across nodes)",
                                     slow.rank, slow.in_collectives_ms, slow.others_in_collectives_ms,
                                     slow.waiting_rank, slow.wait_ms, slow.collective);
        else
            v.evidence = fmt::format("rank {} waits in {} for rank {} ({:.2f} ms per step)", slow.waiting_rank, slow.collective, slow.rank,
                                     slow.wait_ms);
        for (auto& r : processes)
            if (r.rank && *r.rank != slow.rank && r.step_count() > 0) {
                auto [ms, in] = waits_for(r, slow.rank);
                if (r.evidence.find("; own figures: ") != std::string::npos) {
                    // Judged before (a node's summary, merged): its evidence already says whom it waits for.
                } else if (!slow.collective.empty() && ms > 0)
                    r.evidence = fmt::format("waits in {} for rank {} ({:.2f} ms per step, {} of its step); own figures: {}", in,
                                             slow.rank, ms, pct(r.step_ms > 0 ? ms / r.step_ms : 0), r.evidence);
                else
                    r.evidence = fmt::format("waits for rank {} in every collective (it runs {:.2f} ms of kernels per step, this "
                                             "rank {:.2f} ms); own figures: {}",
                                             slow.rank, slow.kernel_ms, r.kernel_ms_per_step, r.evidence);
                r.verdict = "straggler";
                r.leading.clear();
            }
    }
    v.remedy = remedy(v.verdict, v.leading);
    return v;
}

} // namespace gtrace
