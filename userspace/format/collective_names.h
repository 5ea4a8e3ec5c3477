// The names of c10d's collectives and backends (gtrace/comm.h's tables), shared by the probes that
// find their symbols (attach/comm_probes.h) and the decoding that names their events.
#pragma once
#include "gtrace/comm.h"

namespace gtrace {

// The c10d method of an op ("allreduce"), and torch.distributed's name for it ("all_reduce");
// nullptr for GT_COLL_UNKNOWN or out of range.
const char* collective_method(unsigned op);
const char* collective_shown_name(unsigned op);
// The backend class ("ProcessGroupGloo") and its short name ("gloo"); nullptr when unknown.
const char* backend_class(unsigned backend);
const char* backend_name(unsigned backend);

} // namespace gtrace
