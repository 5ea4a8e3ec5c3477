// What a .pftrace cut short by a write error must end, known as its events are written — the
// writer never reads its file back: the slices open on each track and the latest event's time
// after the units committed so far, and as they were at each boundary the sink may cut back to
// (output/trace_sink.h: its marks, thinned with them).
#pragma once
#include <cstdint>
#include <map>

#include "format/pftrace_scan.h"
#include "output/trace_sink.h"

namespace gtrace {

class PftraceCutEnds {
public:
    // An event on `track` at `ts`: a slice's begin or end (TrackEvent.Type), or another kind.
    void event(uint64_t track, uint64_t ts, bool slice_begin, bool slice_end);
    // The sink committed a unit (`marked`: at a boundary a cut may go back to).
    void committed(const TraceSink& sink, bool marked);
    // The slices open at the boundary after `units` units (the latest: now; 0: the header's end).
    PftraceOpenSlices at(const TraceSink& sink, uint64_t units) const;

private:
    PftraceOpenSlices now() const;

    std::map<uint64_t, size_t> open_; // track uuid -> slices open on it
    uint64_t last_ts_ = 0;
    std::map<uint64_t, PftraceOpenSlices> at_marks_; // units -> open slices then
};

} // namespace gtrace
