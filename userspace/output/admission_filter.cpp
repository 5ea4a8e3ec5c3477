#include "output/admission_filter.h"

namespace gtrace {

bool AdmissionFilter::admit(uint64_t ts_ns, uint64_t events) {
    if (!in_window(ts_ns)) {
        outside_window_ += events;
        return false;
    }
    if (events_ + events > max_events_) {
        over_limit_ += events;
        return false;
    }
    events_ += events;
    return true;
}

void AdmissionFilter::flow(const CallRef& call, const GpuOp& op) {
    // Both ends must be in the trace; the ends themselves were counted with their slices.
    if (!in_window(call.start_ns) || !in_window(op.start_ns)) return;
    if (admit(op.start_ns, 2)) writer_->flow(call, op);
}

void AdmissionFilter::sample_frame_begin(const SampleFrame& frame, uint64_t ts_ns) {
    std::vector<bool>& open = open_frames_[{frame.pid, frame.tid}];
    open.resize(frame.depth);
    bool admitted = admit(ts_ns);
    open.push_back(admitted);
    if (admitted) writer_->sample_frame_begin(frame, ts_ns);
}

void AdmissionFilter::sample_frame_end(uint32_t pid, uint32_t tid, size_t depth, uint64_t ts_ns) {
    auto it = open_frames_.find({pid, tid});
    if (it == open_frames_.end() || depth >= it->second.size()) return;
    bool admitted = it->second[depth];
    it->second.resize(depth);
    if (admitted) writer_->sample_frame_end(pid, tid, depth, ts_ns);
}

} // namespace gtrace
