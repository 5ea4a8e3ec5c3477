// API calls recorded inside the process, from the CUPTI callbacks the agent already holds: the
// outermost call of a thread to an API of gtrace's table (gtrace/cuda_api.h), its times, its
// correlation id and its Python stack, as GT_GPU_CALL records — once gtrace asks for them
// (gt_agent_ring.capture_calls). gtrace then takes its uprobes off the process's CUDA libraries:
// a uprobe costs a trap per call (about 6 µs each on an H100 host, bench/README.md), a callback
// a few hundred nanoseconds.
#pragma once
#include <cstdint>
#include <mutex>

#include <cupti.h>

#include "gtrace/agent.h"

namespace gtrace::agent {

// The table's API of a callback id (by CUPTI's name for it), or -1. Built once per session.
void map_callback_name(CUpti_CallbackDomain domain, uint32_t cbid, const char* name);
int api_of_callback(CUpti_CallbackDomain domain, uint32_t cbid);
bool is_table_api(CUpti_CallbackDomain domain, const char* name);

// gtrace asked for the API calls (capture_calls): record them from now on, and say since when;
// from_records: the calls come from CUPTI's API records (call_records.h), the callbacks (if
// any: with_callbacks) only walk the stacks.
void begin_call_capture(gt_agent_ring* ring, bool from_records, bool with_callbacks = true);
// At the entry and exit of a thread's outermost call to an API of the table (api >= 0) that
// the agent records. `ring_mutex` guards the ring.
void call_entered(gt_agent_ring* const& session_ring, std::mutex& ring_mutex, int api, uint32_t correlation);
// `return_value`: CUPTI's pointer to the call's cudaError_t/CUresult (null: not known).
void call_exited(gt_agent_ring* const& session_ring, std::mutex& ring_mutex, uint32_t correlation, uint32_t tid,
                 const void* return_value);
// A new session: forget which stacks went out and the thread's call in progress.
void reset_call_capture();

// Walks the calling thread's Python stack (its frames sent first when the id is new).
void walk_stack(gt_agent_ring* const& session_ring, std::mutex& ring_mutex);
uint64_t monotonic_ns();

} // namespace gtrace::agent
