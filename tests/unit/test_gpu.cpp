#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "collect/agent_ring.h"
#include "decode/gpu_activity.h"
#include "model/gpu_join.h"
#include "output/pftrace_flows.h"

using namespace gtrace;

namespace {

struct RingBuffer {
    std::vector<uint8_t> bytes;
    gt_agent_ring* ring;
    explicit RingBuffer(uint64_t data_bytes) : bytes(agent_ring_file_size(data_bytes)) {
        ring = reinterpret_cast<gt_agent_ring*>(bytes.data());
        ring->data_bytes = data_bytes;
    }
};

bool put(gt_agent_ring* r, uint32_t corr, size_t payload) {
    uint16_t size = agent_record_size(payload);
    uint64_t pos = 0;
    uint8_t* p = agent_ring_reserve(r, size, &pos);
    if (!p) return false;
    auto* h = reinterpret_cast<gt_gpu_header*>(p);
    h->type = GT_GPU_MEMCPY;
    h->size = size;
    h->correlation = corr;
    agent_ring_commit(r, pos, size);
    return true;
}

} // namespace

TEST_CASE("agent ring: records wrap with a pad, never split, and a full ring refuses") {
    RingBuffer b(1024);
    std::vector<uint32_t> seen;
    uint32_t next = 1;
    for (int round = 0; round < 50; ++round) {
        while (put(b.ring, next, 72 + (next % 5) * 8)) ++next; // fill until refused
        REQUIRE(b.ring->head - b.ring->tail <= 1024);
        auto got = agent_ring_consume_copy(b.ring, 1024, [&](const gt_gpu_header& h) { seen.push_back(h.correlation); });
        REQUIRE(got.corrupt == 0);
        REQUIRE(b.ring->tail == b.ring->head);
    }
    REQUIRE(seen.size() == next - 1);
    for (size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == i + 1); // in order, none lost, none twice
}

TEST_CASE("agent ring: a reader never trusts the producer's positions or sizes") {
    RingBuffer b(1024);
    for (uint32_t c = 1; c <= 3; ++c) REQUIRE(put(b.ring, c, 64));
    // The second record claims to run past the ring's end: it and what follows are skipped.
    auto* h = reinterpret_cast<gt_gpu_header*>(agent_ring_data(b.ring) + 64);
    h->size = 1000;
    std::vector<uint32_t> seen;
    auto got = agent_ring_consume_copy(b.ring, 1024, [&](const gt_gpu_header& r) { seen.push_back(r.correlation); });
    REQUIRE(seen == std::vector<uint32_t>{1});
    REQUIRE(got.corrupt == 1);
    REQUIRE(b.ring->tail == b.ring->head);
    // A head far beyond what the ring can hold: the reader starts over at the head.
    b.ring->head = b.ring->tail + (1u << 20);
    got = agent_ring_consume_copy(b.ring, 1024, [&](const gt_gpu_header&) { FAIL("read garbage"); });
    REQUIRE(got.corrupt == 1);
    REQUIRE(b.ring->tail == b.ring->head);
    // A tail 2 bytes before the ring's end, where no record can start: a header read there would
    // end past the ring (found by fuzz_agent_ring). The reader starts over at the head.
    b.ring->tail = 1024 * 7 + 1022;
    b.ring->head = b.ring->tail + 64;
    got = agent_ring_consume_copy(b.ring, 1024, [&](const gt_gpu_header&) { FAIL("read garbage"); });
    REQUIRE(got.corrupt == 1);
    REQUIRE(b.ring->tail == b.ring->head);
}

TEST_CASE("GPU join: by correlation id, in either order, per process") {
    std::vector<std::pair<uint32_t, uint32_t>> links; // (call tid, op correlation)
    GpuJoin join([&](const CallRef& c, const GpuOp& op) { links.emplace_back(c.tid, op.correlation); });
    ApiCall launch;
    launch.pid = 10, launch.tid = 11, launch.correlation = 5, launch.start_ns = 100, launch.end_ns = 200;
    GpuOp early;
    early.pid = 10, early.correlation = 7;
    join.add_op(early); // its call comes later
    join.add_call(launch);
    GpuOp k;
    k.pid = 10, k.correlation = 5;
    join.add_op(k);
    GpuOp other_process = k;
    other_process.pid = 99;
    join.add_op(other_process); // same id, another process: no link
    ApiCall late = launch;
    late.tid = 12, late.correlation = 7;
    join.add_call(late);
    REQUIRE(links == std::vector<std::pair<uint32_t, uint32_t>>{{11, 5}, {12, 7}});
    REQUIRE(join.stats().joined == 2);
    REQUIRE(join.stats().gpu_ops == 3);
}

TEST_CASE("GPU join: CUPTI API records join a call on the same thread whose interval holds them") {
    std::vector<uint32_t> linked_tids;
    GpuJoin join([&](const CallRef& c, const GpuOp&) { linked_tids.push_back(c.tid); });
    ApiCall a;
    a.pid = 1, a.tid = 2, a.start_ns = 1000, a.end_ns = 5000;
    ApiCall b = a;
    b.start_ns = 6000, b.end_ns = 9000;
    join.add_call(a);
    join.add_call(b);
    join.add_api_record({1, 2, 42, 6500, 8000}); // inside b
    join.add_api_record({1, 3, 43, 1500, 2000}); // another thread: nothing
    GpuOp op;
    op.pid = 1, op.correlation = 42;
    join.add_op(op);
    op.correlation = 43;
    join.add_op(op);
    REQUIRE(linked_tids == std::vector<uint32_t>{2});
    REQUIRE(join.stats().joined_by_api_record == 1);
}

TEST_CASE("GPU join: an exited process's recent calls are let go, other processes' kept") {
    std::vector<uint32_t> linked_pids;
    GpuJoin join([&](const CallRef& c, const GpuOp&) { linked_pids.push_back(c.pid); });
    ApiCall a;
    a.pid = 1, a.tid = 1, a.start_ns = 1000, a.end_ns = 5000;
    ApiCall b = a;
    b.pid = 2, b.tid = 2;
    join.add_call(a);
    join.add_call(b);
    join.forget_process(1);
    join.add_api_record({1, 1, 42, 1500, 2000}); // pid 1 exited: no call of it is held
    join.add_api_record({2, 2, 43, 1500, 2000});
    GpuOp op;
    op.pid = 1, op.correlation = 42;
    join.add_op(op);
    op.pid = 2, op.correlation = 43;
    join.add_op(op);
    REQUIRE(linked_pids == std::vector<uint32_t>{2});
    // Ops of a process that exited wait for no call: counted as unlinked at once, then let go.
    op.pid = 3, op.correlation = 9;
    join.add_op(op);
    REQUIRE(join.unlinked().no_traced_call == 2); // pid 1's op and pid 3's
    join.forget_process(3);
    join.forget_process(1);
    REQUIRE(join.unlinked().no_traced_call == 2);
    ApiCall late = a;
    late.pid = 3, late.correlation = 9;
    join.add_call(late); // a new process under pid 3: not joined to the old one's op
    REQUIRE(linked_pids == std::vector<uint32_t>{2});
}

TEST_CASE("GPU join and flows: a call waits a minute of newer calls for its GPU op, not forever") {
    std::vector<uint32_t> linked;
    GpuJoin join([&](const CallRef&, const GpuOp& op) { linked.push_back(op.correlation); });
    PftraceFlows flows;
    ApiCall c;
    c.pid = 1, c.tid = 1;
    auto call = [&](uint32_t corr, uint64_t at_s) {
        c.correlation = corr, c.start_ns = at_s * 1'000'000'000, c.end_ns = c.start_ns + 1000;
        join.add_call(c);
        flows.call_written(c.pid, c.tid, c.start_ns, c.end_ns, corr);
    };
    call(5, 0);  // never gets its op: let go once a minute of newer calls came
    call(6, 30);
    call(7, 61);
    GpuOp op;
    op.pid = 1;
    for (uint32_t corr : {5, 6, 7}) {
        op.correlation = corr;
        join.add_op(op);
    }
    REQUIRE(linked == std::vector<uint32_t>{6, 7});
    CallRef at_30{1, 1, 30'000'000'000, 30'000'001'000};
    op.correlation = 6;
    REQUIRE_FALSE(flows.join(at_30, op).needs_start); // still started on its call's slice
    CallRef at_0{1, 1, 0, 1000};
    op.correlation = 5;
    REQUIRE(flows.join(at_0, op).needs_start); // let go: a late join starts its own flow
}

TEST_CASE("GPU join: an op whose call never comes waits a minute of newer ops, then is let go and counted") {
    std::vector<uint32_t> linked;
    GpuJoin join([&](const CallRef&, const GpuOp& op) { linked.push_back(op.correlation); });
    ApiCall c;
    c.pid = 1, c.tid = 1, c.correlation = 1, c.start_ns = 0, c.end_ns = 1000;
    join.add_call(c); // the process's first traced call: later ids are "between traced calls"
    GpuOp op;
    op.pid = 1;
    auto add_op = [&](uint32_t corr, uint64_t end_s) {
        op.correlation = corr, op.end_ns = end_s * 1'000'000'000;
        join.add_op(op);
    };
    add_op(5, 1);  // its call never comes
    add_op(6, 30);
    REQUIRE(join.unlinked().total() == 2); // both still waiting
    add_op(7, 62); // a minute after op 5: 5 is let go, 6 still waits
    c.correlation = 6, c.start_ns = 29'000'000'000, c.end_ns = c.start_ns + 1000;
    join.add_call(c);
    c.correlation = 5;
    join.add_call(c); // too late: op 5 was let go
    REQUIRE(linked == std::vector<uint32_t>{6});
    Unlinked u = join.unlinked();
    REQUIRE(u.total() == 2); // 5 (let go, after the last call then) and 7 (still waiting, after call 6)
    REQUIRE(u.after_last_call == 2);
}

TEST_CASE("GPU records decode with times moved to CLOCK_MONOTONIC") {
    std::vector<uint8_t> buf(sizeof(gt_gpu_kernel) + 16);
    auto* k = reinterpret_cast<gt_gpu_kernel*>(buf.data());
    k->op.h = {GT_GPU_KERNEL, static_cast<uint16_t>(buf.size()), 9};
    k->op.start = 5000, k->op.end = 7000, k->op.stream = 13;
    k->grid[0] = 4, k->block[0] = 128;
    k->name_len = 12;
    std::memcpy(k->name, "_Z4gemmPfi", 10);
    k->name_len = 10;
    auto op = decode_gpu_op(3, k->op.h, 1000);
    REQUIRE(op);
    REQUIRE(op->start_ns == 4000);
    REQUIRE(op->end_ns == 6000);
    REQUIRE(op->name == "gemm(float*, int)");
    REQUIRE(op->stream == 13);
    REQUIRE(op->correlation == 9);
}
