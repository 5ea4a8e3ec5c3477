// What CUPTI itself costs per kernel launch, without gtrace: the floor under the agent's
// choices (bench/README.md, "CUPTI's own cost per launch"). One process launches an empty kernel
// through the runtime (cudaLaunchKernel) and through the driver (cuLaunchKernel, as cuBLAS
// does), in rounds, each round every mode in turn:
//   none          nothing of CUPTI enabled
//   kernels       CONCURRENT_KERNEL activity records (what any CUPTI tracer pays)
//   api-records   kernels + the API records of the two launch functions only (the RUNTIME and
//                 DRIVER kinds on, every other callback id off: ids switched on alone gave none)
//   callbacks     kernels + callbacks (both sites, an empty handler) on both launch functions
//   callbacks-rt  kernels + callbacks on the runtime's cudaLaunchKernel only
// and prints the median µs per launch of each, and what CUPTI showed of the runtime launch's
// nested driver call (a callback? a record? with the runtime call's correlation id?).
//
// Build and run on a GPU host (scripts/gpu-bench.sh --cupti-cost does both):
//   nvcc -O2 -o cupti_cost bench/cupti_cost.cu -lcuda -ldl && ./cupti_cost /path/to/libcupti.so.13
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void empty_kernel() {}

namespace {

#define CC_FUNCTIONS(X)                                                                                       \
    X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiActivityEnable) X(cuptiActivityDisable) \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)                  \
    X(cuptiActivityEnableRuntimeApi) X(cuptiActivityEnableDriverApi) X(cuptiGetCallbackName)
struct Cupti {
#define CC_FN(name) decltype(&::name) name = nullptr;
    CC_FUNCTIONS(CC_FN)
#undef CC_FN
} c;

std::atomic<uint64_t> g_runtime_records{0}, g_driver_records{0}, g_kernel_records{0};
std::atomic<uint64_t> g_nested_callbacks{0}, g_nested_same_id{0};
thread_local uint32_t t_runtime_correlation = 0;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = 8 << 20;
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* r = nullptr;
    while (c.cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) ++g_runtime_records;
        else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER) ++g_driver_records;
        else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++g_kernel_records;
    }
    free(buffer);
}

// Empty but for noting a driver launch inside a runtime launch (outside the timed rounds).
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        t_runtime_correlation = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
    } else if (cb->callbackSite == CUPTI_API_ENTER && t_runtime_correlation) {
        ++g_nested_callbacks;
        g_nested_same_id += cb->correlationId == t_runtime_correlation;
    }
}

enum Mode { kNone, kKernels, kApiRecords, kCallbacks, kCallbacksRuntime, kModes };
const char* kModeNames[] = {"none", "kernels", "api-records", "callbacks", "callbacks-rt"};

CUpti_SubscriberHandle g_subscriber = nullptr;

// The RUNTIME and DRIVER kinds on, then every callback id but the two launches off.
void launch_records_only() {
    c.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    c.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    for (uint32_t id = 1; id < 2 * CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
        const char* name = nullptr;
        if (id != CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 &&
            c.cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, id, &name) == CUPTI_SUCCESS)
            c.cuptiActivityEnableRuntimeApi(id, 0);
    }
    for (uint32_t id = 1; id < 2 * CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
        const char* name = nullptr;
        if (id != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && c.cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS)
            c.cuptiActivityEnableDriverApi(id, 0);
    }
}

void set_mode(Mode m, bool on) {
    if (m == kNone) return;
    if (on) c.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (m == kApiRecords) {
        if (on) {
            launch_records_only();
        } else {
            c.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
            c.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
        }
    }
    if (m == kCallbacks || m == kCallbacksRuntime) {
        if (on) c.cuptiSubscribe(&g_subscriber, on_callback, nullptr);
        c.cuptiEnableCallback(on, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
        if (m == kCallbacks) c.cuptiEnableCallback(on, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
        if (!on) c.cuptiUnsubscribe(g_subscriber);
    }
    if (!on) {
        c.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        c.cuptiActivityFlushAll(1);
    }
}

// µs per launch over n launches, synchronizing every 64 so the queue never throttles.
double time_launches(bool driver, CUfunction f, int n) {
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        if (driver) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
        else empty_kernel<<<1, 32>>>();
        if (i % 64 == 63) cudaDeviceSynchronize();
    }
    cudaDeviceSynchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cupti_cost LIBCUPTI [LAUNCHES_PER_RUN] [ROUNDS]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 20000, rounds = argc > 3 ? atoi(argv[3]) : 7;
    void* h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cupti_cost: %s\n", dlerror());
        return 1;
    }
#define CC_RESOLVE(name) c.name = reinterpret_cast<decltype(c.name)>(dlsym(h, #name));
    CC_FUNCTIONS(CC_RESOLVE)
#undef CC_RESOLVE
    if (!c.cuptiActivityEnableRuntimeApi || !c.cuptiSubscribe) {
        fprintf(stderr, "cupti_cost: %s lacks the per-id API record functions\n", argv[1]);
        return 1;
    }
    cudaFree(nullptr);
    cudaFunction_t rf = nullptr;
    cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(empty_kernel));
    auto f = reinterpret_cast<CUfunction>(rf);
    c.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    time_launches(false, f, n); // warm up
    time_launches(true, f, n);

    // What the runtime launch's nested driver call looks like to CUPTI (untimed).
    set_mode(kCallbacks, true);
    launch_records_only();
    time_launches(false, f, 1000);
    c.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    c.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
    set_mode(kCallbacks, false);
    printf("1000 runtime launches: %llu runtime API records, %llu driver API records, %llu kernel records; "
           "%llu nested driver callbacks, %llu of them with the runtime call's correlation id\n",
           (unsigned long long)g_runtime_records.load(), (unsigned long long)g_driver_records.load(),
           (unsigned long long)g_kernel_records.load(), (unsigned long long)g_nested_callbacks.load(),
           (unsigned long long)g_nested_same_id.load());

    std::vector<double> us[2][kModes];
    for (int r = 0; r < rounds; ++r)
        for (int m = 0; m < kModes; ++m) {
            set_mode(static_cast<Mode>(m), true);
            for (int d = 0; d < 2; ++d) us[d][m].push_back(time_launches(d, f, n));
            set_mode(static_cast<Mode>(m), false);
        }
    printf("median us per launch over %d rounds of %d launches (empty kernel, sync every 64)\n", rounds, n);
    printf("%-14s %12s %8s %12s %8s\n", "mode", "cudaLaunch", "x", "cuLaunch", "x");
    for (int m = 0; m < kModes; ++m) {
        double rt = median(us[0][m]), dr = median(us[1][m]);
        printf("%-14s %12.3f %7.2fx %12.3f %7.2fx\n", kModeNames[m], rt, rt / median(us[0][kNone]), dr,
               dr / median(us[1][kNone]));
    }
    return 0;
}
