// Torch ranges (user-scope RecordFunction ranges: steps, optimizer, modules) and c10d collectives
// with their waits, from the libtorch probes; each range also goes to the capture script, whose
// step marker is one of them.
#pragma once
#include <cstdint>

#include "capture/capture_script.h"
#include "decode/python_stacks.h"
#include "model/autograd_links.h"
#include "model/backward_passes.h"
#include "model/collective_counts.h"
#include "model/event_stream.h"
#include "gtrace/comm.h"
#include "gtrace/torch_ranges.h"

namespace gtrace {

class RangeEvents {
public:
    RangeEvents(PythonStacks& stacks, BackwardPasses& backward, AutogradLinks& autograd, CollectiveCounts& counts, EventConsumer& out,
                CaptureScript& script)
        : stacks_(stacks), backward_(backward), autograd_(autograd), counts_(counts), out_(out), script_(script) {}

    void on_torch_range(const gt_torch_range_event& e);
    void on_collective(const gt_collective_event& e);
    uint64_t collectives() const { return collectives_; }

private:
    PythonStacks& stacks_;
    BackwardPasses& backward_;
    AutogradLinks& autograd_;
    CollectiveCounts& counts_;
    EventConsumer& out_;
    CaptureScript& script_;
    uint64_t collectives_ = 0;
};

} // namespace gtrace
