// The agent's use of CUPTI: load the library gtrace chose, enable activity records, translate
// completed buffers into ring records, and publish each GPU-work API call's correlation id in a
// per-thread slot that gtrace's BPF return probe reads (the exact CPU↔GPU join).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "gtrace/agent.h"

namespace gtrace::agent {

struct SessionConfig {
    std::vector<std::string> cupti_candidates; // tried in order
    bool callbacks = true;                      // try to subscribe to the callback API
};

// Starts CUPTI and sends records into `ring`. Returns an empty string on success, else why not
// (the text names every library tried). One session per process at a time.
std::string start_session(gt_agent_ring* ring, const SessionConfig& config);
// Completes buffers whose records are done (periodic) or all of them (`forced`).
void flush_session(bool forced);
// Measures the CUPTI clock against CLOCK_MONOTONIC and stores the offset in the ring header.
void measure_clock();
// Calls from CUPTI's API records (call_records.h): the records of every API whose callback is
// on go on. False where CUPTI cannot (before 12.x). Then begin_call_capture says since when,
// and end_unneeded_callbacks takes the callbacks off when they walk no stacks: until then they
// keep giving the uprobes' calls their correlation ids.
bool start_call_records(bool with_stacks);
void end_unneeded_callbacks(bool with_stacks);
// Runs `write` on the session's ring under the ring's lock; not at all when no session writes.
void with_session_ring(const std::function<void(gt_agent_ring*)>& write);
// Flushes everything, disables CUPTI, finalizes it and stops writing to the ring.
void stop_session();
// In a forked child: the ring is the parent's; the child must never write to it.
void forget_ring_in_child();
// The session's ring (null outside a session) and the lock every writer of it holds.
std::mutex& session_ring_mutex();
gt_agent_ring* session_ring(); // under session_ring_mutex()

} // namespace gtrace::agent

extern "C" {
// [tid << 32 | correlation id] of the latest GPU-work API call on each thread, indexed by
// tid % GT_AGENT_SLOTS. Read by BPF at the return of a probed call.
extern uint64_t gtrace_agent_slots[GT_AGENT_SLOTS];
void gtrace_agent_announce(uint64_t* slots);
}
