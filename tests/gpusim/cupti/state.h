// Internal state of the CUPTI simulator, shared by its translation units.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpusim.h"
#include "gtrace/cupti_multi_subscriber.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gtsim::cupti {

// Activity buffers supplied by the client. Records are appended under one mutex; buffers are
// completed by the worker thread or by flushes, always with no lock held, since the client's
// callbacks may call back into CUPTI or take locks of their own.
class Buffers {
public:
    static Buffers& get(); // the first subscriber's (and the unversioned API's)
    static Buffers* create(); // another subscriber's (multi-subscriber mode); never freed
    void set_callbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done);
    void set_callbacks_v2(CUpti_BuffersCallbackRequestFunc_v2 req, CUpti_BuffersCallbackCompleteFunc_v2 done);
    bool has_callbacks();
    // Copies one record; complete_at: realtime when its simulated work has ended.
    void append(const void* record, size_t size, uint64_t complete_at);
    // Completes non-empty buffers; unless forced, only those whose records have all ended.
    void flush(bool forced);
    size_t take_dropped();
    void set_period_ms(uint32_t ms);
    // cuptiFinalize: forced flush, hand back every buffer (empty ones too), forget callbacks.
    void detach();

private:
    struct Buf {
        uint8_t* data;
        size_t size;
        size_t used;
        size_t max_records; // 0: as many as fit
        size_t records;
        uint64_t complete_at;
    };
    // The client's callbacks, of the unversioned API or of the subscriber-scoped one.
    struct Callbacks {
        CUpti_BuffersCallbackRequestFunc req = nullptr;
        CUpti_BuffersCallbackCompleteFunc done = nullptr;
        CUpti_BuffersCallbackRequestFunc_v2 req2 = nullptr;
        CUpti_BuffersCallbackCompleteFunc_v2 done2 = nullptr;
        bool set() const { return req || req2; }
        bool operator==(const Callbacks&) const = default;
        void request(uint8_t** data, size_t* bytes, size_t* max_records) const;
        void complete(uint8_t* data, size_t size, size_t valid) const;
    };
    Buffers() = default;
    void start_worker_locked();
    void worker();
    void stop_worker();
    // Moves deliverable buffers out; caller holds mu_.
    std::vector<Buf> take_locked(bool forced, bool include_empty_current);
    static void deliver(const std::vector<Buf>& bufs, const Callbacks& to);

    std::mutex mu_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    Callbacks cb_;
    std::optional<Buf> cur_;
    std::vector<Buf> full_;
    std::vector<Buf> spare_;
    size_t dropped_ = 0;
    int inflight_ = 0; // deliveries in progress on the worker
    bool worker_started_ = false;
    bool stopping_ = false;
    uint32_t period_ms_ = 200;
    std::thread::id worker_id_;
};

// Records r as the thread's last error (cuptiGetLastError) unless it is CUPTI_SUCCESS.
CUptiResult ret(CUptiResult r);

// Registers the simulator as libcuda's observer (once; every CUPTI entry point calls it).
void attach();

bool kind_enabled(CUpti_ActivityKind kind);
void set_kind(CUpti_ActivityKind kind, bool on);
void disable_all_kinds();
// API records of one callback id (cuptiActivityEnableRuntimeApi/DriverApi), or of the whole kind.
bool api_records_enabled(bool runtime, uint32_t cbid);
bool set_api_records(bool runtime, uint32_t cbid, bool on); // false: no such id
extern std::atomic<bool> g_latency_timestamps;
extern std::atomic<int> g_thread_id_type; // CUpti_ActivityThreadIdType

// The simulated driver's primary contexts: contextId = contextUid = device + 1.
CUcontext context_of(int device); // NULL for -1 (no current context)
int device_of(CUcontext ctx);     // -1 if not one
uint32_t gettid_u32();

// Observer entry points: API calls (callbacks.cpp) and GPU ops (records.cpp).
void on_enter(void* user, const gtsim_api_info* info);
void on_exit(void* user, const gtsim_api_info* info);
void on_gpu_op(void* user, const gtsim_gpu_op* op);
void on_gpu_ops(void* user, const gtsim_gpu_op* ops, size_t count);

// The single callback subscriber; callbacks are enabled per domain and cbid.
struct Subscriber {
    std::mutex mu;
    std::atomic<bool> active{false};
    CUpti_CallbackFunc fn = nullptr;
    void* user = nullptr;
    std::atomic<bool> runtime[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {};
    std::atomic<bool> driver[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
    // The enable flags of a domain, or nullptr; *size gets their count.
    std::atomic<bool>* flags(CUpti_CallbackDomain domain, uint32_t* size) {
        if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return *size = CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime;
        if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return *size = CUPTI_DRIVER_TRACE_CBID_SIZE, driver;
        return *size = 0, nullptr;
    }
};
Subscriber& subscriber(); // the first
void unsubscribe_all();  // the first's subscription ends
bool foreign_subscriber(); // GTSIM_CUPTI_FOREIGN_SUBSCRIBER=1: another tool holds the callbacks
// A subscriber's slot taken, nothing enabled (api.cpp); false when held.
bool take_subscriber(Subscriber& s, CUpti_SubscriberHandle* out, CUpti_CallbackFunc fn, void* user);

// Subscribers (subscribers.cpp): the first, and others in CUPTI 13.3's multi-subscriber mode.
CUptiResult subscribe(CUpti_SubscriberHandle* out, CUpti_CallbackFunc fn, void* user, const void* params, bool v2);
Subscriber* subscriber_of(CUpti_SubscriberHandle h); // null: no active subscriber
bool unsubscribe_other(CUpti_SubscriberHandle h);    // false: not one of the others
int active_subscribers();
uint8_t multiple_subscriber_state(); // CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE
// An unversioned (V1) activity call: refused in multi-subscriber mode, else remembered.
CUptiResult v1_call();
// A subscriber-scoped (V2) activity call: refused once the unversioned API was used, else remembered.
CUptiResult v2_call();
bool others_want(CUpti_ActivityKind kind);
inline bool wanted(CUpti_ActivityKind kind) { return kind_enabled(kind) || others_want(kind); }
bool set_other_kind(CUpti_SubscriberHandle h, CUpti_ActivityKind kind, bool on);
bool register_other_callbacks(CUpti_SubscriberHandle h, CUpti_BuffersCallbackRequestFunc_v2 req,
                              CUpti_BuffersCallbackCompleteFunc_v2 done);
void flush_others(bool forced);
// A record to every subscriber with its kind on (the first: only when to_first).
void emit(const void* record, size_t size, uint64_t complete_at, bool to_first = true);
// An API record, each of `ext` (its external correlation records) before it where
// EXTERNAL_CORRELATION is on too; to the first subscriber only when to_first.
void emit_api(const CUpti_ActivityAPI& api, const CUpti_ActivityExternalCorrelation* ext, size_t n, bool to_first);
// A kernel: CONCURRENT_KERNEL or KERNEL, as each subscriber enabled.
void emit_kernel(CUpti_ActivityKernel10 r, uint64_t complete_at);
constexpr int kMaxOtherSubscribers = 8;
bool any_other();
void for_each_other(const std::function<void(Subscriber&, int index)>& fn);

} // namespace gtsim::cupti
