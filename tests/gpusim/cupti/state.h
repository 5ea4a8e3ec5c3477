// Internal state of the CUPTI simulator, shared by its translation units.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpusim.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gtsim::cupti {

// Activity buffers supplied by the client. Records are appended under one mutex; buffers are
// completed by the worker thread or by flushes, always with no lock held, since the client's
// callbacks may call back into CUPTI or take locks of their own.
class Buffers {
public:
    static Buffers& get();
    void set_callbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done);
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
    Buffers() = default;
    void worker();
    void stop_worker();
    // Moves deliverable buffers out; caller holds mu_.
    std::vector<Buf> take_locked(bool forced, bool include_empty_current);
    void deliver(const std::vector<Buf>& bufs, CUpti_BuffersCallbackCompleteFunc done);

    std::mutex mu_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    CUpti_BuffersCallbackRequestFunc req_ = nullptr;
    CUpti_BuffersCallbackCompleteFunc done_ = nullptr;
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
Subscriber& subscriber();
void unsubscribe_all();

} // namespace gtsim::cupti
