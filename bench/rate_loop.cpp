// Benchmark target for bench/capture_rate.py: offers CUDA work at a set pace, for a set time, on
// the GPU simulator (LD_LIBRARY_PATH=build/gpusim) or any libcudart.
//   rate_loop --seconds S --rate R [--threads T] [--graph K] [--go-file F]
// Each thread makes R calls a second (paced every millisecond, never catching up more than one
// tick): cudaLaunchKernel, or with --graph K, cudaGraphLaunch of a graph of K kernels captured
// once (each replay is one call and K GPU ops). Prints "ready <pid>", waits for F, then
// "offered calls=N gpu_ops=M seconds=S behind_ticks=B" (B: ticks a thread could not keep up in).
#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

__attribute__((noinline)) void rate_kernel_stub(float*, int) {}

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    double seconds = 5, rate = 100000;
    int threads = 1, graph = 0;
    const char* go = nullptr;
};

std::atomic<long> g_calls{0}, g_behind{0};

cudaError_t launch(cudaStream_t stream) {
    void* args[1] = {nullptr};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&rate_kernel_stub), dim3(1), dim3(32), args, 0, stream);
}

// A graph of `nodes` kernels, captured on a stream of the thread's own.
cudaGraphExec_t capture_graph(cudaStream_t stream, int nodes) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return nullptr;
    for (int i = 0; i < nodes; ++i) launch(stream);
    if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) return nullptr;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return nullptr;
    return exec;
}

void offer(const Options& o, Clock::time_point start) {
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaGraphExec_t exec = o.graph > 0 ? capture_graph(stream, o.graph) : nullptr;
    const double per_tick = o.rate / 1000.0;
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    double owed = 0;
    long calls = 0, behind = 0;
    auto tick = start;
    while (tick < end) {
        owed += per_tick;
        for (; owed >= 1; owed -= 1, ++calls) {
            if (exec) cudaGraphLaunch(exec, stream);
            else launch(stream);
        }
        tick += std::chrono::milliseconds(1);
        auto now = Clock::now();
        if (now > tick + std::chrono::milliseconds(1)) {
            ++behind;
            tick = now; // the offer falls short instead of bursting to catch up
        } else {
            std::this_thread::sleep_until(tick);
        }
    }
    cudaStreamSynchronize(stream);
    g_calls += calls;
    g_behind += behind;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--seconds") o.seconds = atof(argv[i + 1]);
        else if (a == "--rate") o.rate = atof(argv[i + 1]);
        else if (a == "--threads") o.threads = atoi(argv[i + 1]);
        else if (a == "--graph") o.graph = atoi(argv[i + 1]);
        else if (a == "--go-file") o.go = argv[i + 1];
        else {
            fprintf(stderr, "rate_loop: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    cudaFree(nullptr); // the context (and the agent's hooks) before "ready"
    printf("ready %d\n", getpid());
    fflush(stdout);
    struct stat st;
    while (o.go && stat(o.go, &st) != 0) usleep(2000);
    auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t) threads.emplace_back(offer, std::cref(o), start);
    for (auto& t : threads) t.join();
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    long calls = g_calls.load();
    printf("offered calls=%ld gpu_ops=%ld seconds=%.3f behind_ticks=%ld\n", calls, calls * (o.graph > 0 ? o.graph : 1), s,
           g_behind.load());
    return 0;
}
