// Names a c10d collective event as torch.distributed does ("all_reduce", "barrier") and gives
// its trace arguments: the phase (issue: the call; wait: Work::wait on its result), the backend,
// the c10d method, and for a wait the time its collective was issued.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "gtrace/comm.h"

namespace gtrace {

struct Collective {
    std::string name; // "all_reduce"; a wait whose collective was not seen: "wait (collective not seen)"
    nlohmann::json args;
};

Collective decode_collective(const gt_collective_event& e);

// The c10d method of an op ("allreduce"), and torch.distributed's name for it ("all_reduce");
// nullptr for GT_COLL_UNKNOWN or out of range.
const char* collective_method(unsigned op);
const char* collective_shown_name(unsigned op);
// The backend class ("ProcessGroupGloo") and its short name ("gloo"); nullptr when unknown.
const char* backend_class(unsigned backend);
const char* backend_name(unsigned backend);

} // namespace gtrace
