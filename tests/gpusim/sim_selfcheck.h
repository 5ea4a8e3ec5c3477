// Shared pieces of gpusim_selfcheck: the dlsym'ed CUPTI table, collected records, checks.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace selfcheck {

// CUPTI entry points, typed from the real headers, resolved from the dlopen'ed library.
struct Cupti {
    decltype(&cuptiGetVersion) GetVersion;
    decltype(&cuptiGetResultString) GetResultString;
    decltype(&cuptiGetTimestamp) GetTimestamp;
    decltype(&cuptiActivityEnable) ActivityEnable;
    decltype(&cuptiActivityDisable) ActivityDisable;
    decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks;
    decltype(&cuptiActivityFlushAll) ActivityFlushAll;
    decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord;
    decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords;
    decltype(&cuptiSubscribe) Subscribe;
    decltype(&cuptiUnsubscribe) Unsubscribe;
    decltype(&cuptiEnableDomain) EnableDomain;
    decltype(&cuptiEnableCallback) EnableCallback;
    decltype(&cuptiFinalize) Finalize;
    decltype(&cuptiGetStreamIdEx) GetStreamIdEx;
    decltype(&cuptiGetContextId) GetContextId;
    decltype(&cuptiSetThreadIdType) SetThreadIdType;
};
extern Cupti cupti;
bool load_cupti(const std::string& path);

int check_failed(const char* file, int line, const char* what);
extern std::atomic<int> g_checks;
#define CHECK(cond)                                                                              \
    do {                                                                                         \
        ++::selfcheck::g_checks;                                                                 \
        if (!(cond)) ::selfcheck::check_failed(__FILE__, __LINE__, #cond);                       \
    } while (0)
int failures();

// What the buffer callbacks collected, by kind.
struct Collected {
    std::mutex mu;
    std::vector<CUpti_ActivityKernel10> kernels;
    std::vector<CUpti_ActivityMemcpy6> memcpys;
    std::vector<CUpti_ActivityMemset4> memsets;
    std::vector<CUpti_ActivityAPI> apis;    // RUNTIME
    std::vector<CUpti_ActivityAPI> drivers; // DRIVER
    std::vector<CUpti_ActivitySynchronization2> syncs;
    std::vector<CUpti_ActivityMemory4> memory;
    size_t bad_records = 0;
    size_t buffers = 0;
    size_t empty_buffers = 0;
    std::vector<std::thread::id> completing_threads;
    void clear();
};
Collected& collected();

// bufferRequested behaviour, switched by the phases of the check.
enum class BufferMode { Normal, Null, Tiny };
extern BufferMode g_buffer_mode;
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);

// One runtime call as the subscriber saw it.
struct Call {
    uint32_t cbid = 0;
    uint32_t correlation = 0;
    bool entered = false, exited = false, slot_ok = false;
    int return_value = -1;
    std::string symbol;
    dim3 grid{0, 0, 0};
};
struct Calls {
    std::mutex mu;
    std::map<uint32_t, Call> by_corr;
    std::vector<uint32_t> launches; // correlation ids of launch calls, in issue order
};
Calls& calls();
void CUPTIAPI on_callback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

// Every callback of either domain, in order (phases 5 and 6).
struct ApiEvent {
    uint32_t domain = 0, cbid = 0, correlation = 0, tid = 0;
    bool enter = false;
    std::string function, symbol;
};
struct Events {
    std::mutex mu;
    std::vector<ApiEvent> list;
    size_t size() {
        std::lock_guard lk(mu);
        return list.size();
    }
};
Events& events();

// One line of GTSIM_LOG.
struct LogLine {
    std::string kind, name, copy, api;
    uint64_t pid = 0, correlation = 0, stream = 0, start = 0, end = 0, mono_start = 0, mono_end = 0, bytes = 0;
    uint64_t graph = 0, graph_node = 0;
    uint64_t grid[3] = {0, 0, 0};
};
std::vector<LogLine> read_log(const std::string& path, uint64_t pid);

// A launch the workload made, and what its kernel record must say.
struct Launch {
    dim3 grid;
    uint32_t stream;
    const char* name;
};
// Checks everything phase 1 (the main workload) produced; sync_corr: the cudaMemcpy call.
void check_phase1(const std::vector<Launch>& launches, uint32_t sync_corr, const std::string& log_path);

// Expected durations, recomputed from the same environment the simulator read.
uint64_t expected_kernel_ns(uint64_t blocks);
uint64_t expected_copy_ns(const char* dir, uint64_t bytes);
uint64_t expected_memset_ns(uint64_t bytes);
uint64_t launch_latency_ns();

// Phase 5: every launch, copy and set path (runtime, driver, nested, the blas library, threads),
// checked against the correlation rules of CUPTI_CORRELATION.md; phase 6: capture and graphs.
void paths_phase(const std::string& log_path);
void graphs_phase(const std::string& log_path);
// Subscribes to both API domains and enables the kinds phases 5 and 6 check.
void start_full_tracing();

} // namespace selfcheck
