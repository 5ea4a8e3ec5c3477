// The simulator's model of CUPTI 13.3's multi-subscriber mode, checked rule by rule (the rules:
// include/gtrace/cupti_multi_subscriber.h, tests/gpusim/README.md): the state attribute, the
// unversioned API refused in the mode, a subscriber asking otherwise refused, each subscriber's
// records of its own kinds only, and cuptiFinalize returning early while two are subscribed.
// Links the simulator's libcudart and libcupti; GTSIM_CUPTI_MULTI_SUBSCRIBER=1 set by main.
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "gtrace/cupti_multi_subscriber.h"

extern "C" __attribute__((noinline, used)) void multi_check_kernel() {}

namespace {

int g_failures = 0;
#define EXPECT(cond)                                                        \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            ++g_failures;                                                   \
        }                                                                   \
    } while (0)

std::mutex g_mu;
std::map<uint8_t*, int> g_owner;          // buffer -> subscriber 0 or 1
std::map<int, std::map<int, int>> g_seen; // subscriber -> kind -> records

template <int Who>
void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max, CUpti_BufferCallbackRequestInfo*) {
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, 1 << 16));
    *size = 1 << 16, *max = 0;
    std::lock_guard lk(g_mu);
    g_owner[*buffer] = Who;
}

template <int Who>
void CUPTIAPI completed(uint8_t* buffer, size_t, size_t valid, CUpti_BufferCallbackCompleteInfo* info) {
    std::lock_guard lk(g_mu);
    EXPECT(info && info->structSize >= sizeof(size_t));
    EXPECT(g_owner[buffer] == Who); // its own buffers only
    CUpti_Activity* r = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) ++g_seen[Who][r->kind];
    free(buffer);
}

uint8_t state() {
    uint8_t v = 99;
    size_t size = 1;
    auto attr = static_cast<CUpti_ActivityAttribute>(gtrace::cupti_v2::kAttrMultipleSubscriberState);
    EXPECT(cuptiActivityGetAttribute_v2(nullptr, attr, &size, &v) == CUPTI_SUCCESS);
    return v;
}

CUptiResult subscribe(CUpti_SubscriberHandle* h, uint8_t multiple) {
    gtrace::cupti_v2::SubscriberParams p;
    p.allowMultipleSubscribers = multiple;
    return cuptiSubscribe_v2(h, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr,
                             reinterpret_cast<CUpti_SubscriberParams*>(&p));
}

} // namespace

int main() {
    setenv("GTSIM_CUPTI_MULTI_SUBSCRIBER", "1", 1);
    EXPECT(state() == gtrace::cupti_v2::kNotSet);
    CUpti_SubscriberHandle a = nullptr, b = nullptr, c = nullptr;
    EXPECT(subscribe(&a, 1) == CUPTI_SUCCESS);
    EXPECT(state() == gtrace::cupti_v2::kMultiple);
    EXPECT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    EXPECT(cuptiSubscribe(&c, nullptr, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    EXPECT(subscribe(&b, 1) == CUPTI_SUCCESS);
    EXPECT(subscribe(&c, 0) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); // the first chose
    EXPECT(cuptiActivityRegisterCallbacks_v2(a, requested<0>, completed<0>) == CUPTI_SUCCESS);
    EXPECT(cuptiActivityRegisterCallbacks_v2(b, requested<1>, completed<1>) == CUPTI_SUCCESS);
    EXPECT(cuptiActivityEnable_v2(a, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr) == CUPTI_SUCCESS);
    EXPECT(cuptiActivityEnable_v2(b, CUPTI_ACTIVITY_KIND_MEMCPY, nullptr) == CUPTI_SUCCESS);
    EXPECT(cuptiActivityEnable_v2(b, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr) == CUPTI_SUCCESS);
    void* dev = nullptr;
    char host[256] = {};
    EXPECT(cudaMalloc(&dev, sizeof host) == cudaSuccess);
    EXPECT(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(&multi_check_kernel), dim3(1), dim3(1), nullptr, 0, nullptr) == cudaSuccess);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(cuptiActivityDisable_v2(b, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr) == CUPTI_SUCCESS);
    EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(&multi_check_kernel), dim3(1), dim3(1), nullptr, 0, nullptr) == cudaSuccess);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    {
        std::lock_guard lk(g_mu);
        EXPECT(g_seen[0][CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == 2 && g_seen[0][CUPTI_ACTIVITY_KIND_MEMCPY] == 0);
        EXPECT(g_seen[1][CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == 1 && g_seen[1][CUPTI_ACTIVITY_KIND_MEMCPY] == 1);
    }
    EXPECT(cuptiFinalize() == CUPTI_SUCCESS); // two subscribed: returns early
    EXPECT(cuptiActivityEnable_v2(b, CUPTI_ACTIVITY_KIND_MEMSET, nullptr) == CUPTI_SUCCESS); // b still subscribed
    EXPECT(cuptiUnsubscribe(b) == CUPTI_SUCCESS);
    EXPECT(cuptiActivityEnable_v2(b, CUPTI_ACTIVITY_KIND_MEMSET, nullptr) == CUPTI_ERROR_INVALID_PARAMETER);
    printf(g_failures ? "FAILED: %d\n" : "PASS\n", g_failures);
    return g_failures ? 1 : 0;
}
