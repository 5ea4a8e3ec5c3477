// gpusim_selfcheck phase 6: stream capture and graph replays. Captured calls run nothing; every
// replay runs every node, each op carrying the launch's correlation id and the instance's graph and
// node ids, back to back on the launch stream.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim_selfcheck_expect.h"
#include "twins.h"

namespace selfcheck {
namespace {

const void* kStubA = reinterpret_cast<const void*>(&gtsim_workload::paths_kernel);
constexpr size_t kNodes = 5;

struct Replay {
    ObservedCall call;
    int instance; // 1 or 2
    uint32_t stream;
};

// One op of a replay, from whichever record kind it is.
struct Op {
    uint64_t start, end, node;
    uint32_t graph, stream;
    std::string what;
};

Replay replay(int instance, uint32_t stream, const std::function<void()>& fn) {
    size_t first = events().size();
    fn();
    std::vector<ObservedCall> got;
    CHECK(split_calls(first, events().size(), &got) && got.size() == 1);
    return Replay{got.empty() ? ObservedCall{} : got[0], instance, stream};
}

std::map<uint32_t, std::vector<Op>> ops_by_correlation(Collected& c) {
    std::map<uint32_t, std::vector<Op>> by;
    for (auto& k : c.kernels)
        by[k.correlationId].push_back({k.start, k.end, k.graphNodeId, k.graphId, k.streamId, "k" + std::to_string(k.gridX)});
    for (auto& m : c.memcpys)
        by[m.correlationId].push_back({m.start, m.end, m.graphNodeId, m.graphId, m.streamId, "c" + std::to_string(m.bytes)});
    for (auto& m : c.memsets)
        by[m.correlationId].push_back({m.start, m.end, m.graphNodeId, m.graphId, m.streamId, "s" + std::to_string(m.bytes)});
    for (auto& [corr, v] : by) std::sort(v.begin(), v.end(), [](const Op& a, const Op& b) { return a.start < b.start; });
    return by;
}

void check_launches(const std::vector<Replay>& launches, uint32_t first_captured, uint32_t last_captured,
                    const std::string& log_path) {
    std::vector<LogLine> lines = read_log(log_path, uint64_t(getpid()));
    Collected& c = collected();
    std::lock_guard lk(c.mu);
    auto by = ops_by_correlation(c);
    // Captured calls ran nothing.
    for (auto& [corr, v] : by) CHECK(corr < first_captured || corr > last_captured);
    for (auto& l : lines) CHECK(l.correlation < first_captured || l.correlation > last_captured);
    const std::vector<std::string> order = {"k401", "s4001", "c4002", "k1", "k402"};
    std::map<int, uint32_t> graph_of;
    std::map<int, std::set<uint64_t>> nodes_of;
    for (const Replay& l : launches) {
        uint32_t corr = l.call.correlation;
        bool runtime = l.call.domain == CUPTI_CB_DOMAIN_RUNTIME_API;
        // A runtime graph launch has the nested driver launch, sharing its id.
        CHECK(l.call.inner.size() == (runtime ? 2u : 0u));
        for (const ApiEvent& e : l.call.inner)
            CHECK(e.domain == CUPTI_CB_DOMAIN_DRIVER_API && e.correlation == corr && e.function.rfind("cuGraphLaunch", 0) == 0);
        size_t rt = 0, drv = 0;
        for (auto& a : c.apis) rt += a.correlationId == corr;
        for (auto& a : c.drivers) drv += a.correlationId == corr;
        CHECK(rt == (runtime ? 1u : 0u) && drv == (runtime ? 0u : 1u));
        const std::vector<Op>& ops = by[corr];
        CHECK(ops.size() == kNodes);
        std::set<uint64_t> nodes;
        for (size_t i = 0; i < ops.size(); ++i) {
            CHECK(ops[i].what == order[i] && ops[i].stream == l.stream && ops[i].graph != 0 && ops[i].node != 0);
            if (i) CHECK(ops[i].start >= ops[i - 1].end); // back to back, in capture order
            nodes.insert(ops[i].node);
        }
        CHECK(nodes.size() == kNodes);
        if (!graph_of.count(l.instance)) {
            graph_of[l.instance] = ops.empty() ? 0 : ops[0].graph;
            nodes_of[l.instance] = nodes;
        }
        for (const Op& op : ops) CHECK(op.graph == graph_of[l.instance]);
        CHECK(nodes == nodes_of[l.instance]); // the same nodes at every replay of an instance
        for (auto& m : c.memcpys)
            if (m.correlationId == corr) CHECK(m.runtimeCorrelationId == (runtime ? corr : 0));
        size_t logged = 0;
        for (auto& line : lines)
            if (line.correlation == corr) {
                ++logged;
                CHECK(line.graph == graph_of[l.instance] && nodes.count(line.graph_node) && line.api == l.call.function);
            }
        CHECK(logged == kNodes);
    }
    // Two instances of one graph: ids of their own.
    CHECK(graph_of.size() == 2 && graph_of[1] != graph_of[2]);
    for (uint64_t n : nodes_of[1]) CHECK(!nodes_of[2].count(n));
}

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

// The simulator's own cost per replayed kernel, with CUPTI records and GTSIM_LOG on.
void replay_cost(cudaStream_t s) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t e = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    for (int i = 0; i < 100; ++i) CHECK(cudaLaunchKernel(kStubA, dim3(1), dim3(32), nullptr, 0, s) == cudaSuccess);
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && cudaGraphInstantiate(&e, g, 0) == cudaSuccess);
    size_t before = collected().kernels.size();
    constexpr int kReplays = 200;
    uint64_t t0 = now_ns();
    for (int i = 0; i < kReplays; ++i) CHECK(cudaGraphLaunch(e, s) == cudaSuccess);
    uint64_t t1 = now_ns();
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(collected().kernels.size() - before == size_t(100 * kReplays));
    CHECK(cudaGraphExecDestroy(e) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    printf("phase 6: %d replays of 100 kernels: %.0f ns of simulator per kernel (CUPTI records and GTSIM_LOG on)\n",
           kReplays, double(t1 - t0) / (100.0 * kReplays));
}

} // namespace

void graphs_phase(const std::string& log_path) {
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);
    collected().clear();
    start_full_tracing();
    cudaStream_t s = nullptr;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    uint32_t sid = 0, ptds = 0;
    CHECK(cupti.GetStreamIdEx(nullptr, s, 0, &sid) == CUPTI_SUCCESS && cupti.GetStreamIdEx(nullptr, nullptr, 1, &ptds) == CUPTI_SUCCESS);
    CUdeviceptr dev = 0;
    void* pinned = nullptr;
    CHECK(cuMemAlloc(&dev, 1 << 20) == CUDA_SUCCESS && cudaMallocHost(&pinned, 1 << 16) == cudaSuccess);
    gtblas_handle h = nullptr;
    CHECK(gtblas_create(&h) == 0);
    cudaGraph_t g = nullptr;
    CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &g) == cudaErrorIllegalState);

    size_t first = events().size();
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaLaunchKernel(kStubA, dim3(401), dim3(64), nullptr, 0, s) == cudaSuccess);
    CHECK(cudaMemsetAsync(reinterpret_cast<void*>(dev), 0, 4001, s) == cudaSuccess);
    CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(dev), pinned, 4002, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(gtblas_gemm(h, 100, 100, 64, s) == 0); // a driver launch is captured too
    CHECK(cudaLaunchKernel(kStubA, dim3(402), dim3(64), nullptr, 0, s) == cudaSuccess);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CHECK(cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive);
    CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && g);
    std::vector<ObservedCall> captured;
    CHECK(split_calls(first, events().size(), &captured) && captured.size() == 9);

    cudaGraphExec_t e1 = nullptr;
    CUgraphExec e2 = nullptr;
    CHECK(cudaGraphInstantiate(&e1, g, 0) == cudaSuccess && cuGraphInstantiate(&e2, g, 0) == CUDA_SUCCESS);
    std::vector<Replay> launches;
    for (int i = 0; i < 3; ++i) launches.push_back(replay(1, sid, [&] { CHECK(cudaGraphLaunch(e1, s) == cudaSuccess); }));
    for (int i = 0; i < 2; ++i) launches.push_back(replay(1, sid, [&] { CHECK(cuGraphLaunch(e1, s) == CUDA_SUCCESS); }));
    launches.push_back(replay(2, ptds, [&] { CHECK(cudaGraphLaunch_ptsz(e2, nullptr) == cudaSuccess); }));
    launches.push_back(replay(2, ptds, [&] { CHECK(cuGraphLaunch_ptsz(e2, nullptr) == CUDA_SUCCESS); }));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    if (!captured.empty()) check_launches(launches, captured.front().correlation, captured.back().correlation, log_path);

    CHECK(cudaGraphExecDestroy(e1) == cudaSuccess && cudaGraphLaunch(e1, s) == cudaErrorInvalidValue);
    CHECK(cuGraphExecDestroy(e2) == CUDA_SUCCESS && cudaGraphDestroy(g) == cudaSuccess);
    CHECK(cudaGraphDestroy(g) == cudaErrorInvalidValue);
    printf("phase 6: %zu graph launches of %zu nodes joined to their ops\n", launches.size(), kNodes);
    replay_cost(s);
    CHECK(gtblas_destroy(h) == 0 && cudaFreeHost(pinned) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess);
}

} // namespace selfcheck
