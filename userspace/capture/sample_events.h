// Timer samples (py-spy-like): each sample's Python stack, or its native stack named from the
// process's mappings, as per-thread sample tracks; and the Python stacks BPF interns by id.
#pragma once
#include <string>

#include "capture/capture_state.h"
#include "gtrace/pystack.h"
#include "gtrace/sampling.h"
#include "output/sample_tracks.h"

namespace gtrace {

class SampleEvents {
public:
    explicit SampleEvents(CaptureState& s) : s_(s), tracks_(s.writer, s.options.sample_hz, !s.options.folded.empty()) {}

    void on_pystack(const gt_py_stack_event& e) { s_.stacks.define(e); }
    void on_sample(const gt_sample_event& e);
    void finish() { tracks_.finish(); }
    void forget_process(uint32_t pid) { tracks_.forget_process(pid); }
    uint64_t samples() const { return tracks_.samples(); }
    Result<void> write_folded() const { return tracks_.write_folded(s_.options.folded, s_.model, s_.options.force); }

private:
    CaptureState& s_;
    SampleTracks tracks_;
};

} // namespace gtrace
