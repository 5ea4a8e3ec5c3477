// The agent's own time on the job's threads — each CUPTI API callback, each Python stack walk —
// taken only while gtrace asks (`--bpf-stats`: gt_agent_ring.time_self), so that a run on a real
// GPU can say where gtrace's cost goes. The totals live in the agent's memory (a session may unmap
// its ring while a callback runs); the agent's own thread, which owns the ring's lifetime, copies
// them into the ring, where gtrace reads them. Internal to the agent.
#pragma once
#include <cstdint>

#include "gtrace/agent.h"

namespace gtrace::agent {

enum class SelfCost { Callback, PyWalk };

// Times one piece of the agent's work while timing is on (two clock reads, ~40 ns; nothing off).
class SelfTimer {
public:
    explicit SelfTimer(SelfCost what);
    ~SelfTimer();
    SelfTimer(const SelfTimer&) = delete;
    SelfTimer& operator=(const SelfTimer&) = delete;

private:
    SelfCost what_;
    uint64_t start_ns_ = 0; // 0: timing was off
};

// A new session counts from zero.
void reset_self_time();
// From the agent's thread: takes gtrace's time_self and writes the totals into the ring.
void publish_self_time(gt_agent_ring* ring);

} // namespace gtrace::agent
