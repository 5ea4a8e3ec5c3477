// Test program for the GPU side, run against the GPU simulator (tests/gpusim): "training steps"
// of a host-to-device copy, kernels with a grid unique to each launch, a device-to-host copy and
// a synchronize, so a test can match every kernel in a trace to the very launch that issued it.
//
//   gpu_steps [--steps N] [--kernels K] [--bytes B] [--threads T] [--go-file F] [--load-after F]
//             [--fork-after-init] [--busy-threads T] [--step-sleep-ms M] [--until-file F]
//             [--hold-bytes H] [--step-alloc-bytes A --step-alloc-after F]
//
// --hold-bytes H allocates H bytes of device memory at start, kept to the end, and prints
// "held H" (the memory in use before a tracer attaches). --step-alloc-bytes A makes every step,
// once F exists, allocate A more bytes and free them before the next step.
// libcudart is loaded with dlopen: --load-after F loads it only once F exists (CUDA loaded
// after gtrace attached). --busy-threads T adds threads that compute, sleep and pass bytes
// through a pipe (blocking system calls that an injection must restart correctly) and print a
// checksum that does not depend on timing. Prints "ready <pid>" at start and
// "GTRACE_GPU {json}" with the counts at the end.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" __attribute__((noinline, used)) void gpu_steps_kernel(float*, int) {}

namespace {

struct Cuda {
    decltype(&cudaMalloc) malloc_ = nullptr;
    decltype(&cudaFree) free_ = nullptr;
    decltype(&cudaMemcpyAsync) memcpy_async = nullptr;
    decltype(&cudaLaunchKernel) launch = nullptr;
    decltype(&cudaStreamSynchronize) sync = nullptr;
    decltype(&cudaStreamCreate) stream_create = nullptr;
};

bool exists(const std::string& f) {
    struct stat st;
    return !f.empty() && stat(f.c_str(), &st) == 0;
}

void wait_for(const std::string& f) {
    while (!f.empty() && !exists(f)) usleep(2000);
}

Cuda load_cuda() {
    void* h = dlopen("libcudart.so.13", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "gpu_steps: %s\n", dlerror());
        exit(2);
    }
    Cuda c;
    c.malloc_ = reinterpret_cast<decltype(c.malloc_)>(dlsym(h, "cudaMalloc"));
    c.free_ = reinterpret_cast<decltype(c.free_)>(dlsym(h, "cudaFree"));
    c.memcpy_async = reinterpret_cast<decltype(c.memcpy_async)>(dlsym(h, "cudaMemcpyAsync"));
    c.launch = reinterpret_cast<decltype(c.launch)>(dlsym(h, "cudaLaunchKernel"));
    c.sync = reinterpret_cast<decltype(c.sync)>(dlsym(h, "cudaStreamSynchronize"));
    c.stream_create = reinterpret_cast<decltype(c.stream_create)>(dlsym(h, "cudaStreamCreate"));
    if (!c.malloc_ || !c.free_ || !c.memcpy_async || !c.launch || !c.sync || !c.stream_create) {
        fprintf(stderr, "gpu_steps: libcudart lacks a function\n");
        exit(2);
    }
    return c;
}

std::atomic<unsigned> g_grid{1}; // every launch in the process gets its own grid.x

struct Counts {
    std::atomic<long> kernels{0}, copies{0}, failed{0};
};

struct StepAlloc {
    size_t bytes = 0;  // 0: none
    std::string after; // from when on
};

void run_steps(const Cuda& c, int steps, int kernels, size_t bytes, int sleep_ms, const std::string& until, Counts& n,
               const StepAlloc& step_alloc = {}) {
    cudaStream_t stream = nullptr;
    if (c.stream_create(&stream) != cudaSuccess) ++n.failed;
    void* dev = nullptr;
    if (c.malloc_(&dev, bytes) != cudaSuccess) ++n.failed;
    std::vector<char> host(bytes);
    float* arg0 = static_cast<float*>(dev);
    int arg1 = 0;
    void* args[] = {&arg0, &arg1};
    for (int s = 0; until.empty() ? s < steps : !exists(until); ++s) {
        if (c.memcpy_async(dev, host.data(), bytes, cudaMemcpyHostToDevice, stream) != cudaSuccess) ++n.failed;
        ++n.copies;
        for (int k = 0; k < kernels; ++k) {
            dim3 grid(g_grid.fetch_add(1), 1, 1), block(128, 1, 1);
            if (c.launch(reinterpret_cast<const void*>(&gpu_steps_kernel), grid, block, args, 0, stream) != cudaSuccess) ++n.failed;
            ++n.kernels;
        }
        if (c.memcpy_async(host.data(), dev, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess) ++n.failed;
        ++n.copies;
        if (c.sync(stream) != cudaSuccess) ++n.failed;
        if (void* extra = nullptr; step_alloc.bytes && exists(step_alloc.after)) {
            if (c.malloc_(&extra, step_alloc.bytes) != cudaSuccess) ++n.failed;
            else if (c.free_(extra) != cudaSuccess) ++n.failed;
        }
        if (sleep_ms) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
    }
}

// Deterministic work with blocking system calls in it: sleeps, and bytes through a pipe, in
// rounds of 200 bytes until `until` exists (10 rounds without it). Every round must hash to the
// same value; a register or a system call that an injection failed to restore shows up as a
// round that does not (counted in *bad).
unsigned long busy_work(int index, const std::string& until, long* bad) {
    constexpr int kRound = 200;
    int fds[2];
    if (pipe(fds) != 0) return 0;
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        for (int i = 0; !stop; i = (i + 1) % kRound) {
            unsigned char b = static_cast<unsigned char>(i * 7 + index);
            if (write(fds[1], &b, 1) != 1) break;
            timespec ts{0, 500000};
            nanosleep(&ts, nullptr);
        }
        close(fds[1]);
    });
    unsigned long first = 0;
    for (int round = 0; until.empty() ? round < 10 : !exists(until); ++round) {
        unsigned long h = 1469598103934665603ul ^ static_cast<unsigned long>(index);
        for (int i = 0; i < kRound; ++i) {
            unsigned char b;
            ssize_t r = read(fds[0], &b, 1);
            if (r != 1) {
                fprintf(stderr, "busy thread %d: read returned %zd: %s\n", index, r, strerror(errno)); // a bad restart
                ++*bad;
                break;
            }
            for (int k = 0; k < 1000; ++k) h = (h ^ b) * 1099511628211ul;
        }
        if (round == 0) first = h;
        else if (h != first) ++*bad;
    }
    stop = true;
    unsigned char drain;
    while (read(fds[0], &drain, 1) > 0) {
    }
    writer.join();
    close(fds[0]);
    return first;
}

} // namespace

int main(int argc, char** argv) {
    int steps = 10, kernels = 4, threads = 1, busy = 0, sleep_ms = 0;
    size_t bytes = 1 << 20, hold = 0;
    StepAlloc step_alloc;
    std::string go, load_after, until;
    bool fork_after_init = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--steps") steps = atoi(next().c_str());
        else if (a == "--kernels") kernels = atoi(next().c_str());
        else if (a == "--bytes") bytes = strtoul(next().c_str(), nullptr, 10);
        else if (a == "--threads") threads = atoi(next().c_str());
        else if (a == "--busy-threads") busy = atoi(next().c_str());
        else if (a == "--step-sleep-ms") sleep_ms = atoi(next().c_str());
        else if (a == "--go-file") go = next();
        else if (a == "--load-after") load_after = next();
        else if (a == "--until-file") until = next();
        else if (a == "--fork-after-init") fork_after_init = true;
        else if (a == "--hold-bytes") hold = strtoul(next().c_str(), nullptr, 10);
        else if (a == "--step-alloc-bytes") step_alloc.bytes = strtoul(next().c_str(), nullptr, 10);
        else if (a == "--step-alloc-after") step_alloc.after = next();
        else {
            fprintf(stderr, "gpu_steps: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    printf("ready %d\n", getpid());
    fflush(stdout);
    std::vector<std::thread> busy_threads;
    std::vector<unsigned long> sums(static_cast<size_t>(busy));
    std::vector<long> bad(static_cast<size_t>(busy));
    for (int i = 0; i < busy; ++i)
        busy_threads.emplace_back([&, i] { sums[static_cast<size_t>(i)] = busy_work(i, until, &bad[static_cast<size_t>(i)]); });

    wait_for(load_after);
    Cuda c = load_cuda();
    if (void* held = nullptr; hold) {
        if (c.malloc_(&held, hold) != cudaSuccess) {
            fprintf(stderr, "gpu_steps: cudaMalloc(%zu) failed\n", hold);
            return 1;
        }
        printf("held %zu\n", hold);
        fflush(stdout);
    }
    wait_for(go);
    Counts n;
    if (fork_after_init) {
        run_steps(c, 1, kernels, bytes, 0, {}, n); // CUDA is initialized now
        pid_t child = fork();
        if (child == 0) {
            Counts cn;
            run_steps(c, 2, kernels, bytes, 0, {}, cn); // a forked child's CUDA calls: traced on the CPU side
            _exit(0);
        }
        waitpid(child, nullptr, 0);
    }
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&] { run_steps(c, steps, kernels, bytes, sleep_ms, until, n, step_alloc); });
    for (auto& w : workers) w.join();
    for (auto& b : busy_threads) b.join();
    printf("GTRACE_GPU {\"kernels\": %ld, \"copies\": %ld, \"failed\": %ld, \"busy\": [", n.kernels.load(), n.copies.load(),
           n.failed.load());
    long bad_rounds = 0;
    for (size_t i = 0; i < sums.size(); ++i) {
        printf("%s\"%lx\"", i ? ", " : "", sums[i]);
        bad_rounds += bad[i];
    }
    printf("], \"bad_rounds\": %ld}\n", bad_rounds);
    return n.failed || bad_rounds ? 1 : 0;
}
