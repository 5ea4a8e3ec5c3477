#include "analyze/closed_steps.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analyze/collectives.h"

namespace gtrace {
namespace {

bool is_marker(const ProcessData& p, const RangeSpan& r, const StepRules& rules) {
    return r.tid == p.pid && std::regex_search(r.name.begin(), r.name.end(), rules.marker);
}

std::string sync_site(const CallSpan& c) { return fmt::format("{} at {}", c.name, c.source.empty() ? "?" : c.source); }

// Steps between consecutive ends (sorted); after `from` (a closed step's end), when not 0.
std::vector<Span> steps_between(std::vector<uint64_t> ends, uint64_t from) {
    if (from) {
        std::erase_if(ends, [from](uint64_t e) { return e <= from; }); // over with the closed steps
        ends.push_back(from);
    }
    std::sort(ends.begin(), ends.end());
    std::vector<Span> steps;
    for (size_t i = 1; i < ends.size(); ++i) steps.push_back({ends[i - 1], ends[i]});
    return steps;
}

// Steps end where the main thread's step-marker ranges end (Optimizer.step by default).
bool steps_from_ranges(const ProcessData& p, const StepRules& rules, FoundSteps& found) {
    std::vector<uint64_t> ends;
    std::string first_name;
    for (const auto& r : p.ranges)
        if (is_marker(p, r, rules)) {
            ends.push_back(r.end_ns);
            if (first_name.empty()) first_name = std::string(r.name);
        }
    if (ends.size() < 2) return false;
    found.steps = steps_between(std::move(ends), 0);
    found.base_rule = fmt::format("steps end at each {} range (step marker '{}')", first_name, rules.marker_text);
    return true;
}

// Without torch's record_function ranges, a training loop's steps show as the one synchronizing
// CUDA call site of the main thread that recurs most (the loss.item(), the synchronize).
bool steps_from_sync_calls(const ProcessData& p, FoundSteps& found) {
    std::map<std::string, std::vector<uint64_t>> ends_by_site;
    for (const auto& c : p.calls)
        if (c.tid == p.pid && is_sync_call(c.name)) ends_by_site[sync_site(c)].push_back(c.end_ns);
    const std::vector<uint64_t>* best = nullptr;
    for (const auto& [site, ends] : ends_by_site)
        if (!best || ends.size() > best->size()) best = &ends, found.sync_site = site;
    if (!best || best->size() < 3) {
        found.sync_site.clear();
        return false;
    }
    found.steps = steps_between(*best, 0);
    found.base_rule = "steps end at " + found.sync_site;
    return true;
}

// After closed steps, by the rule they were found by.
void steps_after(const ProcessData& p, const StepRules& rules, const ClosedSteps& closed, FoundSteps& found) {
    std::vector<uint64_t> ends;
    if (closed.sync_site.empty()) {
        for (const auto& r : p.ranges)
            if (is_marker(p, r, rules)) ends.push_back(r.end_ns);
    } else {
        for (const auto& c : p.calls)
            if (c.tid == p.pid && is_sync_call(c.name) && sync_site(c) == closed.sync_site) ends.push_back(c.end_ns);
    }
    found.steps = steps_between(std::move(ends), closed.end_ns);
    found.base_rule = closed.rule, found.sync_site = closed.sync_site;
}

// GPU records start when the agent is loaded (after attach) and stop at the capture's end, with
// kernels still running then missing: a step outside that span would show its GPU time as idle.
void trim_to_gpu_records(const ProcessData& p, FoundSteps& found) {
    const ClosedSteps* closed = p.closed.get();
    uint64_t first = closed ? closed->first_gpu_ns : UINT64_MAX, last = closed ? closed->last_gpu_end_ns : 0;
    for (const auto& g : p.gpu) first = std::min(first, g.start_ns), last = std::max(last, g.end_ns);
    size_t left_out = closed ? closed->left_out : 0;
    if (first != UINT64_MAX && !found.steps.empty()) {
        found.left_out_before = static_cast<size_t>(std::count_if(found.steps.begin(), found.steps.end(), [&](const Span& s) { return s.start_ns < first; }));
        size_t before = found.steps.size();
        std::erase_if(found.steps, [&](const Span& s) { return s.start_ns < first || s.end_ns > last; });
        left_out += before - found.steps.size();
    }
    found.rule = found.base_rule;
    if (left_out && !found.rule.empty()) found.rule += fmt::format("; {} step(s) outside the span of the GPU records left out", left_out);
}

// Lets go of the spans over by `end_ns` that the report reads no more once the steps up to there
// are closed.
void let_go(ProcessData& p, uint64_t end_ns) {
    std::map<uint32_t, std::vector<Span>> nccl; // NCCL's calls by thread: the launches inside them are matched later
    for (const auto& c : p.collectives)
        if (c.nccl) nccl[c.tid].push_back({c.start_ns, c.end_ns});
    for (auto& [tid, spans] : nccl) std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start_ns < b.start_ns; });
    // Over before it (a span of no length at it is the next step's: it starts in it).
    auto over = [end_ns](const Span& s) { return s.end_ns <= end_ns && s.start_ns < end_ns; };
    let_go_of(p.calls, [&](const CallSpan& c) { return over(c) && !inside_one_of(c, nccl); });
    let_go_of(p.gpu, [&](const GpuSpan& g) { return over(g) && !(g.kind == GpuKind::Kernel && is_communication_kernel(g.name)); });
    let_go_of(p.main_samples, over);
    let_go_of(p.ranges, over);
    let_go_of(p.off_cpu, over);
}

} // namespace

void let_go_before_steps(ProcessData& p, const StepRules& rules, uint64_t until_ns) {
    uint64_t bound = until_ns;
    for (const auto& r : p.ranges)
        if (is_marker(p, r, rules)) bound = std::min(bound, r.end_ns);
    for (const auto& c : p.calls)
        if (c.tid == p.pid && is_sync_call(c.name)) bound = std::min(bound, c.end_ns);
    auto over = [bound](const Span& s) { return s.end_ns <= bound && s.start_ns < bound; };
    let_go_of(p.main_samples, over);
    let_go_of(p.off_cpu, over);
    // Marker ranges make the steps; DataLoader ranges, once seen, decide what sampled frames mean.
    let_go_of(p.ranges, [&](const RangeSpan& r) { return over(r) && !is_marker(p, r, rules) && !is_dataloader_range(r.name); });
}

void let_go_unanalysed(ProcessData& p, uint64_t until_ns) {
    auto over = [until_ns](const Span& s) { return s.end_ns <= until_ns; };
    let_go_of(p.calls, over), let_go_of(p.gpu, over), let_go_of(p.main_samples, over);
    let_go_of(p.ranges, over), let_go_of(p.off_cpu, over), let_go_of(p.collectives, over);
}

FoundSteps find_steps(const ProcessData& p, const StepRules& rules) {
    FoundSteps found;
    if (p.closed) steps_after(p, rules, *p.closed, found);
    else if (!steps_from_ranges(p, rules, found)) steps_from_sync_calls(p, found);
    trim_to_gpu_records(p, found);
    return found;
}

size_t close_steps(ProcessData& p, const StepRules& rules, uint64_t until_ns, const OpenSamples& open_samples) {
    FoundSteps found = find_steps(p, rules);
    size_t n = 0;
    while (n < found.steps.size() && found.steps[n].end_ns <= until_ns) ++n;
    if (!n) {
        if (!p.closed) let_go_before_steps(p, rules, until_ns);
        return 0;
    }
    if (!p.closed) {
        p.closed = std::make_shared<ClosedSteps>();
        p.closed->rule = found.base_rule, p.closed->sync_site = found.sync_site;
    }
    ClosedSteps& closed = *p.closed;
    closed.left_out += found.left_out_before;
    closed.cuda_work = closed.cuda_work || !p.calls.empty() || !p.gpu.empty();
    std::vector<StepBreakdown> steps;
    for (size_t i = 0; i < n; ++i) steps.push_back({found.steps[i], {}, 0, 0});
    add_steps(p, steps, open_samples ? open_samples() : std::vector<CallSpan>{}, closed.sums, closed.carry);
    closed.steps.insert(closed.steps.end(), steps.begin(), steps.end());
    closed.end_ns = steps.back().span.end_ns;
    for (const auto& g : p.gpu) closed.first_gpu_ns = std::min(closed.first_gpu_ns, g.start_ns), closed.last_gpu_end_ns = std::max(closed.last_gpu_end_ns, g.end_ns);
    constexpr uint64_t kNoWaitAfterNs = 10'000'000'000; // a c10d call without a wait 10 s on: none will come
    close_collectives(p, {closed.steps.front().span.start_ns, closed.end_ns}, until_ns > kNoWaitAfterNs ? until_ns - kNoWaitAfterNs : 0,
                      closed.collectives);
    let_go(p, closed.end_ns);
    return n;
}

} // namespace gtrace
