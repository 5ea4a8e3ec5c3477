// The session beside the job's own profiler (job_profiler.h): what it lends the sharing.
#include "collect/agent/call_capture.h"
#include "collect/agent/call_records.h"
#include "collect/agent/cupti_session.h"
#include "collect/agent/session_state.h"
#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {


void report_job_window(uint64_t from_ns, uint64_t to_ns, bool found_open, bool found_by_kinds, uint64_t buffers_lost) {
    std::lock_guard lock(the_session().ring_mutex);
    gt_agent_ring* ring = the_session().ring;
    if (!ring) return;
    uint64_t pos = 0;
    auto* r = agent_ring_reserve_record<gt_gpu_shared_cupti>(ring, sizeof(gt_gpu_shared_cupti), GT_GPU_SHARED_CUPTI, 0, &pos);
    if (!r) return;
    r->from = from_ns, r->to = to_ns, r->buffers_lost = buffers_lost, r->found_open = found_open ? 1 : 0;
    r->found_by_kinds = found_by_kinds ? 1 : 0;
    agent_ring_commit(ring, pos, r->h.size);
}

// The job's profiler subscribes while the session holds the callback API (see job_profiler.h):
// the session lets it go. Calls the callbacks recorded are recorded from CUPTI's API records
// from now on (without Python stacks), or, where this CUPTI cannot, by the uprobes again; GPU
// work is joined through API records.
bool yield_callbacks_to_job() {
    Session& s = the_session();
    std::lock_guard control(s.control);
    if (!s.subscriber) return false;
    unsubscribe(s);
    s.callbacks_on = false; // the slots go stale: nothing to trim at the stop by them
    uint8_t calls = GT_YIELD_CALLS_UNCHANGED;
    gt_agent_ring* ring = session_ring();
    const bool agent_calls = ring && (__atomic_load_n(&ring->flags, __ATOMIC_ACQUIRE) & GT_AGENT_CALLS);
    if (agent_calls && !calls_from_records())
        calls = start_call_records(false) ? GT_YIELD_CALLS_FROM_RECORDS : GT_YIELD_CALLS_TO_UPROBES;
    if (!s.api_kinds)
        for (auto kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) enable_kind(s, kind);
    std::lock_guard lock(s.ring_mutex);
    if (!s.ring) return true;
    if (calls == GT_YIELD_CALLS_FROM_RECORDS) begin_call_capture(s.ring, true, false);
    // No callbacks: the uprobes record the calls (gtrace sees the flag go).
    else if (!calls_from_records()) __atomic_and_fetch(&s.ring->flags, ~uint32_t{GT_AGENT_CALLBACKS}, __ATOMIC_RELEASE);
    uint64_t pos = 0;
    auto* r = agent_ring_reserve_record<gt_gpu_callbacks_yielded>(s.ring, sizeof(gt_gpu_callbacks_yielded), GT_GPU_CALLBACKS_YIELDED, 0, &pos);
    if (r) {
        r->ts = monotonic_ns(), r->calls = calls;
        agent_ring_commit(s.ring, pos, r->h.size);
    }
    return true;
}

} // namespace

void apply_api_ids(Session& s, bool all) {
    if (!s.ids_trimmed) return;
    const Cupti& c = s.cupti;
    for (const auto& id : s.named_ids)
        if (!id.callback_on)
            (id.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? c.cuptiActivityEnableRuntimeApi : c.cuptiActivityEnableDriverApi)(id.cbid, all ? 1 : 0);
}

void all_api_records_for_job(bool on) {
    Session& s = the_session();
    std::lock_guard control(s.control);
    apply_api_ids(s, on);
}

bool enable_kind(Session& s, CUpti_ActivityKind kind) {
    CUptiResult r = s.alongside ? s.cupti.cuptiActivityEnable_v2(s.subscriber, kind, nullptr) : s.cupti.cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) return false;
    s.enabled.push_back(kind);
    if (!s.alongside) session_kind_on(kind); // the sharing with a job's profiler: not in multi-subscriber mode
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) s.api_kinds = true;
    return true;
}

SessionSide sharing_side() { return {all_api_records_for_job, report_job_window, yield_callbacks_to_job}; }

} // namespace gtrace::agent
