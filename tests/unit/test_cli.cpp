// Option values, target checks and output-path checks.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <fstream>

#include "cli/option_values.h"
#include "capture/preflight.h"
#include "output/chrome_trace.h"
#include "output/trace_formats.h"

using namespace gtrace;

namespace {

// Every refusal is a Usage error whose one line names the option and the value.
template <typename T>
void check_refused(const Result<T>& r, const std::string& option, const std::string& limits_text) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::Usage);
    CHECK(r.error().message.find(option) != std::string::npos);
    CHECK(r.error().message.find(limits_text) != std::string::npos);
    CHECK(r.error().message.find('\n') == std::string::npos);
}

} // namespace

TEST_CASE("durations with and without units, from 1ms to 720h; malformed or out of range ones are usage errors") {
    CHECK(*parse_duration("10", "--duration") == Approx(10));
    CHECK(*parse_duration("2.5s", "--duration") == Approx(2.5));
    CHECK(*parse_duration("500ms", "--duration") == Approx(0.5));
    CHECK(*parse_duration("5m", "--duration") == Approx(300));
    CHECK(*parse_duration("1h", "--duration") == Approx(3600));
    CHECK(*parse_duration("1ms", "--delay") == Approx(0.001));
    CHECK(*parse_duration("720h", "--delay") == Approx(720 * 3600));
    for (const char* bad : {"", "abc", "-1", "0", "0.0001", "10x", "nan", "inf", "1e999", "1e3", "721h", "+5", " 5", "5 ",
                            "0x10", "1.", ".5", "1.2.3", "99999999999999999999999999999999999999h",
                            "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                            "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                            "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                            "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000ms"})
        check_refused(parse_duration(bad, "--duration"), "--duration", "from 1ms to 720h");
}

TEST_CASE("--start-at: a UTC time or @seconds, from now to 720h ahead; past, local or malformed times are usage errors") {
    const uint64_t now = 1'795'656'000'000'000'000ull; // 2026-11-26T01:20:00Z
    CHECK(*parse_start_at("2026-11-26T03:00:00Z", now) == 1'795'662'000'000'000'000ull);
    CHECK(*parse_start_at("2026-11-26t03:00:00.25+00:00", now) == 1'795'662'000'250'000'000ull);
    CHECK(*parse_start_at("2028-02-29T00:00:00Z", 1'835'308'800'000'000'000ull) == 1'835'395'200'000'000'000ull); // a leap day
    CHECK(*parse_start_at("@1795656060", now) == 1'795'656'060'000'000'000ull);
    CHECK(*parse_start_at("@1795656000.000000001", now) == now + 1);
    for (const char* bad : {"", "@", "@-5", "@1e9", "@1795656060.", "@1795656060.1234567890", "2026-11-26T03:00:00",
                            "2026-11-26T03:00:00+01:00", "2026-11-26 03:00:00Z", "2026-02-30T03:00:00Z", "2027-02-29T00:00:00Z", "2026-11-26T24:00:00Z",
                            "2026-11-26T03:60:00Z", "2026-11-26T03:00:60Z", "26-11-26T03:00:00Z", "tomorrow"})
        check_refused(parse_start_at(bad, now), "--start-at", "2026-11-26T03:00:00Z");
    check_refused(parse_start_at("2026-11-26T01:19:00Z", now), "--start-at", "60.0 s ago");
    check_refused(parse_start_at("2027-01-01T00:00:00Z", now), "--start-at", "at most 720h from now");
}

TEST_CASE("ring buffer sizes: powers of two from 4K to 2G, checked before multiplying") {
    CHECK(*parse_ring_size("64", "--buffer-size") == (64ull << 20));
    CHECK(*parse_ring_size("512K", "--buffer-size") == (512ull << 10));
    CHECK(*parse_ring_size("4K", "--buffer-size") == 4096);
    CHECK(*parse_ring_size("8KiB", "--buffer-size") == 8192);
    CHECK(*parse_ring_size("1G", "--buffer-size") == (1ull << 30));
    CHECK(*parse_ring_size("2G", "--buffer-size") == (2ull << 30));
    CHECK(*parse_ring_size("2048", "--buffer-size") == (2ull << 30));
    // 17179869184G * 2^30 wraps to 0 in 64 bits; 16777216T is no unit.
    for (const char* bad : {"17179869184G", "18446744073709551616", "99999999999999999999999K", "1K", "2K", "0", "0K", "4G",
                            "3G", "4096", "8G", "-4", "+4", "lots", "", "4 K", "4k", "64MB", "1T"})
        check_refused(parse_ring_size(bad, "--buffer-size"), "--buffer-size", "from 4K to 2G");
    auto odd = parse_ring_size("100M", "--buffer-size");
    check_refused(odd, "--buffer-size", "64M or 128M");
}

TEST_CASE("counts, rates, PIDs and steps: digits only, within their documented limits") {
    CHECK(*parse_max_events("1") == 1);
    CHECK(*parse_max_events("1000000000000") == 1000000000000ull);
    for (const char* bad : {"0", "1000000000001", "18446744073709551616", "-1", " 1", "1e6", "0x10", ""})
        check_refused(parse_max_events(bad), "--max-events", "from 1 to 1000000000000");
    CHECK(*parse_rate("0", "--sample-hz") == 0);
    CHECK(*parse_rate("10000", "--sample-hz") == 10000);
    for (const char* bad : {"10001", "-1", " -1", "4294967396", "18446744073709551617", "1.5", ""})
        check_refused(parse_rate(bad, "--sample-hz"), "--sample-hz", "0 (off) to 10000 Hz");
    CHECK(*parse_py_stacks("all") == 1);
    CHECK(*parse_py_stacks("off") == 0);
    CHECK(*parse_py_stacks("1000000") == 1000000);
    for (const char* bad : {"0", "1000001", "4294967297", "-3", "ALL", ""})
        check_refused(parse_py_stacks(bad), "--py-stacks", "1 to 1000000");
    CHECK(*parse_pid("1") == 1);
    CHECK(*parse_pid("4194304") == 4194304);
    for (const char* bad : {"0", "4194305", "99999999999", "4294967297", "-1", "1x", "", "self"})
        check_refused(parse_pid(bad), "--pid", "1 to 4194304");
    CHECK(*parse_steps("10:20") == std::make_pair(10u, 20u));
    CHECK(*parse_steps("1:1000000") == std::make_pair(1u, 1000000u));
    for (const char* bad : {"5:2", "0:3", "3", "1:1000001", "4294967297:4294967298", "a:b", ":5", "5:", "-1:2", "1:2:3"})
        check_refused(parse_steps(bad), "--steps", "1 <= A <= B <= 1000000");
}

TEST_CASE("gtrace never traces itself; PID 1 and multi-user trees need --system-wide") {
    auto self = check_target(getpid());
    REQUIRE_FALSE(self);
    CHECK(self.error().code == ExitCode::Usage);
    CHECK(self.error().message.find("gtrace itself") != std::string::npos);
    std::atomic<bool> done{false}; // one of gtrace's threads is refused too
    std::atomic<int> live_tid{0};
    std::thread live([&] {
        live_tid = static_cast<int>(gettid());
        while (!done) usleep(1000);
    });
    while (!live_tid) usleep(1000);
    auto thread = check_target(live_tid);
    done = true;
    live.join();
    REQUIRE_FALSE(thread);
    CHECK(thread.error().message.find("gtrace itself") != std::string::npos);

    auto init = check_scope(1, false);
    REQUIRE_FALSE(init);
    CHECK(init.error().code == ExitCode::Usage);
    CHECK(init.error().message.find("--system-wide") != std::string::npos);
    CHECK(check_scope(1, true));
    CHECK(check_scope(getpid(), false)); // one user: a job's tree
}

TEST_CASE("JSON escaping keeps the output valid") {
    std::string out;
    append_json_escaped(out, "a\"b\\c\nd\x01\xff");
    CHECK(out == "a\\\"b\\\\c\\nd\\u0001?");
}

TEST_CASE("the trace writer refuses existing files and unwritable places, and cleans up") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("gtrace-unit-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::string out = (dir / "t.json").string();
    TraceModel model;
    {
        auto w = create_trace_writer({TraceFormat::Json, out}, false, model);
        REQUIRE(w);
        // Unfinished: destroyed without finish() leaves nothing behind.
    }
    CHECK(fs::is_empty(dir));
    {
        auto w = create_trace_writer({TraceFormat::Json, out}, false, model);
        REQUIRE(w);
        REQUIRE((*w)->finish(model, nlohmann::json::object()));
    }
    auto parsed = nlohmann::json::parse(std::ifstream(out));
    CHECK(parsed["traceEvents"].is_array());
    auto exists = create_trace_writer({TraceFormat::Json, out}, false, model);
    REQUIRE_FALSE(exists);
    CHECK(exists.error().code == ExitCode::OutputExists);
    CHECK(create_trace_writer({TraceFormat::Json, out}, true, model));
    auto missing = create_trace_writer({TraceFormat::Json, (dir / "nope" / "t.json").string()}, false, model);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ExitCode::OutputUnwritable);
    fs::remove_all(dir);
}

TEST_CASE("flight recorder windows, memory bounds and slow-step factors: within their limits, usage errors otherwise") {
    CHECK(*parse_flight_window("30s") == Approx(30));
    CHECK(*parse_flight_window("1") == Approx(1));
    CHECK(*parse_flight_window("1h") == Approx(3600));
    for (const char* bad : {"999ms", "61m", "0", "", "-5", "30x"}) {
        INFO(bad);
        auto r = parse_flight_window(bad);
        REQUIRE(!r);
        CHECK(r.error().code == ExitCode::Usage);
    }
    CHECK(*parse_memory_size("512M", "--flight-memory") == (512ull << 20));
    CHECK(*parse_memory_size("16", "--flight-memory") == (16ull << 20));
    CHECK(*parse_memory_size("64G", "--flight-memory") == (64ull << 30));
    CHECK(*parse_memory_size("16384K", "--flight-memory") == (16ull << 20));
    for (const char* bad : {"15M", "65G", "17179869184G", "1T", "", "M"}) {
        INFO(bad);
        CHECK(!parse_memory_size(bad, "--flight-memory"));
    }
    CHECK(*parse_slow_step_factor("2x") == Approx(2));
    CHECK(*parse_slow_step_factor("1.5x") == Approx(1.5));
    CHECK(*parse_slow_step_factor("100") == Approx(100));
    for (const char* bad : {"1x", "1", "0.5x", "101x", "x", "2xx", "2X", "-2x", ""}) {
        INFO(bad);
        CHECK(!parse_slow_step_factor(bad));
    }
}
