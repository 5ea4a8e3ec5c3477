#include "decode/collective.h"

#include <algorithm>

namespace gtrace {

Collective decode_collective(const gt_collective_event& e) {
    Collective c;
    c.pid = e.pid, c.tid = e.tid, c.start_ns = e.start_ns, c.end_ns = std::max(e.end_ns, e.start_ns);
    const char* shown = collective_shown_name(e.op);
    c.name = shown ? shown : "wait (collective not seen)";
    c.wait = e.phase == GT_COMM_WAIT;
    c.op = collective_method(e.op);
    c.backend = backend_name(e.backend);
    if (c.wait) c.issued_ns = e.issued_ns;
    c.group = e.group;
    c.ddp_gradients = e.op == GT_COLL_DDP_GRADIENTS;
    return c;
}

} // namespace gtrace
