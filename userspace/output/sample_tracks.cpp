#include "output/sample_tracks.h"

#include <fmt/format.h>

#include "foundation/output_file.h"

namespace gtrace {

void SampleTracks::close_to(uint32_t pid, uint32_t tid, Track& t, size_t keep, uint64_t end_ns) {
    while (t.open.size() > keep) {
        t.open.pop_back();
        writer_.sample_frame_end(pid, tid, t.open.size(), end_ns);
    }
}

void SampleTracks::add(uint32_t pid, uint32_t tid, uint64_t ts_ns, const std::string& thread, const std::vector<PyFrame>& stack) {
    ++samples_;
    if (fold_ && !stack.empty()) {
        std::string key;
        for (const PyFrame& frame : stack) {
            std::string f = frame.text();
            // ';' separates frames in the folded format: keep it out of names (C++ templates).
            for (char& c : f)
                if (c == ';') c = ',';
            key += (key.empty() ? "" : ";") + f;
        }
        folded_[pid][key]++;
    }
    Track& t = tracks_[{pid, tid}];
    // A gap of more than two periods means the thread was off the CPU: end its frames there.
    if (!t.open.empty() && ts_ns > t.last_ns + 2 * period_ns_) close_to(pid, tid, t, 0, t.last_ns + period_ns_);
    size_t common = 0;
    while (common < t.open.size() && common < stack.size() && t.open[common] == stack[common]) ++common;
    close_to(pid, tid, t, common, ts_ns);
    for (size_t i = common; i < stack.size(); ++i) {
        t.open.push_back(stack[i]);
        writer_.sample_frame_begin({pid, tid, thread, i, stack[i]}, ts_ns);
    }
    t.last_ns = ts_ns;
}

void SampleTracks::finish() {
    for (auto& [key, t] : tracks_) close_to(key.first, key.second, t, 0, t.last_ns + period_ns_);
}

void SampleTracks::forget_process(uint32_t pid) {
    auto first = tracks_.lower_bound({pid, 0}), last = tracks_.lower_bound({pid + 1, 0});
    for (auto it = first; it != last; ++it) close_to(pid, it->first.second, it->second, 0, it->second.last_ns + period_ns_);
    tracks_.erase(first, last);
}

Result<void> SampleTracks::write_folded(const std::string& path, const TraceModel& model, bool force) const {
    std::string text;
    for (const auto& [pid, stacks] : folded_) {
        std::string prefix;
        if (const ProcessInfo* p = model.find(pid); p && p->ranks.rank && !p->forked_from)
            prefix = fmt::format("rank {}", *p->ranks.rank);
        else
            prefix = fmt::format("pid {}", pid);
        for (const auto& [stack, count] : stacks) fmt::format_to(std::back_inserter(text), "{};{} {}\n", prefix, stack, count);
    }
    return write_output(path, text, force);
}

} // namespace gtrace
