// Test program for the GPU side on CUDA 13's structure, run against the GPU simulator: every path
// by which a process issues GPU work (tests/gpusim/workload: runtime launches, copies and sets,
// each made by the runtime through the driver; the same through the driver API from the program;
// the cuBLAS-like library's GEMMs and memsets), plain C++ threads that launch, and a captured
// graph replayed with cudaGraphLaunch and cuGraphLaunch.
//
//   gpu_paths [--rounds N] [--replays R] [--threads T] [--go-file F] [--graph-bench N]
//
// Prints "ready <pid>", waits for F if given, then runs N rounds of every path (and T threads),
// captures once and replays R times. At the end: "GTRACE_COUNTS {...}" with the outermost API
// calls it made, by exported name (the driver calls the runtime makes inside them are not
// counted: they are nested; nor are setup calls such as stream creation), and "GTRACE_GPU {...}"
// with the ops issued: in all, by path, and by the API call whose correlation id they carry.
// --graph-bench N only replays a graph of 100 kernels N times and prints the simulator's cost per
// kernel ("GTSIM_BENCH {...}").
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "workload/paths.h"

namespace {

using gtsim_workload::Context;

struct Tally {
    std::mutex mu;
    std::map<std::string, long> calls;                        // outermost calls by name
    std::map<std::string, long> by_api;                       // ops by the call that owns their id
    std::map<std::string, std::map<std::string, long>> ops;  // group -> kind -> count
    long failed = 0;

    void add(const char* group, const gtsim_workload::Call& c, int times = 1) {
        std::lock_guard lk(mu);
        calls[c.function] += times;
        by_api[c.function] += times * long(c.ops.size());
        for (const gtsim_workload::Op& op : c.ops) ops[group][op.kind] += times;
    }
    void check(int rc) {
        if (rc == 0) return;
        std::lock_guard lk(mu);
        ++failed;
    }
};

const void* stub() { return reinterpret_cast<const void*>(&gtsim_workload::paths_kernel); }

void run_paths(Context& c, Tally& t) {
    for (const gtsim_workload::Path& p : gtsim_workload::paths()) {
        t.check(p.run(c));
        for (const gtsim_workload::Call& call : p.calls) t.add(p.group, call);
    }
}

// A plain C++ thread: the runtime makes the device's context current, then the driver and the
// library work on this thread too.
void thread_round(Tally& t) {
    Context c;
    t.check(gtsim_workload::make_context(c));
    void* args[] = {nullptr};
    using gtsim_workload::Call;
    using gtsim_workload::Op;
    t.check(cudaLaunchKernel(stub(), dim3(501), dim3(64), args, 0, c.stream));
    t.add("thread", Call{2, "cudaLaunchKernel", "cuLaunchKernel", {Op{"kernel", 0, "", 501}}});
    t.check(cuLaunchKernel(c.function, 502, 1, 1, 64, 1, 1, 0, c.stream, args, nullptr));
    t.add("thread", Call{1, "cuLaunchKernel", nullptr, {Op{"kernel", 0, "", 502}}});
    t.check(gtblas_gemm(c.blas, 128 * 503, 128, 64, c.stream));
    t.add("thread", Call{1, "cuLaunchKernel", nullptr, {Op{"kernel", 0, "", 503}}});
    t.check(cudaStreamSynchronize(c.stream));
    t.add("thread", Call{2, "cudaStreamSynchronize", "cuStreamSynchronize", {}});
    gtsim_workload::free_context(c);
}

// Captures 5 ops (runtime and driver launches, a set, a copy, a library GEMM) and replays them.
void graph_replays(Context& c, int replays, Tally& t) {
    using gtsim_workload::Call;
    using gtsim_workload::Op;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    void* args[] = {nullptr};
    auto* dev = reinterpret_cast<void*>(c.dev);
    t.check(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
    t.check(cudaLaunchKernel(stub(), dim3(601), dim3(64), args, 0, c.stream));
    t.check(cudaMemsetAsync(dev, 0, 6002, c.stream));
    t.check(cudaMemcpyAsync(dev, c.pinned, 6003, cudaMemcpyHostToDevice, c.stream));
    t.check(gtblas_gemm(c.blas, 128 * 604, 128, 64, c.stream));
    t.check(cuLaunchKernel(c.function, 605, 1, 1, 64, 1, 1, 0, c.stream, args, nullptr));
    t.check(cudaStreamEndCapture(c.stream, &g));
    t.check(cudaGraphInstantiate(&exec, g, 0));
    for (const char* fn : {"cudaStreamBeginCapture", "cudaLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync",
                           "cudaStreamEndCapture", "cudaGraphInstantiate"})
        t.add("capture", Call{2, fn, nullptr, {}});
    t.add("capture", Call{1, "cuLaunchKernel", nullptr, {}}, 2); // the library's and the program's
    std::vector<Op> nodes = {Op{"kernel", 0, "", 601}, Op{"memset", 6002, "", 0}, Op{"memcpy", 6003, "", 0},
                             Op{"kernel", 0, "", 604}, Op{"kernel", 0, "", 605}};
    for (int i = 0; i < replays; ++i) {
        bool runtime = i % 2 == 0;
        t.check(runtime ? int(cudaGraphLaunch(exec, c.stream)) : int(cuGraphLaunch(exec, c.stream)));
        t.add("graph", Call{runtime ? 2u : 1u, runtime ? "cudaGraphLaunch" : "cuGraphLaunch", nullptr, nodes});
    }
    t.check(cudaStreamSynchronize(c.stream));
    t.check(cudaGraphExecDestroy(exec));
    t.check(cudaGraphDestroy(g));
}

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

int graph_bench(long replays) {
    Context c;
    if (gtsim_workload::make_context(c)) return 2;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < 100; ++i) cudaLaunchKernel(stub(), dim3(1), dim3(32), nullptr, 0, c.stream);
    if (cudaStreamEndCapture(c.stream, &g) || cudaGraphInstantiate(&exec, g, 0)) return 2;
    uint64_t t0 = mono_ns();
    for (long i = 0; i < replays; ++i) cudaGraphLaunch(exec, c.stream);
    uint64_t t1 = mono_ns();
    printf("GTSIM_BENCH {\"kernels\": %ld, \"ns_per_kernel\": %.1f}\n", replays * 100,
           double(t1 - t0) / double(replays * 100));
    return 0;
}

void print(Tally& t) {
    std::string calls = "GTRACE_COUNTS {\"pid\":" + std::to_string(getpid()) + ",\"calls\":{";
    const char* sep = "";
    for (auto& [name, n] : t.calls) calls += std::string(sep) + "\"" + name + "\":" + std::to_string(n), sep = ",";
    printf("%s}}\n", calls.c_str());
    long kernels = 0, copies = 0, sets = 0;
    std::string groups;
    sep = "";
    for (auto& [group, kinds] : t.ops) {
        kernels += kinds["kernel"], copies += kinds["memcpy"], sets += kinds["memset"];
        groups += std::string(sep) + "\"" + group + "\": {\"kernels\": " + std::to_string(kinds["kernel"]) +
                  ", \"copies\": " + std::to_string(kinds["memcpy"]) + ", \"sets\": " + std::to_string(kinds["memset"]) + "}";
        sep = ", ";
    }
    std::string apis;
    sep = "";
    for (auto& [name, n] : t.by_api)
        if (n) apis += std::string(sep) + "\"" + name + "\": " + std::to_string(n), sep = ", ";
    printf("GTRACE_GPU {\"pid\": %d, \"kernels\": %ld, \"copies\": %ld, \"sets\": %ld, \"by_path\": {%s}, "
           "\"by_api\": {%s}, \"failed\": %ld}\n",
           getpid(), kernels, copies, sets, groups.c_str(), apis.c_str(), t.failed);
}

} // namespace

int main(int argc, char** argv) {
    int rounds = 1, replays = 10, threads = 1;
    long bench = 0;
    std::string go;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--rounds") rounds = atoi(next), ++i;
        else if (a == "--replays") replays = atoi(next), ++i;
        else if (a == "--threads") threads = atoi(next), ++i;
        else if (a == "--go-file") go = next, ++i;
        else if (a == "--graph-bench") bench = atol(next), ++i;
        else {
            fprintf(stderr, "gpu_paths: unknown option %s (see the comment at the top of gpu_paths.cpp)\n", a.c_str());
            return 2;
        }
    }
    if (bench > 0) return graph_bench(bench);
    printf("ready %d\n", getpid());
    fflush(stdout);
    struct stat st;
    while (!go.empty() && stat(go.c_str(), &st) != 0) usleep(2000);
    Tally t;
    Context c;
    t.check(gtsim_workload::make_context(c));
    for (int r = 0; r < rounds; ++r) {
        run_paths(c, t);
        std::vector<std::thread> workers;
        for (int i = 0; i < threads; ++i) workers.emplace_back([&t] { thread_round(t); });
        for (auto& w : workers) w.join();
    }
    graph_replays(c, replays, t);
    t.check(cudaDeviceSynchronize());
    gtsim_workload::free_context(c);
    print(t);
    return t.failed ? 1 : 0;
}
