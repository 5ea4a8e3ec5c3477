// Names a c10d collective event as torch.distributed does ("all_reduce", "barrier") and gives
// what the trace shows with it: the phase (issue: the call; wait: Work::wait on its result), the
// backend, the c10d method, and for a wait the time its collective was issued. An NCCL API call
// ("ncclAllReduce") carries its arguments instead (NcclArgs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "format/collective_names.h"
#include "format/nccl_names.h"
#include "gtrace/comm.h"

namespace gtrace {

// What an NCCL API call said (gtrace/comm.h's layout): its elements and their type, the bytes of
// its own buffer (count x the type's size: AllGather's send, ReduceScatter's receive buffer),
// the reduction, root or peer, stream, and the group calls open on its thread.
struct NcclArgs {
    unsigned api = GT_NCCL_UNKNOWN;
    uint64_t count = 0, bytes = 0;
    const char* datatype = nullptr; // "float32"; null: none or not one of NCCL's
    const char* redop = nullptr;    // "sum"; null: none
    int peer = -1;                  // root or peer (comm init: this rank); -1: none
    uint64_t stream = 0;
    unsigned group_depth = 0; // ncclGroupStart calls open (GroupEnd: after it)
    int result = 0;           // ncclResult_t
    uint32_t nranks = 0;      // comm init: the communicator's size
};

struct Collective {
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0;
    std::string name; // "all_reduce"; a wait whose collective was not seen: "wait (collective not seen)"
    bool wait = false;             // Work::wait, not the call that issued it
    const char* op = nullptr;      // the c10d method ("allreduce"); null: not known
    const char* backend = nullptr; // "gloo"; null: not known
    uint64_t issued_ns = 0;        // a wait: its collective's call entry; 0: not seen
    uint64_t group = 0;            // the backend object (one process group, in this process); 0: not known
    bool ddp_gradients = false;    // DDP's wait on its gradient buckets' all-reduces (group not known)
    bool unrecorded = false;       // not a collective: one of this thread's could not be recorded from start_ns on
    std::optional<NcclArgs> nccl;  // an NCCL API call (group: its ncclComm_t)
};

Collective decode_collective(const gt_collective_event& e);


} // namespace gtrace
