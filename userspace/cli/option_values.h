// Values of numeric command-line options, parsed strictly (digits only: no sign, no spaces, no
// hex) and range-checked without arithmetic that can wrap. Each error is a Usage error whose one
// line names the option, the value and the documented limits (docs/usage.md, --help).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "foundation/result.h"

namespace gtrace {

namespace limits {
constexpr int kMaxPid = 1 << 22;                         // PID_MAX_LIMIT on 64-bit Linux
constexpr double kMinSeconds = 0.001, kMaxSeconds = 30 * 24 * 3600.0; // --duration, --delay: 1ms to 720h
constexpr uint64_t kMinRingBytes = 4096;                 // one page: the kernel's smallest ring buffer
constexpr uint64_t kMaxRingBytes = 1ull << 31;           // the largest power of two a u32 max_entries holds
constexpr uint64_t kMaxEvents = 1'000'000'000'000ull;    // --max-events
constexpr uint32_t kMaxSampleHz = 10000;                 // --sample-hz
constexpr uint32_t kMaxEvery = 1'000'000;                // --py-stacks N, --steps A:B
constexpr double kMinFlightSeconds = 1, kMaxFlightSeconds = 3600; // --flight-recorder: 1s to 1h
constexpr uint64_t kMinFlightBytes = 16ull << 20, kMaxFlightBytes = 64ull << 30; // --flight-memory: 16M to 64G
constexpr double kMaxSlowStepFactor = 100;               // --on-slow-step: above 1, up to 100x
} // namespace limits

// A whole number from `min` to `max`: digits only, no sign.
Result<uint64_t> parse_whole_number(const std::string& text, const std::string& option, uint64_t min, uint64_t max);
// --pid: 1 to 4194304.
Result<int> parse_pid(const std::string& text, const std::string& option = "--pid");
// Seconds from "10", "2.5", "500ms", "5m", "1h": 1 ms to 720 h.
Result<double> parse_duration(const std::string& text, const std::string& option);
// A sampling rate in Hz: 0 (off) to 10000.
Result<uint32_t> parse_rate(const std::string& text, const std::string& option);
// --py-stacks: "all" -> 1, "off" -> 0, "N" (1 to 1000000) -> N.
Result<uint32_t> parse_py_stacks(const std::string& text);
// --buffer-size: bytes from "64" (MiB), "512K", "64M", "1G" (or KiB/MiB/GiB): a power of two
// from 4K to 2G, as the kernel requires of a BPF ring buffer.
Result<uint64_t> parse_ring_size(const std::string& text, const std::string& option);
// --steps A:B: 1 <= A <= B <= 1000000.
Result<std::pair<uint32_t, uint32_t>> parse_steps(const std::string& text);
// --max-events: 1 to 10^12.
Result<uint64_t> parse_max_events(const std::string& text);
// --flight-recorder: a window from 1 s to 1 h, as parse_duration reads it (30s, 5m, 1h).
Result<double> parse_flight_window(const std::string& text);
// --flight-memory: bytes from "512M", "2G", "256" (MiB) or with KiB/MiB/GiB: 16M to 64G.
Result<uint64_t> parse_memory_size(const std::string& text, const std::string& option);
// --on-slow-step: a factor above 1 and up to 100, with or without an x: 2x, 1.5x, 3.
Result<double> parse_slow_step_factor(const std::string& text);
// --start-at: a UTC wall-clock time, 2026-11-26T03:00:00Z (fraction of a second allowed) or
// @SECONDS since the epoch, from `now_unix_ns` to 720 h after it; its CLOCK_REALTIME in ns.
Result<uint64_t> parse_start_at(const std::string& text, uint64_t now_unix_ns);

} // namespace gtrace
