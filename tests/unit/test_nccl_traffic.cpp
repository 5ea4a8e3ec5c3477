// NCCL traffic (analyze/nccl_traffic.h): which calls a kernel ran (a call's own launch, or a
// group's at its outermost ncclGroupEnd), sizes as nccl-tests counts them, the bus bandwidth
// factors of doc/PERFORMANCE.md, the communicator's size seen or assumed, and a node's figures.
#include <catch2/catch.hpp>

#include "analyze/nccl_traffic.h"

using namespace gtrace;

namespace {

constexpr uint64_t kComm = 0xc0;

struct Builder {
    ProcessData p;
    uint32_t correlation = 0;
    // An NCCL call on the main thread from `t` to `t + 10` (its bytes: count x type size).
    void call(const char* name, uint64_t t, uint64_t bytes, uint8_t depth = 0) {
        CollectiveSpan c;
        c.start_ns = t, c.end_ns = t + 10, c.name = name, c.tid = 1, c.nccl = true, c.bytes = bytes, c.comm = kComm, c.group_depth = depth;
        p.collectives.push_back(c);
    }
    // A launch at `t` (inside a call) whose NCCL kernel ran `gpu_ns`.
    void kernel(uint64_t t, uint64_t gpu_ns, const char* name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL") {
        CallSpan l;
        l.start_ns = t, l.end_ns = t + 2, l.name = "cuLaunchKernelEx", l.tid = 1, l.correlation = ++correlation;
        p.calls.push_back(l);
        GpuSpan g;
        g.start_ns = t + 100, g.end_ns = t + 100 + gpu_ns, g.name = name, g.correlation = correlation;
        p.gpu.push_back(g);
    }
};

const NcclTraffic* kind(const ProcessAnalysis& r, const std::string& name) {
    for (const auto& t : r.nccl_traffic)
        if (t.name == name) return &t;
    return nullptr;
}

} // namespace

TEST_CASE("NCCL calls are joined to the kernels launched inside them or inside their group's end") {
    Builder b;
    b.call("ncclCommInitRank", 0, 0);
    b.p.collectives.back().nranks = 4;
    b.call("ncclAllReduce", 1000, 4'000'000); // its kernel: 2 ms
    b.kernel(1005, 2'000'000);
    b.call("ncclAllGather", 2000, 900'000); // 0.9 MB per rank, x 4; no kernel in the trace
    b.call("ncclSend", 3000, 500'000, 1);      // a group: its kernel at the end
    b.call("ncclRecv", 3020, 500'000, 1);
    b.call("ncclGroupEnd", 3040, 0, 0);
    b.kernel(3045, 1'000'000, "ncclDevKernel_SendRecv");
    ProcessAnalysis r;
    r.rank = 0;
    gather_nccl_traffic(b.p, {0, UINT64_MAX}, nullptr, r);
    std::vector<ProcessAnalysis> all{r};
    nccl_bandwidths(all);
    const ProcessAnalysis& out = all[0];
    const NcclTraffic* ar = kind(out, "AllReduce");
    REQUIRE(ar);
    CHECK(ar->calls == 1);
    CHECK(ar->bytes == 4'000'000);
    CHECK(ar->kernels == 1);
    CHECK(ar->nranks == 4);
    CHECK_FALSE(ar->nranks_assumed);
    CHECK(ar->algbw_gbps == Approx(2.0));  // 4 MB in 2 ms
    CHECK(ar->busbw_gbps == Approx(3.0));  // x 2(4-1)/4
    const NcclTraffic* ag = kind(out, "AllGather");
    REQUIRE(ag);
    CHECK(ag->bytes == 3'600'000); // the whole buffer: per rank x n
    CHECK(ag->kernels == 0);
    CHECK(ag->algbw_gbps == 0);
    const NcclTraffic* sr = kind(out, "SendRecv");
    REQUIRE(sr);
    CHECK(sr->calls == 2);
    CHECK(sr->bytes == 500'000); // what was sent (the receive is the peer's send)
    CHECK(sr->kernels == 1);
    CHECK(sr->algbw_gbps == Approx(0.5));
    CHECK(sr->busbw_gbps == Approx(0.5));
    CHECK(out.nccl_traffic.front().name == "AllReduce"); // most bytes first
}

TEST_CASE("a communicator made before the capture: the world's size, said so; without a rank, not known") {
    Builder b;
    b.call("ncclAllGather", 1000, 1'000'000);
    b.kernel(1005, 1'000'000, "ncclDevKernel_AllGather_RING_LL");
    ProcessAnalysis ranked, other;
    ranked.rank = 0, other.pid = 9;
    gather_nccl_traffic(b.p, {0, UINT64_MAX}, nullptr, ranked);
    b.p.world_size = std::nullopt;
    gather_nccl_traffic(b.p, {0, UINT64_MAX}, nullptr, other);
    ranked.world_size = 8;
    std::vector<ProcessAnalysis> all{ranked, other};
    nccl_bandwidths(all);
    REQUIRE(all[0].nccl_traffic.size() == 1);
    CHECK(all[0].nccl_traffic[0].nranks == 8);
    CHECK(all[0].nccl_traffic[0].nranks_assumed);
    CHECK(all[0].nccl_traffic[0].bytes == 8'000'000);
    CHECK(all[0].nccl_traffic[0].busbw_gbps == Approx(8.0 * 7 / 8));
    REQUIRE(all[1].nccl_traffic.size() == 1);
    CHECK(all[1].nccl_traffic[0].nranks == 0); // no rank, no WORLD_SIZE: the size is not known
    CHECK(all[1].nccl_traffic[0].bytes == 1'000'000); // the rank's own buffer
    CHECK(all[1].nccl_traffic[0].busbw_gbps == 0);
}

TEST_CASE("nccl-tests' bus bandwidth factors, and a node's ranks together") {
    CHECK(nccl_bus_factor("AllReduce", 8) == Approx(1.75));
    CHECK(nccl_bus_factor("ReduceScatter", 4) == Approx(0.75));
    CHECK(nccl_bus_factor("AllGather", 2) == Approx(0.5));
    CHECK(nccl_bus_factor("Broadcast", 16) == 1);
    CHECK(nccl_bus_factor("SendRecv", 2) == 1);
    CHECK(nccl_bus_factor("Group(AllReduce+AllGather)", 4) == 0);
    CHECK(nccl_bus_factor("AllReduce", 0) == 0);
    ProcessAnalysis a, b;
    a.summarized_steps = 10, b.summarized_steps = 10;
    a.nccl_traffic = {{.name = "AllReduce", .calls = 10, .bytes = 10e6, .kernels = 10, .kernel_ms = 5, .joined_bytes = 10e6, .nranks = 2}};
    b.nccl_traffic = {{.name = "AllReduce", .calls = 10, .bytes = 10e6, .kernels = 10, .kernel_ms = 15, .joined_bytes = 10e6, .nranks = 2}};
    auto node = combined_nccl_traffic({&a, &b});
    REQUIRE(node.size() == 1);
    CHECK(node[0].bytes == Approx(2e6)); // each rank's 1 MB per step, added
    CHECK(node[0].algbw_gbps == Approx(20e6 / 20e6)); // 20 MB over 20 ms of kernels
    CHECK(node[0].busbw_gbps == Approx(1.0));
}

TEST_CASE("an NCCL call that returned an error moved nothing: neither its calls nor its bytes are counted") {
    Builder b;
    b.call("ncclCommInitRank", 0, 0);
    b.p.collectives.back().nranks = 2;
    b.call("ncclAllReduce", 1000, 4'000'000);
    b.kernel(1005, 2'000'000);
    b.call("ncclAllReduce", 2000, 8'000'000); // ncclInvalidArgument: no kernel, nothing moved
    b.p.collectives.back().result = 4;
    ProcessAnalysis r;
    r.rank = 0;
    gather_nccl_traffic(b.p, {0, UINT64_MAX}, nullptr, r);
    const NcclTraffic* ar = kind(r, "AllReduce");
    REQUIRE(ar);
    CHECK(ar->calls == 1);
    CHECK(ar->bytes == Approx(4'000'000));
}
