#include "analyze/collectives.h"
#include "analyze/nccl_traffic.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

namespace gtrace {
namespace {

using Instance = CollectiveCall;

bool contains_ignoring_case(std::string_view text, std::string_view word) {
    auto eq = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; };
    return std::search(text.begin(), text.end(), word.begin(), word.end(), eq) != text.end();
}

std::vector<Instance> instances(const ProcessData& p) {
    std::map<std::pair<uint32_t, uint64_t>, const CollectiveSpan*> waits; // (tid, issued) → its wait
    std::map<uint64_t, const CollectiveSpan*> waits_any_thread;
    for (const auto& c : p.collectives)
        if (c.wait && c.issued_ns) waits[{c.tid, c.issued_ns}] = &c, waits_any_thread[c.issued_ns] = &c;
    std::vector<Instance> out;
    for (const auto& c : p.collectives) {
        if ((c.wait && c.issued_ns) || c.nccl) continue; // with its issue; NCCL's calls: nccl_figures

        Instance i{std::string(c.name), c.start_ns, c.end_ns, c.dur()};
        if (!c.wait) {
            auto w = waits.find({c.tid, c.start_ns});
            const CollectiveSpan* wait = w != waits.end() ? w->second : nullptr;
            if (!wait)
                if (auto a = waits_any_thread.find(c.start_ns); a != waits_any_thread.end()) wait = a->second;
            if (wait) i.done = std::max(i.done, wait->end_ns), i.busy_ns += wait->dur();
        }
        out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [](const Instance& a, const Instance& b) { return a.done < b.done; });
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

void add_gpu_figures(const ProcessData& p, const Span& window, std::map<std::string, CollectiveFigures>& by_name) {
    for (const auto& g : p.gpu) {
        if (g.kind != GpuKind::Kernel || g.start_ns < window.start_ns || g.start_ns >= window.end_ns || !is_communication_kernel(g.name))
            continue;
        CollectiveFigures& f = by_name[nccl_collective(g.name)];
        f.gpu = true;
        ++f.count;
        f.ms += static_cast<double>(g.dur()) / 1e6;
    }
}

} // namespace

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
        r.collective_calls = instances(it->second);
        std::map<std::string, CollectiveFigures> gpu;
        add_gpu_figures(it->second, step_window(r), gpu);
        gather_nccl_traffic(it->second, step_window(r), r);
        r.collective_kernels.clear();
        for (auto& [name, f] : gpu) {
            f.name = name;
            r.collective_kernels.push_back(std::move(f));
        }
    }
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
