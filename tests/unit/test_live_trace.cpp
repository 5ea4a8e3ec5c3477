// The live analysis past its memory bound (analyze/live_trace.h): it keeps the recent window of
// the capture, clips what spans the window's start, keeps each device's memory level there, and
// says from when its spans are.
#include <catch2/catch.hpp>

#include "analyze/live_trace.h"

using namespace gtrace;

namespace {

constexpr uint32_t kLivePid = 42;
constexpr uint64_t kMs = 1'000'000;

ApiCall call_at(uint64_t start_ns, uint64_t end_ns) {
    ApiCall c;
    c.api = GT_API_CUDA_MALLOC, c.pid = kLivePid, c.tid = kLivePid, c.start_ns = start_ns, c.end_ns = end_ns;
    return c;
}

MemorySample allocated(int device, uint64_t ts_ns, uint64_t bytes) {
    MemorySample m;
    m.pid = kLivePid, m.device = device, m.ts_ns = ts_ns, m.allocated_bytes = bytes;
    return m;
}

} // namespace

TEST_CASE("past its bound the live analysis keeps the recent window: spans across its start clipped, each device's memory level", "[live_trace]") {
    constexpr uint64_t kBound = 4 << 20; // the string pool takes 1 MiB of it
    LiveTrace live(LiveTraceOptions{kBound});
    live.memory(allocated(0, 1 * kMs, 100));
    live.memory(allocated(1, 2 * kMs, 7000));
    live.memory(allocated(0, 3 * kMs, 200)); // device 0's level from then on
    const uint64_t calls = 200'000;          // 16 MB of call spans, each at its end as a capture gives them
    for (uint64_t i = 0; i < calls; ++i) live.call(call_at((10 + i) * kMs, (10 + i) * kMs + 1000));
    // Vectors double between two looks at the budget (every 4096 spans): up to twice the bound, not 16 MB.
    CHECK(live.held_bytes() <= 2 * kBound);
    live.call(call_at(5 * kMs, (20 + calls) * kMs)); // one call open almost all along, ending last

    TraceData t = live.take(nlohmann::json::object());
    REQUIRE(t.spans_from_ns);
    const uint64_t from = *t.spans_from_ns;
    CHECK(from > 10 * kMs); // the first calls were let go
    const ProcessData& p = t.processes.at(kLivePid);
    CHECK(std::all_of(p.calls.begin(), p.calls.end(), [&](const CallSpan& s) { return s.start_ns >= from; }));
    // The long call is kept, from the window's start (its part in the window).
    CHECK(std::any_of(p.calls.begin(), p.calls.end(), [&](const CallSpan& s) { return s.end_ns == (20 + calls) * kMs && s.start_ns == from; }));
    // The last calls are all there.
    CHECK(std::count_if(p.calls.begin(), p.calls.end(), [&](const CallSpan& s) { return s.start_ns >= (10 + calls - 100) * kMs && s.end_ns < (20 + calls) * kMs; }) == 100);
    // Each device's level at the window's start: device 0 at 200 (its last value), device 1 at 7000.
    REQUIRE(p.memory.size() == 2);
    CHECK(p.memory[0].ts_ns == from);
    CHECK(p.memory[1].ts_ns == from);
    CHECK((p.memory[0].device == 0 && p.memory[0].allocated_bytes == 200 && p.memory[1].device == 1 && p.memory[1].allocated_bytes == 7000));
    CHECK(t.spans_to_ns == (20 + calls) * kMs);
    CHECK(t.spans_max_bytes == kBound);
}

TEST_CASE("within its bound the live analysis keeps every span and says no window", "[live_trace]") {
    LiveTrace live;
    live.memory(allocated(0, 1 * kMs, 100));
    for (uint64_t i = 0; i < 1000; ++i) live.call(call_at(i * kMs, i * kMs + 10));
    TraceData t = live.take(nlohmann::json::object());
    CHECK_FALSE(t.spans_from_ns);
    CHECK(t.processes.at(kLivePid).calls.size() == 1000);
    CHECK(t.processes.at(kLivePid).memory.size() == 1);
}
