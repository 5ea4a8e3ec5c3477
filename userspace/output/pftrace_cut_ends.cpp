#include "output/pftrace_cut_ends.h"

#include <algorithm>
#include <set>

namespace gtrace {

void PftraceCutEnds::event(uint64_t track, uint64_t ts, bool slice_begin, bool slice_end) {
    last_ts_ = std::max(last_ts_, ts);
    if (slice_begin) {
        ++open_[track];
    } else if (slice_end) {
        if (auto o = open_.find(track); o != open_.end() && --o->second == 0) open_.erase(o);
    }
}

void PftraceCutEnds::committed(const TraceSink& sink, bool marked) {
    if (!marked) return;
    at_marks_[sink.units()] = now();
    if (at_marks_.size() > 2 * TraceSink::kMarksKept) { // the sink thinned its marks: keep theirs
        std::set<uint64_t> kept;
        for (uint64_t u : sink.marked_units()) kept.insert(u);
        std::erase_if(at_marks_, [&](const auto& m) { return !kept.contains(m.first); });
    }
}

PftraceOpenSlices PftraceCutEnds::now() const {
    PftraceOpenSlices o;
    o.tracks.assign(open_.begin(), open_.end());
    o.last_ts = last_ts_;
    return o;
}

PftraceOpenSlices PftraceCutEnds::at(const TraceSink& sink, uint64_t units) const {
    if (units == sink.units()) return now();
    auto it = at_marks_.find(units);
    return it != at_marks_.end() ? it->second : PftraceOpenSlices{}; // units 0: the header's end, nothing open
}

} // namespace gtrace
