// The session as one of several CUPTI subscribers (CUDA 13.3's multi-subscriber mode, chosen by
// a tool in the job before the session: gtrace/cupti_multi_subscriber.h): its own subscription,
// buffers and kinds, through the subscriber-scoped calls; nothing shared with the job's profiler.
#include "collect/agent/session_state.h"

namespace gtrace::agent {
namespace {

// Buffers of the subscriber-scoped API: all the session's own.
void CUPTIAPI on_buffer_requested_v2(uint8_t** buffer, size_t* size, size_t* max_records, CUpti_BufferCallbackRequestInfo*) {
    on_buffer_requested(buffer, size, max_records);
}

void CUPTIAPI on_buffer_completed_v2(uint8_t* buffer, size_t size, size_t valid, CUpti_BufferCallbackCompleteInfo*) {
    on_buffer_completed(nullptr, 0, buffer, size, valid);
}

} // namespace

std::string join_other_subscribers(Session& s, gt_agent_ring* ring, bool callbacks) {
    cupti_v2::SubscriberParams params;
    params.subscriberName = "gtrace";
    params.allowMultipleSubscribers = 1;
    CUptiResult r = s.cupti.cuptiSubscribe_v2(&s.subscriber, on_api_callback, nullptr, reinterpret_cast<CUpti_SubscriberParams*>(&params));
    if (r != CUPTI_SUCCESS) {
        s.subscriber = nullptr;
        return std::string(ring->cupti_path) + ": cuptiSubscribe_v2 (multi-subscriber mode, chosen by a tool before gtrace): " + result_text(r);
    }
    r = s.cupti.cuptiActivityRegisterCallbacks_v2(s.subscriber, on_buffer_requested_v2, on_buffer_completed_v2);
    if (r != CUPTI_SUCCESS) {
        unsubscribe(s);
        return std::string(ring->cupti_path) + ": cuptiActivityRegisterCallbacks_v2: " + result_text(r);
    }
    __atomic_or_fetch(&ring->flags, GT_AGENT_MULTI_SUBSCRIBER, __ATOMIC_RELEASE);
    if (callbacks) begin_work_callbacks(s, ring);
    return {};
}

} // namespace gtrace::agent
