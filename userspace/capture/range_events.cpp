#include "capture/range_events.h"

#include <vector>

#include "decode/collective.h"
#include "decode/torch_range.h"

namespace gtrace {

void RangeEvents::on_torch_range(const gt_torch_range_event& e) {
    switch (e.kind) { // --autograd-links: not ranges, the two ends of the forward-backward link
    case GT_RANGE_FORWARD_OP:
        s_.autograd.forward_op(e.pid, e.sequence_nr, s_.stacks.find(e.pid, e.py_stack));
        return;
    case GT_RANGE_NODE_BEGUN:
        s_.autograd.node_begun(e.pid, e.tid, e.sequence_nr, e.sp, e.start_ns);
        return;
    case GT_RANGE_NODE_ENDED:
        s_.autograd.node_ended(e.pid, e.tid, e.sp, e.end_ns);
        return;
    default:
        break;
    }
    TorchRange range{e.pid, e.tid, e.start_ns, e.end_ns, {}, s_.stacks.find(e.pid, e.py_stack), nullptr};
    if (e.kind == GT_RANGE_BACKWARD_BEGUN) {
        s_.backward.begun(e.pid, e.tid, e.start_ns, std::move(range.stack));
        return;
    }
    static const std::vector<PyFrame> kNoFrames;
    range.name = torch_range_name(e, range.stack ? range.stack->frames : kNoFrames);
    s_.writer.torch_range(range);
    if (e.kind == GT_RANGE_BACKWARD) {
        s_.backward.ended(e.pid, e.tid, e.end_ns);
        return;
    }
    script_.on_range(e.pid, range.name, e.end_ns);
}

void RangeEvents::on_collective(const gt_collective_event& e) {
    s_.writer.collective(decode_collective(e));
    ++collectives_;
}

} // namespace gtrace
