// Calls from CUPTI's API activity records (capture_calls = GT_CALLS_FROM_RECORDS): CUPTI times
// each traced call itself and hands the records over in buffers, off the application's thread,
// so a call costs no callback at all without Python stacks, and only an entry callback (the
// stack walk) with them. What this module adds to the records: the stack walked at the call's
// entry (found again by correlation id), and outermost calls only — CUDA 13's runtime calls
// the driver's exported functions, so a runtime launch's record comes with a nested driver one.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gtrace/agent.h"

namespace gtrace::agent {

bool calls_from_records();
// entry_marks: the entry callbacks run (Python stacks wanted), so a record whose call left no
// mark entered before the agent began recording — the uprobes, on until then, have it.
void set_calls_from_records(bool on, bool entry_marks);

// In the entry callback of an outermost call: the stack walked for it.
struct CallStack {
    uint64_t id = 0;
    uint8_t py_status = GT_PY_NONE;
};
void remember_stack(uint32_t correlation, CallStack stack);
constexpr size_t kCallStackSlots = 1 << 17; // stacks kept by correlation id modulo this

// One CUPTI API record of a table API (`api`), times already on CLOCK_MONOTONIC. Called with
// the ring's lock held, records in the order CUPTI completed them.
struct ApiRecord {
    int api = -1;
    bool driver = false;
    uint32_t correlation = 0, tid = 0;
    uint64_t start = 0, end = 0;
    int32_t ret = 0; // cudaError_t or CUresult
};
void call_from_record(gt_agent_ring* ring, const ApiRecord& record);
// One GT_GPU_CALL record (the ring's lock held): from an API record, or timed by the callbacks.
void write_call_record(gt_agent_ring* ring, const ApiRecord& call, CallStack stack);
// After each completed buffer: driver calls that waited a whole buffer for an enclosing runtime
// call are outermost calls; `all` (the session's end) sends every one still waiting.
void send_waiting_calls(gt_agent_ring* ring, bool all);
void reset_call_records();

} // namespace gtrace::agent
