// Names a c10d collective event as torch.distributed does ("all_reduce", "barrier") and gives
// what the trace shows with it: the phase (issue: the call; wait: Work::wait on its result), the
// backend, the c10d method, and for a wait the time its collective was issued.
#pragma once
#include <cstdint>
#include <string>

#include "format/collective_names.h"
#include "gtrace/comm.h"

namespace gtrace {

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
};

Collective decode_collective(const gt_collective_event& e);


} // namespace gtrace
