// Option values and output-path checks.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/preflight.h"
#include "output/chrome_trace.h"

using namespace gtrace;

TEST_CASE("durations with and without units; malformed ones are usage errors") {
    CHECK(*parse_duration("10", "--duration") == Approx(10));
    CHECK(*parse_duration("2.5s", "--duration") == Approx(2.5));
    CHECK(*parse_duration("500ms", "--duration") == Approx(0.5));
    CHECK(*parse_duration("5m", "--duration") == Approx(300));
    CHECK(*parse_duration("1h", "--duration") == Approx(3600));
    for (const char* bad : {"", "abc", "-1", "0", "10x", "nan", "1e999"}) {
        auto r = parse_duration(bad, "--duration");
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ExitCode::Usage);
        CHECK(r.error().message.find("--duration") != std::string::npos);
    }
}

TEST_CASE("buffer sizes") {
    CHECK(*parse_size_mib("64", "--buffer-size") == (64ull << 20));
    CHECK(*parse_size_mib("512K", "--buffer-size") == (512ull << 10));
    CHECK(*parse_size_mib("1G", "--buffer-size") == (1ull << 30));
    CHECK_FALSE(parse_size_mib("-4", "--buffer-size"));
    CHECK_FALSE(parse_size_mib("lots", "--buffer-size"));
    CHECK_FALSE(parse_size_mib("8G", "--buffer-size"));
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
    {
        auto w = ChromeTraceWriter::create(out, false);
        REQUIRE(w);
        // Unfinished: destroyed without finish() leaves nothing behind.
    }
    CHECK(fs::is_empty(dir));
    {
        auto w = ChromeTraceWriter::create(out, false);
        REQUIRE(w);
        TraceModel model;
        REQUIRE(w->finish(model, nlohmann::json::object()));
    }
    auto parsed = nlohmann::json::parse(std::ifstream(out));
    CHECK(parsed["traceEvents"].is_array());
    auto exists = ChromeTraceWriter::create(out, false);
    REQUIRE_FALSE(exists);
    CHECK(exists.error().code == ExitCode::OutputExists);
    CHECK(ChromeTraceWriter::create(out, true));
    auto missing = ChromeTraceWriter::create((dir / "nope" / "t.json").string(), false);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ExitCode::OutputUnwritable);
    fs::remove_all(dir);
}
