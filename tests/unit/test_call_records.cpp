// The agent's calls from CUPTI API records (userspace/collect/agent/call_records.cpp): outermost
// calls only, stacks found again by correlation id, waiting driver calls sent after a pass.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

#include "collect/agent/call_records.h"
#include "collect/agent_ring.h"

using namespace gtrace;
using namespace gtrace::agent;

namespace {

struct Ring {
    static constexpr uint64_t kData = 1 << 16;
    std::unique_ptr<uint8_t, decltype(&free)> mem{static_cast<uint8_t*>(aligned_alloc(4096, agent_ring_file_size(kData))), &free};
    gt_agent_ring* r;
    Ring() : r(reinterpret_cast<gt_agent_ring*>(mem.get())) {
        std::memset(mem.get(), 0, agent_ring_file_size(kData));
        r->data_bytes = kData;
    }
    std::vector<gt_gpu_call> calls() {
        std::vector<gt_gpu_call> out;
        agent_ring_consume_copy(r, kData, [&](const gt_gpu_header& h) {
            if (h.type == GT_GPU_CALL) out.push_back(reinterpret_cast<const gt_gpu_call&>(h));
        });
        return out;
    }
};

ApiRecord record(bool driver, uint32_t correlation, uint64_t start, uint64_t end, uint32_t tid = 7) {
    return {driver ? 1 : 0, driver, correlation, tid, start, end};
}

} // namespace

TEST_CASE("calls from API records: a runtime call's nested driver call is dropped, the caller's kept") {
    reset_call_records();
    set_calls_from_records(true, false);
    Ring ring;
    call_from_record(ring.r, record(true, 10, 110, 150)); // nested: completes first
    call_from_record(ring.r, record(false, 10, 100, 200));
    send_waiting_calls(ring.r, true);
    auto calls = ring.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].h.correlation == 10);
    CHECK(calls[0].start == 100);
    CHECK(calls[0].end == 200);
}

TEST_CASE("calls from API records: a driver call of the application's own (cuBLAS) is kept") {
    reset_call_records();
    set_calls_from_records(true, false);
    Ring ring;
    call_from_record(ring.r, record(true, 20, 100, 120));  // cuLaunchKernel from a library
    call_from_record(ring.r, record(false, 21, 130, 160)); // the next runtime call does not enclose it
    call_from_record(ring.r, record(true, 22, 170, 180));  // and one more, left waiting
    CHECK(ring.calls().size() == 2);
    send_waiting_calls(ring.r, false); // one pass: it may still be nested in a call not yet complete
    CHECK(ring.calls().empty());
    send_waiting_calls(ring.r, false); // a whole pass without its caller: it was outermost
    auto calls = ring.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].h.correlation == 22);
}

TEST_CASE("calls from API records: threads wait apart, and the stack walked at entry is attached") {
    reset_call_records();
    set_calls_from_records(true, false);
    Ring ring;
    remember_stack(31, {0xabc, GT_PY_OK});
    call_from_record(ring.r, record(true, 30, 100, 150, 1));  // thread 1: waits
    call_from_record(ring.r, record(false, 31, 90, 300, 2));  // thread 2's call does not settle thread 1's
    send_waiting_calls(ring.r, true);
    auto calls = ring.calls();
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].h.correlation == 31);
    CHECK(calls[0].py_stack == 0xabc);
    CHECK(calls[0].py_status == GT_PY_OK);
    CHECK(calls[1].h.correlation == 30);
    CHECK(calls[1].py_status == GT_PY_NONE);
    CHECK(ring.r->call_stacks_missed == 0);
}

TEST_CASE("calls from API records: a stack slot taken by a later call is counted as missed") {
    reset_call_records();
    set_calls_from_records(true, false);
    Ring ring;
    remember_stack(5, {0x1, GT_PY_OK});
    remember_stack(5 + kCallStackSlots, {0x2, GT_PY_OK}); // the same slot, a later correlation id
    call_from_record(ring.r, record(false, 5, 100, 200));
    auto calls = ring.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].py_stack == 0);
    CHECK(ring.r->call_stacks_missed == 1);
}

TEST_CASE("calls from API records: with entry callbacks, a call that entered before the agent began is left to the uprobes") {
    reset_call_records();
    set_calls_from_records(true, true);
    Ring ring;
    remember_stack(41, {0x5, GT_PY_OK});          // entered after: its entry callback marked it
    remember_stack(42, {0, GT_PY_NONE});          // entered after, no stack walked for it
    call_from_record(ring.r, record(false, 40, 100, 200)); // entered before: no mark
    call_from_record(ring.r, record(false, 41, 210, 300));
    call_from_record(ring.r, record(false, 42, 310, 400));
    auto calls = ring.calls();
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].h.correlation == 41);
    CHECK(calls[0].py_stack == 0x5);
    CHECK(calls[1].h.correlation == 42);
    CHECK(calls[1].py_status == GT_PY_NONE);
    set_calls_from_records(false, false);
}
