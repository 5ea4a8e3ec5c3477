#include "decode/collective.h"

#include <algorithm>

namespace gtrace {

Collective decode_collective(const gt_collective_event& e) {
    Collective c;
    c.pid = e.pid, c.tid = e.tid, c.start_ns = e.start_ns, c.end_ns = std::max(e.end_ns, e.start_ns);
    if (e.phase == GT_COMM_NCCL) {
        const char* symbol = nccl_api_symbol(e.op);
        c.name = symbol ? symbol : "nccl (call not known)";
        c.backend = backend_name(GT_BACKEND_NCCL);
        c.group = e.group;
        NcclArgs a;
        a.api = symbol ? e.op : GT_NCCL_UNKNOWN;
        a.result = e.result, a.stream = e.stream, a.group_depth = e.group_depth, a.peer = e.peer;
        if (nccl_api_creates_comm(a.api)) {
            a.nranks = static_cast<uint32_t>(e.count); // an int in a register: the upper half is not its
            a.stream = 0;
        } else if (nccl_api_moves_data(a.api)) {
            a.count = e.count;
            a.datatype = nccl_datatype_name(e.datatype);
            a.bytes = e.count * nccl_datatype_size(e.datatype);
            a.redop = nccl_redop_name(e.redop);
        }
        c.nccl = a;
        return c;
    }
    c.unrecorded = e.phase == GT_COMM_UNRECORDED;
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
