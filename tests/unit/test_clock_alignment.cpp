// Clock alignment of several nodes' traces (analyze/clock_alignment.h): the clock readings give a
// first offset, and the ends of the same collectives correct what the wall clocks got wrong —
// through a straggler (whose collectives start late but end with everyone's), a trace that
// covers more time than the others, and the odd unmatched call.
#include <catch2/catch.hpp>

#include <random>

#include "analyze/clock_alignment.h"
#include "discover/cpu_pressure.h"

using namespace gtrace;

namespace {

constexpr int64_t kMsSigned = 1'000'000, kUsSigned = 1'000;

// A rank's all_reduce calls every `period_ns` from `first_end_ns` (its own clock), each arriving
// `late_ns` before it ends, with ends jittered by up to `jitter_ns`.
std::vector<CollectiveCall> rank_calls(uint64_t first_end_ns, uint64_t period_ns, int count, uint64_t late_ns,
                                       uint64_t jitter_ns = 0, unsigned seed = 1) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint64_t> jitter(0, jitter_ns);
    std::vector<CollectiveCall> out;
    for (int i = 0; i < count; ++i) {
        uint64_t done = first_end_ns + static_cast<uint64_t>(i) * period_ns + jitter(rng);
        out.push_back({"all_reduce", done - late_ns, done, late_ns});
    }
    return out;
}

NodeClock node(std::string host, std::optional<int64_t> realtime, std::vector<const std::vector<CollectiveCall>*> ranks) {
    return {std::move(host), realtime, std::move(ranks)};
}

} // namespace

TEST_CASE("median: the lower middle value, 0 for none") {
    CHECK(median({}) == 0);
    CHECK(median({5}) == 5);
    CHECK(median({9, -3, 4}) == 4);
    CHECK(median({4, 1, 3, 2}) == 2);
}

TEST_CASE("end differences: the nearest end of the same name, within the window, inside the reference's span") {
    std::vector<CollectiveEnd> ref = {{"all_reduce", 1000}, {"barrier", 1500}, {"all_reduce", 2000}, {"all_reduce", 3000}};
    std::vector<CollectiveCall> calls = {
        {"all_reduce", 0, 1040, 0},  // → 1000: -40
        {"all_reduce", 0, 1980, 0},  // → 2000: +20 (barrier at 1500 is nearer but another collective)
        {"barrier", 0, 1490, 0},     // → 1500: +10
        {"broadcast", 0, 2000, 0},   // no broadcast in the reference
        {"all_reduce", 0, 9000, 0},  // after the reference's span: left out
    };
    CHECK(end_differences(ref, calls, 0, 400) == std::vector<int64_t>{-40, 20, 10});
    // Shifted by +30: the same calls 30 ns later.
    CHECK(end_differences(ref, calls, 30, 400) == std::vector<int64_t>{-70, -10, -20});
    // A window narrower than a difference drops that call.
    CHECK(end_differences(ref, calls, 0, 15) == std::vector<int64_t>{10});
}

TEST_CASE("align: a node whose wall clock is 2.5 ms off is put back by its collectives' ends, through a straggler") {
    // Node A (reference) and node B share one time line; B's clock runs 7 s ahead of A's
    // (booted earlier) and its wall clock is 2.5 ms fast, so the readings say 7 s + 2.5 ms.
    // B's rank is the straggler: it arrives 30 ms after A's, and both end together (±20 µs).
    const uint64_t boot_gap = 7'000 * kMsSigned;
    auto a = rank_calls(100 * kMsSigned, 40 * kMsSigned, 50, 31 * kMsSigned, 20 * kUsSigned, 1);
    auto b = rank_calls(100 * kMsSigned + boot_gap, 40 * kMsSigned, 50, 1 * kMsSigned, 20 * kUsSigned, 2);
    const int64_t real_a = 1'700'000'000'000'000'000, wall_error = 2'500'000;
    std::vector<NodeClock> nodes = {node("a", real_a, {&a}), node("b", real_a - static_cast<int64_t>(boot_gap) + wall_error, {&b})};
    auto al = align_nodes(nodes);
    REQUIRE(al.size() == 2);
    CHECK(al[0].offset_ns() == 0);
    CHECK(al[0].method == "reference");
    CHECK(al[1].clock_offset_ns == -static_cast<int64_t>(boot_gap) + wall_error);
    CHECK(std::llabs(al[1].offset_ns() + static_cast<int64_t>(boot_gap)) < 20 * kUsSigned); // the truth: −7 s exactly
    CHECK(std::llabs(al[1].refined_ns + wall_error) < 20 * kUsSigned);
    CHECK(al[1].matched == 50);
    REQUIRE(al[1].residual_ns);
    CHECK(*al[1].residual_ns < 20 * kUsSigned);
    CHECK(al[1].method == "clocks and collectives");
    REQUIRE(al[1].uncertainty_ns);
    CHECK(*al[1].uncertainty_ns < 10 * kUsSigned);
    CHECK(al[1].doubt().empty());
}

TEST_CASE("align: too few collectives, or ends scattered by a busy host, and the report says it cannot be trusted") {
    // Five collectives: whatever they say, too few to trust.
    auto a = rank_calls(100 * kMsSigned, 40 * kMsSigned, 5, 1 * kMsSigned);
    auto b = rank_calls(100 * kMsSigned, 40 * kMsSigned, 5, 1 * kMsSigned);
    auto few = align_nodes({node("a", 0, {&a}), node("b", 0, {&b})});
    CHECK(few[1].matched == 5);
    CHECK(few[1].doubt() == "uncertain: 5 collectives' ends matched, fewer than 8");
    // Twenty, each end returned up to 1 ms late on either node (threads woken late on a loaded
    // 2-core host): the median moves by up to ~100 µs, and the uncertainty says as much.
    auto c = rank_calls(100 * kMsSigned, 40 * kMsSigned, 20, 1 * kMsSigned, 1 * kMsSigned, 7);
    auto d = rank_calls(100 * kMsSigned, 40 * kMsSigned, 20, 1 * kMsSigned, 1 * kMsSigned, 8);
    auto busy = align_nodes({node("c", 0, {&c}), node("d", 0, {&d})});
    CHECK(busy[1].matched >= kMinAlignmentCollectives); // 19: one end falls past the reference's last
    REQUIRE(busy[1].uncertainty_ns);
    CHECK(*busy[1].uncertainty_ns > kTrustedAlignmentNs);
    CHECK(busy[1].doubt().starts_with("uncertain: the collectives' ends scatter, ±"));
    CHECK(std::llabs(busy[1].offset_ns()) < 3 * *busy[1].uncertainty_ns); // the truth (0) within what it says
}

TEST_CASE("align: on a contended host the ends agree and still may be off: the report says so") {
    auto a = rank_calls(100 * kMsSigned, 40 * kMsSigned, 30, 1 * kMsSigned);
    auto b = rank_calls(100 * kMsSigned + 800 * kUsSigned, 40 * kMsSigned, 30, 1 * kMsSigned); // every end 0.8 ms late
    NodeClock na = node("a", 0, {&a}), nb = node("b", 0, {&b});
    nb.cpu_pressure = 0.42;
    auto al = align_nodes({na, nb});
    CHECK(al[1].offset_ns() == -800 * kUsSigned); // what the ends say: nothing in them tells the delay
    CHECK(*al[1].uncertainty_ns == 0);
    REQUIRE(al[1].cpu_pressure);
    CHECK(*al[1].cpu_pressure == 0.42);
    CHECK(al[1].doubt() == "uncertain: the CPUs were contended (a runnable task waited 42% of the capture, /proc/pressure/cpu), "
                           "so collectives end late by scheduling delays");
    nb.cpu_pressure = 0.02; // a quiet host: trusted
    CHECK(align_nodes({na, nb})[1].doubt().empty());
}

TEST_CASE("cpu pressure: the some line's total") {
    CHECK(parse_cpu_pressure_some_us("some avg10=0.22 avg60=7.98 avg300=16.42 total=10719509427\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") ==
          10719509427u);
    CHECK(!parse_cpu_pressure_some_us(""));
    CHECK(!parse_cpu_pressure_some_us("full avg10=0.00 total=5\n"));
    CHECK(!parse_cpu_pressure_some_us("some avg10=0.22 total=12x\n"));
}

TEST_CASE("median_standard_error: none for fewer than two values; robust to one wild value") {
    CHECK(!median_standard_error({}));
    CHECK(!median_standard_error({5}));
    CHECK(*median_standard_error({10, 10, 10, 10}) == 0);
    // MAD of {0, 10, 20, 30, 10000} is 10: 1.858 × 10 / √5 = 8.3.
    CHECK(*median_standard_error({0, 10, 20, 30, 10000}) == 8);
}

TEST_CASE("align: a node's trace that starts earlier and ends later than the reference's still aligns") {
    // B's capture covers 100 calls, A's only the middle 30: B's calls outside A's span are left
    // out, and no edge call of A drags the median.
    auto b = rank_calls(0, 10 * kMsSigned, 100, 0);
    std::vector<CollectiveCall> a(b.begin() + 35, b.begin() + 65);
    const int64_t error = 3 * kMsSigned;
    std::vector<NodeClock> nodes = {node("a", 0, {&a}), node("b", error, {&b})};
    auto al = align_nodes(nodes);
    CHECK(al[1].clock_offset_ns == error);
    CHECK(al[1].offset_ns() == 0);
    CHECK(al[1].matched == 30);
    CHECK(*al[1].residual_ns == 0);
}

TEST_CASE("align: several ranks per node; a third node aligned to both before it") {
    auto a0 = rank_calls(50 * kMsSigned, 20 * kMsSigned, 40, 5 * kMsSigned, 10 * kUsSigned, 1), a1 = rank_calls(50 * kMsSigned, 20 * kMsSigned, 40, 2 * kMsSigned, 10 * kUsSigned, 2);
    auto b0 = rank_calls(50 * kMsSigned + 1000, 20 * kMsSigned, 40, 1 * kMsSigned, 10 * kUsSigned, 3), b1 = rank_calls(50 * kMsSigned + 1000, 20 * kMsSigned, 40, 3 * kMsSigned, 10 * kUsSigned, 4);
    auto c0 = rank_calls(50 * kMsSigned - 4000, 20 * kMsSigned, 40, 0, 10 * kUsSigned, 5);
    // True offsets: B −1 µs, C +4 µs; the readings say B +4 ms, C −3 ms.
    std::vector<NodeClock> nodes = {node("a", 0, {&a0, &a1}), node("b", 4 * kMsSigned, {&b0, &b1}), node("c", -3 * kMsSigned, {&c0})};
    auto al = align_nodes(nodes);
    CHECK(std::llabs(al[1].offset_ns() - -1000) < 10 * kUsSigned);
    CHECK(std::llabs(al[2].offset_ns() - 4000) < 10 * kUsSigned);
    CHECK(al[1].matched == 80);
    CHECK(al[2].matched >= 38); // an edge end jittered outside the others' span is left out
}

TEST_CASE("align: without collectives in common, by the clocks only; the same host keeps its one clock") {
    auto a = rank_calls(0, 10 * kMsSigned, 10, 0);
    std::vector<CollectiveCall> b = {{"broadcast", 0, 5 * kMsSigned, 0}}; // no broadcast on A
    auto c = rank_calls(0, 10 * kMsSigned, 10, 0);
    std::vector<NodeClock> nodes = {node("a", 100, {&a}), node("b", 700, {&b}), node("a", 900, {&c})};
    auto al = align_nodes(nodes);
    CHECK(al[1].offset_ns() == 600);
    CHECK(al[1].matched == 0);
    CHECK(!al[1].residual_ns);
    CHECK(al[1].method == "clocks only: no collective in common with the nodes before it");
    // Node 3 is on A's host: A's clock, whatever its later reading says (NTP slews the wall clock).
    CHECK(al[2].offset_ns() == 0);
    CHECK(al[2].method == "same host as node 1: one clock");
    CHECK(al[2].matched == 10);
}

TEST_CASE("align: a trace without clock readings starts from the first ends, then the collectives") {
    auto a = rank_calls(1'000 * kMsSigned, 10 * kMsSigned, 20, 0);
    auto b = rank_calls(5 * kMsSigned, 10 * kMsSigned, 20, 0); // the same calls, 995 ms earlier on B's clock
    std::vector<NodeClock> nodes = {node("a", std::nullopt, {&a}), node("b", std::nullopt, {&b})};
    auto al = align_nodes(nodes);
    CHECK(al[1].offset_ns() == 995 * kMsSigned);
    CHECK(al[1].method == "collectives only: the trace has no clock reading");
}

TEST_CASE("shift_calls: both ends move; never below 0") {
    std::vector<CollectiveCall> calls = {{"x", 100, 200, 0}};
    shift_calls(calls, -150);
    CHECK(calls[0].arrival == 0);
    CHECK(calls[0].done == 50);
    shift_calls(calls, 1000);
    CHECK(calls[0].done == 1050);
}
