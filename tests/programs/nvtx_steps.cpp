// Test program for NVTX ranges, built against the CUDA toolkit's header-only NVTX v3
// (nvtx3/nvToolsExt.h) and run on the GPU simulator (tests/gpusim), so gtrace gives it an agent.
// Each step of the main thread:
//   domain "gtrace_test": "train_step" (payload: the step number, category 7), and inside it,
//   default domain: "forward" (a kernel launch) then "backward" (a kernel launch and a sync);
// a second thread ("nvtx_worker") pushes "worker_step" once per step and starts an "io" range
// (nvtxRangeStartA) that the main thread ends (start/end ranges may end on another thread).
//
//   nvtx_steps [--steps N | --until-file F] [--step-sleep-ms M] [--nvtx-after F]
//
// Prints "ready <pid>" once the first step is done (NVTX initialized, without a tool unless
// gtrace record made the agent its injection) and "GTRACE_NVTX {json}" with the counts at the end.
// --nvtx-after F: "ready" comes before any NVTX call, which waits until F exists (a module whose
// NVTX is not initialized yet when gtrace attaches).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

extern "C" __attribute__((noinline, used)) void nvtx_steps_kernel(float*, int) {}

namespace {

struct Cuda {
    decltype(&cudaLaunchKernel) launch = nullptr;
    decltype(&cudaDeviceSynchronize) sync = nullptr;
};

Cuda load_cuda() {
    void* h = dlopen("libcudart.so.13", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "nvtx_steps: %s\n", dlerror());
        exit(2);
    }
    Cuda c;
    c.launch = reinterpret_cast<decltype(c.launch)>(dlsym(h, "cudaLaunchKernel"));
    c.sync = reinterpret_cast<decltype(c.sync)>(dlsym(h, "cudaDeviceSynchronize"));
    if (!c.launch || !c.sync) {
        fprintf(stderr, "nvtx_steps: libcudart lacks a function\n");
        exit(2);
    }
    return c;
}

bool exists(const char* f) {
    struct stat st;
    return f && stat(f, &st) == 0;
}

void launch(const Cuda& c) {
    float* arg0 = nullptr;
    int arg1 = 1;
    void* args[] = {&arg0, &arg1};
    c.launch(reinterpret_cast<const void*>(nvtx_steps_kernel), dim3(1), dim3(32), args, 0, nullptr);
}

} // namespace

int main(int argc, char** argv) {
    long steps = 20, sleep_ms = 5;
    const char* until = nullptr;
    const char* nvtx_after = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--until-file")) until = argv[i + 1], steps = -1;
        else if (!strcmp(argv[i], "--step-sleep-ms")) sleep_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--nvtx-after")) nvtx_after = argv[i + 1];
        else {
            fprintf(stderr, "usage: nvtx_steps [--steps N | --until-file F] [--step-sleep-ms M] [--nvtx-after F]\n");
            return 2;
        }
    }
    Cuda cuda = load_cuda();
    if (nvtx_after) {
        printf("ready %d\n", getpid());
        fflush(stdout);
        while (!exists(nvtx_after)) usleep(2000);
    }
    nvtxDomainHandle_t domain = nvtxDomainCreateA("gtrace_test");
    std::atomic<long> step_begun{0}, worker_done{0};
    std::atomic<nvtxRangeId_t> io{0};
    std::atomic<bool> stop{false};
    std::thread worker([&] {
        pthread_setname_np(pthread_self(), "nvtx_worker");
        for (long seen = 0; !stop.load();) {
            long now = step_begun.load();
            if (now == seen) {
                usleep(200);
                continue;
            }
            seen = now;
            nvtxRangePushA("worker_step");
            io.store(nvtxRangeStartA("io"));
            usleep(1000);
            nvtxRangePop();
            worker_done.store(seen);
        }
    });
    long done = 0;
    for (long step = 0; steps < 0 ? !exists(until) : step < steps; ++step) {
        nvtxEventAttributes_t a{};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.category = 7;
        a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        a.payload.llValue = step;
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "train_step";
        nvtxDomainRangePushEx(domain, &a);
        step_begun.store(step + 1);
        nvtxRangePushA("forward");
        launch(cuda);
        usleep(static_cast<useconds_t>(sleep_ms * 1000));
        nvtxRangePop();
        nvtxRangePushA("backward");
        launch(cuda);
        cuda.sync();
        while (worker_done.load() != step + 1) usleep(100);
        nvtxRangeEnd(io.load());
        nvtxRangePop();
        nvtxDomainRangePop(domain);
        if (++done == 1 && !nvtx_after) {
            printf("ready %d\n", getpid());
            fflush(stdout);
        }
    }
    stop.store(true);
    worker.join();
    printf("GTRACE_NVTX {\"steps\": %ld}\n", done);
    return 0;
}
