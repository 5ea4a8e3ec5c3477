// gpusim_selfcheck phase 5: every launch, copy and set path of the workload table, checked against
// the correlation rules of CUPTI_CORRELATION.md: a runtime call and the driver call the runtime
// makes inside it share one id, with driver callbacks but no DRIVER record for the inner call; a
// driver call made by the application or a library has an id, callbacks and a DRIVER record of its
// own; every GPU op carries the id of the outermost call, in CUPTI and in GTSIM_LOG.
#include <thread>

#include "sim_selfcheck_expect.h"

namespace selfcheck {
namespace {

using gtsim_workload::Context;

// A C++ thread: no context until the runtime makes one current (or the thread sets it).
void thread_paths(CUfunction f) {
    void* args[] = {nullptr};
    const void* stub = reinterpret_cast<const void*>(&gtsim_workload::paths_kernel);
    std::thread t([&] {
        expect({CallExpect{CUPTI_CB_DOMAIN_DRIVER_API, "cuLaunchKernel", nullptr, {}}}, [&] {
            CHECK(cuLaunchKernel(f, 301, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_ERROR_INVALID_CONTEXT);
        });
        expect({CallExpect{CUPTI_CB_DOMAIN_RUNTIME_API, "cudaLaunchKernel", "cuLaunchKernel",
                           {OpExpect{"kernel", 0, gtsim_workload::kStubName, 302}}}},
               [&] { CHECK(cudaLaunchKernel(stub, dim3(302), dim3(32), args, 0, nullptr) == cudaSuccess); });
        expect({CallExpect{CUPTI_CB_DOMAIN_DRIVER_API, "cuLaunchKernel", nullptr,
                           {OpExpect{"kernel", 0, gtsim_workload::kDriverKernel, 303}}}},
               [&] { CHECK(cuLaunchKernel(f, 303, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS); });
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    });
    t.join();
}

} // namespace

void start_full_tracing() {
    CUpti_SubscriberHandle sub = nullptr;
    CHECK(cupti.Subscribe(&sub, on_callback, nullptr) == CUPTI_SUCCESS);
    CHECK(cupti.EnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS);
    CHECK(cupti.EnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    CHECK(cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER})
        CHECK(cupti.ActivityEnable(k) == CUPTI_SUCCESS);
    CHECK(cupti.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS);
}

void paths_phase(const std::string& log_path) {
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);
    collected().clear();
    start_full_tracing();
    Context c;
    CHECK(gtsim_workload::make_context(c) == 0);
    CUfunction missing = nullptr;
    CHECK(cuModuleGetFunction(&missing, c.module, "missing") == CUDA_ERROR_NOT_FOUND && !missing);
    clear_expectations();
    size_t expected = 0;
    for (const gtsim_workload::Path& p : gtsim_workload::paths()) {
        expect(p.calls, [&] { CHECK(p.run(c) == 0); });
        expected += p.calls.size();
    }
    thread_paths(c.function);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    size_t calls = check_expectations(log_path);
    CHECK(calls == expected + 3 && expected == 23 + 7 + 26 + 24 + 7);
    gtsim_workload::free_context(c);
    printf("phase 5: %zu calls on every path joined to their %zu kernels, %zu memcpys, %zu memsets\n", calls,
           collected().kernels.size(), collected().memcpys.size(), collected().memsets.size());
}

} // namespace selfcheck
