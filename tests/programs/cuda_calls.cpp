// Test program: makes a known number of calls to every probed CUDA runtime and driver API
// (real libcudart, stub libcuda: calls fail fast, the probes still fire) and prints the counts.
//
//   cuda_calls [--iterations N] [--warmup-until FILE] [--warmup-pace-us US] [--go-file FILE] [--threads T]
//
// With --warmup-until, a thread named "warmup" calls the API in a loop (uncounted) until FILE
// exists, so gtrace can attach in the middle of a run, while threads named "counted-N" make
// the counted calls. Each round of the loop (36 calls) is followed by a US µs pause (default
// 500: ~70,000 calls a second, traces of a few MiB a second); 0 runs flat out (half a million
// calls a second and more: what tests of a saturated capture want). --go-file waits (without calls) for FILE before the counted calls.
// Output: "ready <pid>" once started, then "GTRACE_COUNTS {json}" with the counted calls.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "call_counter.h"

extern "C" {
// Per-thread-default-stream twins; the headers only expose them through macros.
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemsetAsync_ptsz(void*, int, size_t, cudaStream_t);
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemset_ptds(void*, int, size_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
}

namespace gtrace_test {
// Host stubs standing in for __global__ kernels: gtrace names kernels by these symbols.
__attribute__((noinline)) void vector_add(float* a, const float* b, int n) {
    for (int i = 0; i < n; ++i) a[i] += b[i];
}
__attribute__((noinline)) void scale_rows(float* a, float s, int n) {
    for (int i = 0; i < n; ++i) a[i] *= s;
}
} // namespace gtrace_test

namespace {

bool file_exists(const char* path) {
    struct stat st;
    return path && stat(path, &st) == 0;
}

void one_round(CallCounter& c, unsigned iteration) {
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x5000 + iteration % 4);
    float host[64] = {};
    void* dev = reinterpret_cast<void*>(0x7f0000000000ull);
    dim3 grid(iteration + 1, 2, 3), block(128, 1, 1);
    void* kargs[1] = {nullptr};

    c.count("cudaLaunchKernel", cudaLaunchKernel(reinterpret_cast<const void*>(&gtrace_test::vector_add), grid, block,
                                                 kargs, 256, stream));
    c.count("cudaLaunchKernel_ptsz", cudaLaunchKernel_ptsz(reinterpret_cast<const void*>(&gtrace_test::scale_rows),
                                                           grid, block, kargs, 0, stream));
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(iteration + 1, 4, 1);
    cfg.blockDim = dim3(64, 2, 1);
    cfg.dynamicSmemBytes = 1024;
    cfg.stream = stream;
    c.count("cudaLaunchKernelExC",
            cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(&gtrace_test::vector_add), kargs));
    c.count("cudaLaunchKernelExC_ptsz",
            cudaLaunchKernelExC_ptsz(&cfg, reinterpret_cast<const void*>(&gtrace_test::scale_rows), kargs));
    c.count("cudaMemcpy", cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
    c.count("cudaMemcpy_ptds", cudaMemcpy_ptds(host, dev, sizeof host, cudaMemcpyDeviceToHost));
    c.count("cudaMemcpyAsync", cudaMemcpyAsync(dev, host, 4096, cudaMemcpyHostToDevice, stream));
    c.count("cudaMemcpyAsync_ptsz", cudaMemcpyAsync_ptsz(host, dev, 2048, cudaMemcpyDeviceToHost, stream));
    c.count("cudaMemset", cudaMemset(dev, 0, 1000));
    c.count("cudaMemset_ptds", cudaMemset_ptds(dev, 0, 1001));
    c.count("cudaMemsetAsync", cudaMemsetAsync(dev, 0, 1002, stream));
    c.count("cudaMemsetAsync_ptsz", cudaMemsetAsync_ptsz(dev, 0, 1003, stream));
    void* ptr = nullptr;
    c.count("cudaMalloc", cudaMalloc(&ptr, 1 << 20));
    c.count("cudaFree", cudaFree(ptr));
    c.count("cudaStreamSynchronize", cudaStreamSynchronize(stream));
    c.count("cudaStreamSynchronize_ptsz", cudaStreamSynchronize_ptsz(stream));
    c.count("cudaDeviceSynchronize", cudaDeviceSynchronize());
    c.count("cudaEventSynchronize", cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(0x6000)));
    c.count("cudaGraphLaunch", cudaGraphLaunch(reinterpret_cast<cudaGraphExec_t>(0x7000), stream));
    c.count("cudaGraphLaunch_ptsz", cudaGraphLaunch_ptsz(reinterpret_cast<cudaGraphExec_t>(0x7000), stream));

    CUfunction f = reinterpret_cast<CUfunction>(0x8000 + iteration);
    c.count("cuLaunchKernel", cuLaunchKernel(f, iteration + 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
    c.count("cuLaunchKernel_ptsz", cuLaunchKernel_ptsz(f, iteration + 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
    CUlaunchConfig dcfg{};
    dcfg.gridDimX = iteration + 1;
    dcfg.gridDimY = dcfg.gridDimZ = 1;
    dcfg.blockDimX = 256;
    dcfg.blockDimY = dcfg.blockDimZ = 1;
    c.count("cuLaunchKernelEx", cuLaunchKernelEx(&dcfg, f, nullptr, nullptr));
    CUfunction looked_up = nullptr;
    c.count("cuModuleGetFunction",
            cuModuleGetFunction(&looked_up, reinterpret_cast<CUmodule>(0x9000), "_Z10vector_addPfPKfi"));
}

} // namespace

int main(int argc, char** argv) {
    unsigned iterations = 10, threads = 1;
    const char* warmup_until = nullptr;
    unsigned warmup_pace_us = 500;
    const char* go_file = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--iterations") iterations = static_cast<unsigned>(atoi(argv[i + 1]));
        else if (a == "--warmup-until") warmup_until = argv[i + 1];
        else if (a == "--warmup-pace-us") warmup_pace_us = static_cast<unsigned>(atoi(argv[i + 1]));
        else if (a == "--go-file") go_file = argv[i + 1];
        else if (a == "--threads") threads = static_cast<unsigned>(atoi(argv[i + 1]));
    }
    printf("ready %d\n", getpid());
    fflush(stdout);

    std::atomic<bool> warm{warmup_until != nullptr};
    std::thread warmup_thread([&] {
        pthread_setname_np(pthread_self(), "warmup");
        CallCounter uncounted;
        while (warm && !file_exists(warmup_until)) {
            one_round(uncounted, 0);
            if (warmup_pace_us) usleep(warmup_pace_us);
        }
        warm = false;
    });
    while (warm) usleep(1000);
    warmup_thread.join();
    while (go_file && !file_exists(go_file)) usleep(10000);

    CallCounter counted;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&counted, iterations, t] {
            pthread_setname_np(pthread_self(), ("counted-" + std::to_string(t)).c_str());
            for (unsigned i = 0; i < iterations; ++i) one_round(counted, t * iterations + i);
        });
    for (auto& th : pool) th.join();
    counted.print();
    return 0;
}
