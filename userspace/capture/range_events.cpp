#include "capture/range_events.h"

#include <vector>

#include "decode/collective.h"
#include "decode/torch_range.h"

namespace gtrace {

void RangeEvents::on_torch_range(const gt_torch_range_event& e) {
    switch (e.kind) { // --autograd-links: not ranges, the two ends of the forward-backward link
    case GT_RANGE_FORWARD_OP:
        autograd_.forward_op(e.pid, e.sequence_nr, stacks_.find(e.pid, e.py_stack));
        return;
    case GT_RANGE_NODE_BEGUN:
        autograd_.node_begun(e.pid, e.tid, e.sequence_nr, e.sp, e.start_ns);
        return;
    case GT_RANGE_NODE_ENDED:
        autograd_.node_ended(e.pid, e.tid, e.sp, e.end_ns);
        return;
    default:
        break;
    }
    TorchRange range{e.pid, e.tid, e.start_ns, e.end_ns, {}, stacks_.find(e.pid, e.py_stack), nullptr};
    if (e.kind == GT_RANGE_BACKWARD_BEGUN) {
        backward_.begun(e.pid, e.tid, e.start_ns, std::move(range.stack));
        return;
    }
    static const std::vector<PyFrame> kNoFrames;
    range.name = torch_range_name(e, range.stack ? range.stack->frames : kNoFrames);
    out_.torch_range(range);
    if (e.kind == GT_RANGE_BACKWARD) {
        backward_.ended(e.pid, e.tid, e.end_ns);
        return;
    }
    script_.on_range(e.pid, range.name, e.end_ns);
}

void RangeEvents::on_collective(const gt_collective_event& e) {
    Collective c = decode_collective(e);
    counts_.on_collective(c);
    if (c.unrecorded) return; // news for the counts only: nothing happened that a trace could show
    out_.collective(c);
    ++collectives_;
}

} // namespace gtrace
