#include "analyze/collectives.h"
#include "analyze/closed_steps.h"
#include "analyze/nccl_traffic.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

#include "format/nccl_names.h"

namespace gtrace {
namespace {

using Instance = CollectiveCall;

bool contains_ignoring_case(std::string_view text, std::string_view word) {
    auto eq = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; };
    return std::search(text.begin(), text.end(), word.begin(), word.end(), eq) != text.end();
}

// c10d's calls, each with the wait on its Work (found on the same thread, else any): the spans'
// indices, and the instance they make. Waits whose call was not seen make none.
struct Paired {
    Instance instance;
    size_t issue = 0;
    std::optional<size_t> wait;
};

std::vector<Paired> pair_calls(const std::vector<CollectiveSpan>& spans) {
    std::map<std::pair<uint32_t, uint64_t>, size_t> waits; // (tid, issued) → its wait
    std::map<uint64_t, size_t> waits_any_thread;
    for (size_t i = 0; i < spans.size(); ++i)
        if (spans[i].wait && spans[i].issued_ns) waits[{spans[i].tid, spans[i].issued_ns}] = i, waits_any_thread[spans[i].issued_ns] = i;
    std::vector<Paired> out;
    for (size_t i = 0; i < spans.size(); ++i) {
        const CollectiveSpan& c = spans[i];
        if ((c.wait && c.issued_ns) || c.nccl) continue; // with its issue; NCCL's calls: nccl_figures
        Paired p{{std::string(c.name), c.start_ns, c.end_ns, c.dur()}, i, std::nullopt};
        if (!c.wait) {
            auto w = waits.find({c.tid, c.start_ns});
            if (w != waits.end()) p.wait = w->second;
            else if (auto a = waits_any_thread.find(c.start_ns); a != waits_any_thread.end()) p.wait = a->second;
            if (p.wait) p.instance.done = std::max(p.instance.done, spans[*p.wait].end_ns), p.instance.busy_ns += spans[*p.wait].dur();
        }
        out.push_back(std::move(p));
    }
    return out;
}

// Sorted by `done`; ties in a fixed order, whatever order the calls came in.
void sort_by_done(std::vector<Instance>& v) {
    std::sort(v.begin(), v.end(), [](const Instance& a, const Instance& b) {
        return std::tie(a.done, a.arrival, a.busy_ns, a.name) < std::tie(b.done, b.arrival, b.busy_ns, b.name);
    });
}

std::vector<Instance> instances(const ProcessData& p, const CollectiveSums* closed) {
    std::vector<Instance> out = closed ? closed->instances : std::vector<Instance>{};
    for (auto& paired : pair_calls(p.collectives)) out.push_back(std::move(paired.instance));
    sort_by_done(out);
    return out;
}

uint64_t done_gap(const Instance& a, const Instance& b) { return b.done > a.done ? b.done - a.done : a.done - b.done; }

// The first instance of `list` (sorted by done) that finishes at or after `a`.
std::vector<Instance>::const_iterator first_done_from(const Instance& a, const std::vector<Instance>& list) {
    return std::lower_bound(list.begin(), list.end(), a.done, [](const Instance& i, uint64_t t) { return i.done < t; });
}

// The instance named like `a` in `list` (sorted by done) that finishes nearest to `a`.
const Instance* nearest_done(const Instance& a, const std::vector<Instance>& list) {
    auto it = first_done_from(a, list);
    const Instance* best = nullptr;
    for (auto f = it; f != list.end(); ++f)
        if (f->name == a.name) {
            best = &*f;
            break;
        }
    for (auto b = it; b != list.begin();)
        if ((--b)->name == a.name) {
            if (!best || done_gap(a, *b) < done_gap(a, *best)) best = &*b;
            break;
        }
    return best;
}

// On another rank, the same call as `a` (one of `mine`): of those overlapping it, the one
// finishing nearest. Else the one finishing nearest to it, when `a` is in turn the nearest of
// `mine` to that one: DDP's gradient wait (finalize_backward) ends once the last rank has issued
// its buckets' all-reduces from backward's hooks — that rank reaches its own finalize_backward
// later, after the rest of its backward, and returns at once; on a busy host, after the wait
// it ended is over.
const Instance* same_call(const Instance& a, const std::vector<Instance>& mine, const std::vector<Instance>& other) {
    auto it = first_done_from(a, other);
    const Instance* best = nullptr;
    uint64_t best_gap = UINT64_MAX;
    auto consider = [&](const Instance& b) {
        if (b.name != a.name || b.arrival > a.done || b.done < a.arrival) return;
        uint64_t gap = done_gap(a, b);
        if (gap < best_gap) best = &b, best_gap = gap;
    };
    for (auto f = it; f != other.end() && f->arrival <= a.done; ++f) consider(*f); // sorted by done: later ones may overlap too
    for (auto b = it; b != other.begin();) {
        --b;
        if (b->done < a.arrival) break;
        consider(*b);
    }
    if (best) return best;
    const Instance* near = nearest_done(a, other);
    return near && nearest_done(*near, mine) == &a ? near : nullptr;
}

// "ncclDevKernel_AllReduce_Sum_f32_RING_LL" → "AllReduce (NCCL kernels)".
std::string nccl_collective(std::string_view kernel) {
    size_t start = kernel.find('_');
    if (!kernel.starts_with("nccl") || start == std::string_view::npos) return "NCCL kernels";
    size_t end = kernel.find_first_of("_(", start + 1); // demangled names end in their parameters
    return fmt::format("{} (NCCL kernels)", kernel.substr(start + 1, end == std::string_view::npos ? end : end - start - 1));
}

void add_gpu_figures(const ProcessData& p, const Span& window, std::map<std::string, KernelSums>& by_name) {
    for (const auto& g : p.gpu) {
        if (g.kind != GpuKind::Kernel || g.start_ns < window.start_ns || g.start_ns >= window.end_ns || !is_communication_kernel(g.name))
            continue;
        KernelSums& k = by_name[nccl_collective(g.name)];
        ++k.count, k.ns += g.dur();
    }
}

// NCCL's calls of complete batches (a call outside any group, or a group's calls to its
// GroupEnd) over by `cut`, per thread, in time order.
std::vector<bool> closed_nccl_batches(const ProcessData& p, uint64_t cut) {
    std::map<uint32_t, std::vector<size_t>> by_thread;
    for (size_t i = 0; i < p.collectives.size(); ++i)
        if (p.collectives[i].nccl) by_thread[p.collectives[i].tid].push_back(i);
    std::vector<bool> included(p.collectives.size());
    for (auto& [tid, calls] : by_thread) {
        std::stable_sort(calls.begin(), calls.end(), [&](size_t a, size_t b) { return p.collectives[a].start_ns < p.collectives[b].start_ns; });
        size_t batches_end = 0;
        for (size_t k = 0; k < calls.size() && p.collectives[calls[k]].end_ns <= cut; ++k)
            if (p.collectives[calls[k]].group_depth == 0) batches_end = k + 1;
        for (size_t k = 0; k < batches_end; ++k) included[calls[k]] = true;
    }
    return included;
}

} // namespace

bool inside_one_of(const CallSpan& c, const std::map<uint32_t, std::vector<Span>>& spans) {
    auto it = spans.find(c.tid);
    if (it == spans.end()) return false;
    auto after = std::upper_bound(it->second.begin(), it->second.end(), c.start_ns, [](uint64_t t, const Span& s) { return t < s.start_ns; });
    return after != it->second.begin() && c.start_ns <= std::prev(after)->end_ns;
}

bool is_communication_kernel(std::string_view name) {
    return contains_ignoring_case(name, "nccl") || contains_ignoring_case(name, "gloo");
}

static Span step_window(const ProcessAnalysis& r) {
    return r.steps.empty() ? Span{0, UINT64_MAX} : Span{r.steps.front().span.start_ns, r.steps.back().span.end_ns};
}

void gather_collectives(const TraceData& trace, std::vector<ProcessAnalysis>& out) {
    for (auto& r : out) {
        auto it = trace.processes.find(r.pid);
        if (it == trace.processes.end()) continue;
        const ProcessData& p = it->second;
        const CollectiveSums* closed = p.closed ? &p.closed->collectives : nullptr;
        r.collective_calls = instances(p, closed);
        std::map<std::string, KernelSums> gpu = closed ? closed->kernels : std::map<std::string, KernelSums>{};
        add_gpu_figures(p, step_window(r), gpu);
        gather_nccl_traffic(p, step_window(r), closed ? &closed->nccl : nullptr, r);
        r.collective_kernels.clear();
        for (auto& [name, k] : gpu) {
            CollectiveFigures f;
            f.name = name, f.gpu = true, f.count = k.count, f.ms = static_cast<double>(k.ns) / 1e6;
            r.collective_kernels.push_back(std::move(f));
        }
    }
}

void close_collectives(ProcessData& p, const Span& window, uint64_t give_up_before_ns, CollectiveSums& sums) {
    const uint64_t cut = window.end_ns;
    std::vector<bool> drop(p.collectives.size());
    // c10d's calls whose wait is over too (or that none came to in 10 s): instances.
    std::vector<bool> paired_wait(p.collectives.size());
    for (auto& paired : pair_calls(p.collectives)) {
        if (paired.wait) paired_wait[*paired.wait] = true;
        const CollectiveSpan& c = p.collectives[paired.issue];
        bool over = c.end_ns <= cut && (paired.wait ? p.collectives[*paired.wait].end_ns <= cut : (c.wait || c.end_ns < give_up_before_ns));
        if (!over) continue;
        sums.instances.push_back(std::move(paired.instance));
        drop[paired.issue] = true;
        if (paired.wait) drop[*paired.wait] = true;
    }
    for (size_t i = 0; i < p.collectives.size(); ++i) // waits whose call was never seen: none will be
        if (p.collectives[i].wait && p.collectives[i].issued_ns && !paired_wait[i] && p.collectives[i].end_ns <= cut) drop[i] = true;
    // NCCL's batches over: their traffic, and the kernels joined to them.
    std::vector<bool> batches = closed_nccl_batches(p, cut);
    std::unordered_set<uint32_t> joined;
    add_nccl_traffic(p, window, &batches, sums.nccl, &joined);
    std::map<uint32_t, std::vector<Span>> kept_nccl;
    for (size_t i = 0; i < p.collectives.size(); ++i) {
        const CollectiveSpan& c = p.collectives[i];
        unsigned api = c.nccl ? nccl_api_from_symbol(c.name) : 0;
        bool batch_part = api == GT_NCCL_GROUP_END || nccl_api_moves_data(api);
        if (batches[i] || (c.nccl && !batch_part && c.end_ns <= cut))
            drop[i] = true; // ncclCommInitRank, ncclGroupStart: in no batch (a communicator's size is in sums.nccl.comm_size)
        else if (c.nccl) kept_nccl[c.tid].push_back({c.start_ns, c.end_ns});
    }
    for (auto& [tid, spans] : kept_nccl) std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start_ns < b.start_ns; });
    // NCCL kernels that started by the cut, joined now or to no NCCL call that stays: counted by
    // collective, and gone (one started later stays, counted at the end as a whole trace counts it).
    std::unordered_map<uint32_t, const CallSpan*> launches;
    for (const auto& c : p.calls)
        if (c.correlation) launches[c.correlation] = &c;
    std::vector<bool> drop_kernel(p.gpu.size());
    for (size_t j = 0; j < p.gpu.size(); ++j) {
        const GpuSpan& g = p.gpu[j];
        if (g.kind != GpuKind::Kernel || !is_communication_kernel(g.name) || g.start_ns >= cut) continue;
        bool gone = g.correlation && joined.count(g.correlation);
        if (!gone && g.end_ns <= cut) {
            auto launch = g.correlation ? launches.find(g.correlation) : launches.end();
            gone = launch == launches.end() || !inside_one_of(*launch->second, kept_nccl);
        }
        if (!gone) continue;
        drop_kernel[j] = true;
        if (g.start_ns >= window.start_ns) {
            KernelSums& k = sums.kernels[nccl_collective(g.name)];
            ++k.count, k.ns += g.dur();
        }
    }
    let_go_of_marked(p.collectives, drop);
    let_go_of_marked(p.gpu, drop_kernel);
}

void match_collectives(std::vector<ProcessAnalysis>& all) {
    nccl_bandwidths(all);
    // Each rank's wait for the last to arrive at each of its calls.
    for (auto& a : all) {
        if (!a.rank) continue;
        for (Instance& i : a.collective_calls) {
            uint64_t last = i.arrival;
            i.waited_for = -1;
            for (const auto& b : all) {
                if (!b.rank || &b == &a) continue;
                if (const Instance* same = same_call(i, a.collective_calls, b.collective_calls); same && same->arrival > last)
                    last = same->arrival, i.waited_for = *b.rank;
            }
            i.wait_ns = std::min(last - i.arrival, i.done - i.arrival);
        }
    }
    for (auto& r : all) {
        Span window = step_window(r);
        std::map<std::string, CollectiveFigures> by_name;
        for (const auto& f : r.collective_kernels) by_name[f.name] = f;
        uint64_t wait_ns = 0;
        for (const Instance& i : r.collective_calls) {
            if (i.arrival < window.start_ns || i.arrival >= window.end_ns) continue;
            CollectiveFigures& f = by_name[std::string(i.name)];
            ++f.count;
            f.ms += static_cast<double>(i.busy_ns) / 1e6;
            f.wait_ms += static_cast<double>(i.wait_ns) / 1e6;
            if (i.waited_for >= 0 && i.wait_ns) f.waited_for_ms[i.waited_for] += static_cast<double>(i.wait_ns) / 1e6;
            wait_ns += i.wait_ns;
        }
        r.collectives.clear();
        for (auto& [name, f] : by_name) {
            f.name = name;
            r.collectives.push_back(std::move(f));
        }
        std::stable_sort(r.collectives.begin(), r.collectives.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
        r.collective_wait_ms_per_step = r.steps.empty() ? 0 : static_cast<double>(wait_ns) / 1e6 / static_cast<double>(r.steps.size());
    }
}

} // namespace gtrace
