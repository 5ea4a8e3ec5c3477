#include "output/clocks.h"
#include "foundation/test_hooks.h"

#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace gtrace {
namespace {

uint64_t now(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Test only: GTRACE_TEST_CLOCK_OFFSET_NS (signed) shifts the CLOCK_REALTIME readings a trace
// records, as if this host's wall clock were off by that much: what `gtrace merge` must see
// through by matching collectives (tests/runtime/two_nodes.py). It changes no time of an event.
int64_t test_realtime_offset_ns() {
    static const int64_t offset = [] {
        const char* v = GTRACE_TEST_HOOK("CLOCK_OFFSET_NS");
        int64_t n = 0;
        if (v && *v) std::from_chars(v, v + strlen(v), n);
        return n;
    }();
    return offset;
}

} // namespace

uint64_t monotonic_now_ns() { return now(CLOCK_MONOTONIC); }

ClockReading read_clocks() {
    ClockReading best;
    uint64_t best_spread = UINT64_MAX;
    for (int i = 0; i < 16; ++i) {
        uint64_t before = now(CLOCK_MONOTONIC);
        uint64_t boot = now(CLOCK_BOOTTIME), real = now(CLOCK_REALTIME);
        uint64_t after = now(CLOCK_MONOTONIC);
        if (after - before < best_spread) {
            best_spread = after - before;
            best = {before + (after - before) / 2, boot, real + static_cast<uint64_t>(test_realtime_offset_ns())};
        }
    }
    return best;
}

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return {};
    return name;
}

} // namespace gtrace
