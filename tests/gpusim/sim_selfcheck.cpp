// gpusim_selfcheck: runs a small workload against the simulated libcudart with the simulated
// libcupti dlopen'ed like a profiler would, and checks the CUPTI records and callbacks against
// the workload, the duration formulas and GTSIM_LOG. Exit status 0 only if everything holds.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim_selfcheck.h"
#include "twins.h"

// The records must have the layout of the real headers this was compiled against.
static_assert(sizeof(CUpti_ActivityKernel10) == 216 && alignof(CUpti_ActivityKernel10) == 8);
static_assert(sizeof(CUpti_ActivityMemcpy6) == 96 && sizeof(CUpti_ActivityMemset4) == 88);
static_assert(sizeof(CUpti_ActivityAPI) == 40 && sizeof(CUpti_ActivitySynchronization2) == 56);
static_assert(sizeof(CUpti_ActivityMemory4) == 128 && sizeof(CUpti_CallbackData) == 72);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 == 211);

// Host stubs standing in for __global__ kernels; exported so dladdr() can name them.
namespace gpusim_selfcheck {
__attribute__((noinline, visibility("default"))) void kernel_a(float* p, int n) {
    for (int i = 0; i < n; ++i) p[i] += 1;
}
__attribute__((noinline, visibility("default"))) void kernel_b(double* p, int n) {
    for (int i = 0; i < n; ++i) p[i] *= 2;
}
} // namespace gpusim_selfcheck

using namespace selfcheck;

namespace {

const char* kNameA = "_ZN16gpusim_selfcheck8kernel_aEPfi";
const char* kNameB = "_ZN16gpusim_selfcheck8kernel_bEPdi";

std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string s(buf);
    return s.substr(0, s.rfind('/'));
}

uint64_t now() {
    uint64_t t = 0;
    cupti.GetTimestamp(&t);
    return t;
}

// Phase 1: the main workload with every record kind, checked record by record.
void main_workload(std::vector<Launch>& launches, uint32_t& sync_corr_memcpy) {
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
    uint32_t id1 = 0, id2 = 0, legacy = 0, ptds = 0;
    CHECK(cupti.GetStreamIdEx(nullptr, s1, 0, &id1) == CUPTI_SUCCESS && id1 == 13);
    CHECK(cupti.GetStreamIdEx(nullptr, s2, 0, &id2) == CUPTI_SUCCESS && id2 == 14);
    CHECK(cupti.GetStreamIdEx(nullptr, nullptr, 0, &legacy) == CUPTI_SUCCESS && legacy == 7);
    CHECK(cupti.GetStreamIdEx(nullptr, nullptr, 1, &ptds) == CUPTI_SUCCESS && ptds != 7 && ptds > id2);

    void *d_a = nullptr, *d_b = nullptr, *pinned = nullptr;
    CHECK(cudaMalloc(&d_a, 1 << 20) == cudaSuccess && reinterpret_cast<uintptr_t>(d_a) == 0x7e0000000000ULL);
    CHECK(cudaMalloc(&d_b, 1000) == cudaSuccess && reinterpret_cast<uintptr_t>(d_b) % 512 == 0);
    CHECK(cudaMallocHost(&pinned, 1 << 20) == cudaSuccess && pinned);
    memset(pinned, 0, 1 << 20); // real host memory
    std::vector<char> pageable(1 << 16);

    CHECK(cudaMemcpyAsync(d_a, pinned, 1 << 20, cudaMemcpyHostToDevice, s1) == cudaSuccess);
    for (unsigned i = 0; i < 20; ++i) {
        dim3 grid(i + 1, 1 + i % 3, 1 + i % 2), block(128, 1, 1);
        cudaStream_t s = i % 2 ? s2 : s1;
        float* arg0 = nullptr;
        int arg1 = 0;
        void* args[] = {&arg0, &arg1};
        if (i % 5 == 4) {
            cudaLaunchConfig_t cfg{};
            cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = 64, cfg.stream = s;
            CHECK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_b), args) ==
                  cudaSuccess);
            launches.push_back({grid, i % 2 ? id2 : id1, kNameB});
        } else {
            CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_a), grid, block, args,
                                   i * 16, s) == cudaSuccess);
            launches.push_back({grid, i % 2 ? id2 : id1, kNameA});
        }
    }
    // Per-thread default stream (handle 0 under the _ptsz twin).
    CHECK(cudaLaunchKernel_ptsz(reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_a), dim3(3), dim3(32), nullptr,
                                0, nullptr) == cudaSuccess);
    launches.push_back({dim3(3), ptds, kNameA});
    CHECK(cudaMemsetAsync(d_b, 0, 1000, s2) == cudaSuccess);
    CHECK(cudaMemcpyAsync(pageable.data(), d_a, pageable.size(), cudaMemcpyDeviceToHost, s1) == cudaSuccess);
    CHECK(cudaMemcpyAsync(d_b, d_a, 1000, cudaMemcpyDefault, s2) == cudaSuccess); // DtoD from the pointers

    // Synchronous copy on the legacy stream: waits for s1 (blocking), returns after it ends.
    CHECK(cudaMemcpy(d_a, pageable.data(), 4096, cudaMemcpyHostToDevice) == cudaSuccess);
    uint64_t after_memcpy = now();
    {
        std::lock_guard lk(calls().mu);
        sync_corr_memcpy = calls().by_corr.rbegin()->first;
    }
    CHECK(cudaMemset(d_a, 1, 8192) == cudaSuccess);

    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev) == cudaSuccess);
    CHECK(cudaEventRecord(ev, s2) == cudaSuccess);
    CHECK(cudaEventSynchronize(ev) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s1) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    uint64_t after_sync = now();

    // Error paths set the thread's last error.
    CHECK(cudaFree(reinterpret_cast<void*>(0x1234)) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess);
    CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_a), dim3(0), dim3(1), nullptr, 0,
                           s1) == cudaErrorInvalidConfiguration);
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration && cudaGetLastError() != cudaSuccess);
    CHECK(cudaGraphLaunch(nullptr, s1) == cudaErrorInvalidValue);
    CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0);
    CHECK(cudaMemcpyAsync(d_a, pinned, 8, cudaMemcpyHostToDevice, reinterpret_cast<cudaStream_t>(0x5000)) ==
          cudaErrorInvalidResourceHandle);

    CHECK(cudaEventDestroy(ev) == cudaSuccess);
    CHECK(cudaStreamDestroy(s1) == cudaSuccess && cudaStreamDestroy(s2) == cudaSuccess);
    CHECK(cudaFree(d_a) == cudaSuccess && cudaFree(d_b) == cudaSuccess && cudaFreeHost(pinned) == cudaSuccess);
    CHECK(cupti.ActivityFlushAll(0) == CUPTI_SUCCESS);

    // Host blocking: nothing issued before the synchronizing calls may end after they return.
    Collected& c = collected();
    std::lock_guard lk(c.mu);
    for (auto& m : c.memcpys)
        if (m.correlationId == sync_corr_memcpy) CHECK(m.end <= after_memcpy);
    uint64_t last_end = 0;
    for (auto& k : c.kernels) last_end = std::max<uint64_t>(last_end, k.end);
    CHECK(last_end > 0 && last_end <= after_sync);
}

void concurrent_workload() {
    constexpr int kThreads = 6, kLaunches = 150;
    std::atomic<bool> done{false};
    std::thread flusher([&] {
        while (!done.load()) {
            cupti.ActivityFlushAll(0);
            usleep(500);
        }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t)
        workers.emplace_back([t] {
            cudaStream_t s;
            CHECK(cudaStreamCreate(&s) == cudaSuccess);
            void* d = nullptr;
            CHECK(cudaMalloc(&d, 4096) == cudaSuccess);
            for (int i = 0; i < kLaunches; ++i) {
                auto k = reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_a);
                CHECK(cudaLaunchKernel_ptsz(k, dim3(1 + i % 7), dim3(64), nullptr, 0, nullptr) == cudaSuccess);
                CHECK(cudaLaunchKernel(k, dim3(1 + t), dim3(64), nullptr, 0, s) == cudaSuccess);
                if (i % 10 == 0) CHECK(cudaMemcpyAsync(d, d, 64, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
            }
            CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaStreamSynchronize_ptsz(nullptr) == cudaSuccess);
            CHECK(cudaFree(d) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess);
        });
    for (auto& w : workers) w.join();
    done = true;
    flusher.join();
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    size_t dropped = 1;
    CHECK(cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped == 0);
    Collected& c = collected();
    std::lock_guard lk(c.mu);
    std::set<uint32_t> corr;
    for (auto& k : c.kernels) corr.insert(k.correlationId);
    CHECK(c.kernels.size() == size_t(2 * kThreads * kLaunches) && corr.size() == c.kernels.size());
    CHECK(c.memcpys.size() == size_t(kThreads * kLaunches / 10) && c.bad_records == 0);
    // Per stream, FIFO and no overlap, whichever thread's buffer the record landed in.
    std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> by_stream;
    for (auto& k : c.kernels) by_stream[k.streamId].push_back({uint64_t(k.start), uint64_t(k.end)});
    for (auto& m : c.memcpys) by_stream[m.streamId].push_back({uint64_t(m.start), uint64_t(m.end)});
    CHECK(by_stream.size() == size_t(2 * kThreads));
    for (auto& [id, v] : by_stream) {
        std::sort(v.begin(), v.end());
        for (size_t i = 1; i < v.size(); ++i) CHECK(v[i].first >= v[i - 1].second);
    }
    printf("phase 4: %zu kernels and %zu memcpys from %d threads in %zu buffers\n", c.kernels.size(),
           c.memcpys.size(), kThreads, c.buffers);
}

} // namespace

int main() {
    std::string dir = exe_dir();
    // Before the first CUDA call: the simulator reads its environment then.
    std::string log_path;
    bool own_log = false;
    if (const char* l = getenv("GTSIM_LOG")) {
        log_path = l;
    } else {
        own_log = true;
        char tmpl[] = "/tmp/gpusim-selfcheck-XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd >= 0) close(fd);
        log_path = tmpl;
        setenv("GTSIM_LOG", tmpl, 1);
    }
    std::string probe = dir + "/libgpusim_inject_probe.so";
    setenv("CUDA_INJECTION64_PATH", probe.c_str(), 0);

    if (!load_cupti(dir + "/libcupti.so.13")) return 2;
    uint32_t version = 0;
    CHECK(cupti.GetVersion(&version) == CUPTI_SUCCESS && version == CUPTI_API_VERSION);
    CHECK(cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    CUpti_SubscriberHandle sub = nullptr, other = nullptr;
    CHECK(cupti.Subscribe(&sub, on_callback, nullptr) == CUPTI_SUCCESS);
    CHECK(cupti.Subscribe(&other, on_callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(cupti.EnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS);
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                 CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY2})
        CHECK(cupti.ActivityEnable(k) == CUPTI_SUCCESS);
    CHECK(cupti.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS);

    // The first runtime call runs the injection (once), which itself calls cudart.
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n >= 1);
    void* ph = dlopen(probe.c_str(), RTLD_NOW | RTLD_NOLOAD);
    int* probe_calls = ph ? static_cast<int*>(dlsym(ph, "gtsim_probe_calls")) : nullptr;
    int* probe_devices = ph ? static_cast<int*>(dlsym(ph, "gtsim_probe_devices")) : nullptr;
    CHECK(probe_calls && *probe_calls == 1 && probe_devices && *probe_devices == n);
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && probe_calls && *probe_calls == 1);

    std::vector<Launch> launches;
    uint32_t sync_corr = 0;
    main_workload(launches, sync_corr);
    check_phase1(launches, sync_corr, log_path);

    // Phase 2: no buffer from the client, or one too small: records are dropped and counted.
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);
    size_t dropped = 0;
    cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped); // reset
    collected().clear();
    CHECK(cupti.ActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS);
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess); // enabled, no callbacks registered
    CHECK(cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped == 1);
    g_buffer_mode = BufferMode::Null;
    CHECK(cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess);
    g_buffer_mode = BufferMode::Tiny;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess);
    CHECK(cupti.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped == 2);
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    {
        std::lock_guard lk(collected().mu);
        CHECK(collected().empty_buffers == 1 && collected().apis.empty()); // the tiny buffer came back
    }

    // Phase 3: re-attach after cuptiFinalize; the worker delivers without any flush.
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);
    collected().clear();
    g_buffer_mode = BufferMode::Normal;
    setenv("GTSIM_CUPTI_FOREIGN_SUBSCRIBER", "1", 1);
    CHECK(cupti.Subscribe(&sub, on_callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    unsetenv("GTSIM_CUPTI_FOREIGN_SUBSCRIBER");
    CHECK(cupti.Subscribe(&sub, on_callback, nullptr) == CUPTI_SUCCESS);
    CHECK(cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    CHECK(cupti.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_b), dim3(5), dim3(64), nullptr, 0,
                           nullptr) == cudaSuccess);
    size_t delivered = 0;
    for (int i = 0; i < 100 && !delivered; ++i) {
        usleep(20000);
        std::lock_guard lk(collected().mu);
        delivered = collected().kernels.size();
        if (delivered) CHECK(collected().completing_threads.back() != std::this_thread::get_id());
    }
    CHECK(delivered == 1);

    // Phase 4: threads launching on their own streams while another thread flushes.
    collected().clear();
    CHECK(cupti.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS);
    concurrent_workload();

    // Garbage in a buffer is reported, not walked.
    alignas(8) uint8_t junk[64];
    memset(junk, 0xff, sizeof junk);
    CUpti_Activity* rec = nullptr;
    CHECK(cupti.ActivityGetNextRecord(junk, sizeof junk, &rec) == CUPTI_ERROR_INVALID_KIND);
    rec = nullptr;
    CHECK(cupti.ActivityGetNextRecord(junk, 0, &rec) == CUPTI_ERROR_MAX_LIMIT_REACHED);
    CHECK(cupti.Unsubscribe(sub) == CUPTI_SUCCESS);
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);

    // Phases 5 and 6: every path through the runtime, the driver and the blas library; graphs.
    paths_phase(log_path);
    graphs_phase(log_path);
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);

    if (failures()) {
        printf("gpusim_selfcheck: FAILED %d of %d checks (log %s)\n", failures(), g_checks.load(), log_path.c_str());
        return 1;
    }
    printf("gpusim_selfcheck: OK, %d checks passed\n", g_checks.load());
    if (own_log) unlink(log_path.c_str()); // kept on failure, for a look
    return 0;
}
