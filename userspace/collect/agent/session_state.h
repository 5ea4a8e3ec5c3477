// The state of the agent's CUPTI session, shared by the files that run it: cupti_session.cpp
// (start, stop, callbacks), cupti_library.cpp (the library and its clock), session_sharing.cpp
// (beside the job's own profiler). Internal to the agent.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <cupti.h>

#include "gtrace/cupti_multi_subscriber.h"
#include "collect/agent/activity_records.h"
#include "collect/agent/job_profiler.h"
#include "gtrace/agent.h"

namespace gtrace::agent {

// The CUPTI functions the agent calls, resolved from the library gtrace chose.
struct Cupti {
    void* handle = nullptr;
#define GT_CUPTI_FN(name) decltype(&::name) name = nullptr;
#define GT_CUPTI_FUNCTIONS(X)                                                                                      \
    X(cuptiGetResultString) X(cuptiGetTimestamp) X(cuptiActivityEnable) X(cuptiActivityDisable)                   \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)                      \
    X(cuptiActivityGetNumDroppedRecords) X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback)             \
    X(cuptiFinalize) X(cuptiSetThreadIdType) X(cuptiGetCallbackName)
    GT_CUPTI_FUNCTIONS(GT_CUPTI_FN)
    // Optional (CUPTI 12.x and later): API records per callback id, callbacks off per domain.
    // CUPTI 13.2 and later: the subscriber-scoped API (gtrace/cupti_multi_subscriber.h).
#define GT_CUPTI_OPTIONAL_FUNCTIONS(X)                                                                             \
    X(cuptiActivityEnableRuntimeApi) X(cuptiActivityEnableDriverApi) X(cuptiEnableDomain) X(cuptiSubscribe_v2)     \
    X(cuptiActivityEnable_v2) X(cuptiActivityDisable_v2) X(cuptiActivityRegisterCallbacks_v2)                     \
    X(cuptiActivityGetAttribute_v2)
    GT_CUPTI_OPTIONAL_FUNCTIONS(GT_CUPTI_FN)
#undef GT_CUPTI_FN
};

struct Session {
    Cupti cupti;
    StopTrim trim; // what the stop leaves out
    gt_agent_ring* ring = nullptr;
    std::mutex ring_mutex; // CUPTI may complete buffers on more than one thread
    std::atomic<int> buffers{0};
    std::mutex buffers_mutex;
    std::set<uint8_t*> own_buffers; // allocated here (the others are the job's profiler's)
    bool api_kinds = false;         // RUNTIME/DRIVER records are the session's own
    bool foreign_subscriber = false; // the callback API was held by another tool when the session began
    // CUPTI's multi-subscriber mode (CUDA 13.3+), chosen by a subscriber before the session: the
    // session is a subscriber of its own, with its own buffers and kinds, beside the others.
    bool alongside = false;
    // Held while the session's CUPTI state changes (start, stop, the call source, a subscription
    // given up from the job's thread); never across a flush (the job's callbacks run in it).
    std::recursive_mutex control;
    bool ids_trimmed = false;       // API records of the ids not ours are off (start_call_records)
    CUpti_SubscriberHandle subscriber = nullptr;
    std::vector<CUpti_ActivityKind> enabled;
    struct NamedId {
        CUpti_CallbackDomain domain;
        uint32_t cbid;
        bool callback_on; // one of ours: its callback switched on
    };
    std::vector<NamedId> named_ids; // every callback id this CUPTI names, found once per session
    bool callbacks_on = false;       // the callbacks keep the slots current
    bool reader_stalled = false;     // wait_for_room: gtrace made no room in time
};

// Constructed on first use, whatever the order of load-time constructors; never destroyed:
// CUPTI completes buffers from its own thread during the process's exit.
Session& the_session();

std::string result_text(CUptiResult r);
// Loads the first usable library of `candidates` into the_session().cupti; else why none.
std::string load_cupti(const std::vector<std::string>& candidates);
void set_message(gt_agent_ring* ring, const std::string& text);
// Switches a kind on for the session (and says so to the sharing with the job's profiler).
bool enable_kind(Session& s, CUpti_ActivityKind kind);
// What the session lends the sharing with the job's profiler (job_profiler.h).
SessionSide sharing_side();
// The job's profiler's window records every API (true) or not any more: the API records of
// the ids not the session's go on again for it, and off after (when the session trimmed them).
void all_api_records_for_job(bool on);
// The same, with the session's control lock held.
void apply_api_ids(Session& s, bool all);
// Empty when the process has a usable CUDA driver, else why not.
std::string driver_unusable();
// The session's CUPTI callbacks (cupti_session.cpp).
void CUPTIAPI on_api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
// The session's subscription ends, if it has one (its handle is forgotten: CUPTI may reuse it).
void unsubscribe(Session& s);
// The callbacks of every GPU-work API switched on for a new subscription; false: CUPTI names none.
bool begin_work_callbacks(Session& s, gt_agent_ring* ring);
// The session as a subscriber of its own beside the one that chose multi-subscriber mode
// (session_multi_subscriber.cpp): empty, or why not.
std::string join_other_subscribers(Session& s, gt_agent_ring* ring, bool callbacks);
// Whether a subscriber before the session put CUPTI in multi-subscriber mode (and this CUPTI has
// the subscriber-scoped API to join it).
bool multiple_subscribers_on(const Cupti& c);

} // namespace gtrace::agent
