// gtrace recover PARTIAL [-o OUTPUT] [--force]: completes the partial trace a killed capture left
// (its whole events, then a closing whose otherData says it was recovered) and moves it to
// OUTPUT (default: PARTIAL without ".partial"). The partial is completed in place, so a disk with
// no room for a copy is no obstacle. Any format gtrace writes: Chrome JSON, a Perfetto .pftrace
// (its whole packets, then a packet with the facts), or a Kineto directory (every partial file in
// it, each into its own name without ".partial").
#pragma once
#include <string>

#include "foundation/result.h"

namespace gtrace {

struct RecoverOptions {
    std::string partial, output; // output empty: the partial's name without ".partial"
    bool force = false;          // replace an existing output
};

Result<void> run_recover(const RecoverOptions& options);

} // namespace gtrace
