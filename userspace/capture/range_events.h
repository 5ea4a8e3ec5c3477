// Torch ranges (user-scope RecordFunction ranges: steps, optimizer, modules) and c10d collectives
// with their waits, from the libtorch probes; each range also goes to the capture script, whose
// step marker is one of them.
#pragma once
#include <cstdint>

#include "capture/capture_script.h"
#include "capture/capture_state.h"
#include "gtrace/comm.h"
#include "gtrace/torch_ranges.h"

namespace gtrace {

class RangeEvents {
public:
    RangeEvents(CaptureState& s, CaptureScript& script) : s_(s), script_(script) {}

    void on_torch_range(const gt_torch_range_event& e);
    void on_collective(const gt_collective_event& e);
    uint64_t collectives() const { return collectives_; }

private:
    CaptureState& s_;
    CaptureScript& script_;
    uint64_t collectives_ = 0;
};

} // namespace gtrace
