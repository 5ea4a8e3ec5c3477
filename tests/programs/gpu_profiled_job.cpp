// A job that runs its own profiler, as PyTorch's does: CUPTI's activity API driven the way
// Kineto drives it (libkineto/src/CuptiActivityApi.cpp, CuptiActivityProfiler.cpp; its calls
// go through this program's PLT to libcupti, as libtorch_cpu's do), against the GPU simulator.
//
//   gpu_profiled_job --until-file STOP [--kernels K] [--step-sleep-ms M] --open-file O --close-file C [--subscribe]
//                    [--launch-first] [--multi-subscriber] [--idle-window GO]
//
// --launch-first: no device query first (as torch makes): the first launch initializes CUDA.
// --subscribe: as Kineto from 2025-02 to 2026-08 (libkineto/src/init.cpp before 7a3ba363), its
// first window subscribes to CUPTI's callback API (CONTEXT_CREATED); when that fails it runs
// CPU-only for the rest of the process — its window records no GPU activity.
// --idle-window GO: once its window is open (callbacks registered, kinds on), no CUDA call until
// GO exists: CUPTI has no buffer of the profiler's in use (the state a window is in between
// torch.profiler's prepare and its first step). With --no-driver-records its window leaves
// DRIVER off (Kineto's activity types without cuda_driver): no record at all comes of a driver
// call made then — the agent's own cuDriverGetVersion included.
// While a window is open each launch is inside an external correlation id, pushed and popped as
// PyTorch's profiler does for each op (Kineto's pushCorrelationId: CUSTOM0).
// --multi-subscriber: a profiler of CUDA 13.3's multi-subscriber mode (gtrace/cupti_multi_subscriber.h):
// it subscribes at start with cuptiSubscribe_v2 asking for several subscribers, and its windows
// use the subscriber-scoped calls (RegisterCallbacks_v2, Enable_v2, Disable_v2). Prints
// "profiler: multi-subscriber mode" once subscribed.
//
// Steps of K kernels (each with its own grid.x) and a synchronize. Once O exists the profiler's
// window opens (Kineto's prepare: buffer callbacks registered, its kinds enabled, cudaGetDevice's
// API records off), one warm-up step later it clears what it got (FlushAll(0), buffers dropped)
// and records; once C exists it stops (its kinds disabled, FlushAll(FORCED)) and checks its own
// output: every kernel launched while it recorded must be in its buffers, and every buffer it
// was handed must be one it gave. Prints "ready <pid>", "profiler: window open", "profiler:
// recording", "profiler: R of N kernels recorded, U buffers not its own" and PROFILER_OK or
// PROFILER_INCOMPLETE; exits 3 when incomplete.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include "gtrace/cupti_multi_subscriber.h"
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

extern "C" __attribute__((noinline, used)) void profiled_job_kernel(float*, int) {}

namespace libkineto { // Kineto's exported names, which gtrace's agent looks for
struct CuptiActivityApi {
    static void bufferRequestedTrampoline(uint8_t** buffer, size_t* size, size_t* max_records);
    static void bufferCompletedTrampoline(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
};
} // namespace libkineto

namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_OVERHEAD};

struct Profiler {
    std::mutex mutex;
    std::set<uint8_t*> allocated;
    std::vector<std::pair<uint8_t*, size_t>> ready; // completed buffers, valid bytes
    long foreign = 0;                               // buffers handed back that it never gave
} g_profiler;

bool exists(const std::string& f) {
    struct stat st;
    return !f.empty() && stat(f.c_str(), &st) == 0;
}

void check(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    fprintf(stderr, "gpu_profiled_job: %s: %s\n", what, text ? text : "?"); // Kineto logs and goes on
}

void CUPTIAPI requested_v2(uint8_t** buffer, size_t* size, size_t* max_records, CUpti_BufferCallbackRequestInfo*) {
    libkineto::CuptiActivityApi::bufferRequestedTrampoline(buffer, size, max_records);
}

void CUPTIAPI completed_v2(uint8_t* buffer, size_t size, size_t valid, CUpti_BufferCallbackCompleteInfo*) {
    libkineto::CuptiActivityApi::bufferCompletedTrampoline(nullptr, 0, buffer, size, valid);
}

void drop_ready() {
    std::lock_guard lock(g_profiler.mutex);
    for (auto& [buffer, valid] : g_profiler.ready) free(buffer);
    g_profiler.ready.clear();
}

} // namespace

void libkineto::CuptiActivityApi::bufferRequestedTrampoline(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes, *max_records = 0;
    std::lock_guard lock(g_profiler.mutex);
    g_profiler.allocated.insert(*buffer);
}

void libkineto::CuptiActivityApi::bufferCompletedTrampoline(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    std::lock_guard lock(g_profiler.mutex);
    if (!g_profiler.allocated.erase(buffer)) { // Kineto: "bufferCompleted called with unknown buffer"
        ++g_profiler.foreign;
        return;
    }
    g_profiler.ready.emplace_back(buffer, valid);
}

int main(int argc, char** argv) {
    std::string until, open_file, close_file;
    int kernels = 4, sleep_ms = 5;
    bool subscribe = false, cpu_only = false, launch_first = false, multi = false;
    std::string idle_until;
    bool driver_records = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--until-file") until = next();
        else if (a == "--kernels") kernels = atoi(next().c_str());
        else if (a == "--step-sleep-ms") sleep_ms = atoi(next().c_str());
        else if (a == "--open-file") open_file = next();
        else if (a == "--close-file") close_file = next();
        else if (a == "--subscribe") subscribe = true;
        else if (a == "--launch-first") launch_first = true;
        else if (a == "--multi-subscriber") multi = true;
        else if (a == "--idle-window") idle_until = next();
        else if (a == "--no-driver-records") driver_records = false;
        else {
            fprintf(stderr, "gpu_profiled_job: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    void* cudart = dlopen("libcudart.so.13", RTLD_NOW);
    auto launch = cudart ? reinterpret_cast<decltype(&cudaLaunchKernel)>(dlsym(cudart, "cudaLaunchKernel")) : nullptr;
    auto sync = cudart ? reinterpret_cast<decltype(&cudaDeviceSynchronize)>(dlsym(cudart, "cudaDeviceSynchronize")) : nullptr;
    auto device_count = cudart ? reinterpret_cast<decltype(&cudaGetDeviceCount)>(dlsym(cudart, "cudaGetDeviceCount")) : nullptr;
    if (!launch || !sync || !device_count) {
        fprintf(stderr, "gpu_profiled_job: no usable libcudart: %s\n", dlerror());
        return 2;
    }
    // CUDA initialized by a device query before the first launch, as torch does.
    if (int n = 0; !launch_first && (device_count(&n) != cudaSuccess || n < 1)) return 2;
    CUpti_SubscriberHandle own = nullptr; // --multi-subscriber
    if (multi) {
        gtrace::cupti_v2::SubscriberParams params;
        params.subscriberName = "gpu_profiled_job";
        params.allowMultipleSubscribers = 1;
        CUptiResult r = cuptiSubscribe_v2(&own, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr,
                                          reinterpret_cast<CUpti_SubscriberParams*>(&params));
        check(r, "cuptiSubscribe_v2");
        if (r != CUPTI_SUCCESS) return 2;
        printf("profiler: multi-subscriber mode\n");
    }
    printf("ready %d\n", getpid());
    fflush(stdout);
    enum { Idle, Warmup, Recording, Done } phase = Idle;
    unsigned grid = 1, first_recorded = 0, last_recorded = 0;
    float* arg0 = nullptr;
    int arg1 = 0;
    void* args[] = {&arg0, &arg1};
    long failed = 0;
    while (!exists(until)) {
        if (phase == Idle && exists(open_file) && subscribe) { // libkineto_init, once
            CUpti_SubscriberHandle handle = nullptr;
            CUptiResult r = cuptiSubscribe(&handle, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr);
            if (r == CUPTI_SUCCESS)
                check(cuptiEnableCallback(1, handle, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED), "cuptiEnableCallback");
            else {
                check(r, "cbapi.getCuptiStatus()");
                printf("profiler: CUPTI initialization failed - CUDA profiler activities will be missing\n");
                cpu_only = true;
            }
            subscribe = false;
        }
        if (phase == Idle && exists(open_file) && cpu_only) {
            phase = Warmup;
            printf("profiler: window open (CPU only)\n");
            fflush(stdout);
        } else if (phase == Idle && exists(open_file) && multi) { // the same, subscriber-scoped
            check(cuptiActivityRegisterCallbacks_v2(own, requested_v2, completed_v2), "cuptiActivityRegisterCallbacks_v2");
            for (CUpti_ActivityKind kind : kKinds) check(cuptiActivityEnable_v2(own, kind, nullptr), "cuptiActivityEnable_v2");
            phase = Warmup;
            printf("profiler: window open\n");
            fflush(stdout);
        } else if (phase == Idle && exists(open_file)) { // Kineto's prepareTrace → enableCuptiActivities
            check(cuptiActivityRegisterCallbacks(libkineto::CuptiActivityApi::bufferRequestedTrampoline,
                                                 libkineto::CuptiActivityApi::bufferCompletedTrampoline), "cuptiActivityRegisterCallbacks");
            for (CUpti_ActivityKind kind : kKinds)
                if (driver_records || kind != CUPTI_ACTIVITY_KIND_DRIVER) check(cuptiActivityEnable(kind), "cuptiActivityEnable");
            check(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0), "cuptiActivityEnableRuntimeApi");
            phase = Warmup;
            printf("profiler: window open\n");
            fflush(stdout);
            if (!idle_until.empty()) {
                printf("profiler: idle\n");
                fflush(stdout);
                while (!exists(idle_until)) usleep(10000);
            }
        } else if (phase == Warmup) { // startTrace → clearActivities: the warm-up's records go
            if (!cpu_only) check(cuptiActivityFlushAll(0), "cuptiActivityFlushAll");
            drop_ready();
            phase = Recording;
            first_recorded = grid;
            printf("profiler: recording\n");
            fflush(stdout);
        } else if (phase == Recording && exists(close_file)) { // stopTrace, then processTrace
            last_recorded = grid - 1;
            if (!cpu_only) {
                for (CUpti_ActivityKind kind : kKinds)
                    check(multi ? cuptiActivityDisable_v2(own, kind, nullptr) : cuptiActivityDisable(kind), "cuptiActivityDisable");
                check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
            }
            std::set<unsigned> seen;
            std::lock_guard lock(g_profiler.mutex);
            for (auto& [buffer, valid] : g_profiler.ready) {
                CUpti_Activity* record = nullptr;
                while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
                    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
                        unsigned g = static_cast<unsigned>(reinterpret_cast<CUpti_ActivityKernel10*>(record)->gridX);
                        if (g >= first_recorded && g <= last_recorded) seen.insert(g);
                    }
            }
            const unsigned expected = last_recorded + 1 - first_recorded;
            const bool ok = seen.size() == expected && g_profiler.foreign == 0 && expected > 0;
            printf("profiler: %zu of %u kernels recorded, %ld buffers not its own\n%s\n", seen.size(), expected, g_profiler.foreign,
                   ok ? "PROFILER_OK" : "PROFILER_INCOMPLETE");
            fflush(stdout);
            failed += ok ? 0 : 1;
            phase = Done;
        }
        const bool op_ids = phase == Warmup || phase == Recording;
        for (int k = 0; k < kernels; ++k) {
            dim3 g(grid++, 1, 1), block(128, 1, 1);
            if (op_ids) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, grid);
            if (launch(reinterpret_cast<const void*>(&profiled_job_kernel), g, block, args, 0, nullptr) != cudaSuccess) ++failed;
            if (op_ids) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr);
        }
        if (sync() != cudaSuccess) ++failed;
        if (sleep_ms) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
    }
    if (phase != Done) {
        printf("profiler: the window never closed\nPROFILER_INCOMPLETE\n");
        ++failed;
    }
    return failed ? 3 : 0;
}
