#include "cli/option_values.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace gtrace {
namespace {

bool all_digits(const std::string& text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// Digits only, into a u64: nullopt for anything else, and for a number that does not fit.
std::optional<uint64_t> whole(const std::string& text) {
    if (!all_digits(text)) return std::nullopt;
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return v;
}

Error usage(const std::string& option, const std::string& text, const std::string& remedy) {
    return make_error(ExitCode::Usage, fmt::format("invalid {} '{}': {}", option, text, remedy));
}

} // namespace

Result<uint64_t> parse_whole_number(const std::string& text, const std::string& option, uint64_t min, uint64_t max) {
    auto v = whole(text);
    if (!v || *v < min || *v > max) return usage(option, text, fmt::format("give a whole number from {} to {}", min, max));
    return *v;
}

Result<int> parse_pid(const std::string& text, const std::string& option) {
    auto v = whole(text);
    if (!v || *v < 1 || *v > static_cast<uint64_t>(limits::kMaxPid))
        return usage(option, text, fmt::format("give the PID of a running process (1 to {})", limits::kMaxPid));
    return static_cast<int>(*v);
}

namespace {

// A decimal number (no sign, no exponent), then the rest of the text (its unit).
std::optional<std::pair<double, std::string>> decimal_and_unit(const std::string& text) {
    size_t unit_at = text.find_first_not_of("0123456789.");
    std::string number = text.substr(0, unit_at), unit = unit_at == std::string::npos ? "" : text.substr(unit_at);
    if (number.empty() || number.front() == '.' || number.back() == '.' || number.find('.') != number.rfind('.'))
        return std::nullopt;
    double value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value, std::chars_format::fixed);
    if (ec != std::errc{} || end != number.data() + number.size() || !std::isfinite(value)) return std::nullopt;
    return std::make_pair(value, unit);
}

// A size in MiB ("64"), or with K/M/G (KiB/MiB/GiB), from 1 byte to `max`: nullopt otherwise.
std::optional<uint64_t> size_in_bytes(const std::string& text, uint64_t max) {
    size_t unit_at = text.find_first_not_of("0123456789");
    std::string number = text.substr(0, unit_at), unit = unit_at == std::string::npos ? "" : text.substr(unit_at);
    int shift = -1;
    if (unit.empty() || unit == "M" || unit == "MiB") shift = 20;
    else if (unit == "K" || unit == "KiB") shift = 10;
    else if (unit == "G" || unit == "GiB") shift = 30;
    auto v = whole(number);
    // Compared before multiplying: no product can wrap.
    if (!v || shift < 0 || *v == 0 || *v > (max >> shift)) return std::nullopt;
    return *v << shift;
}

} // namespace

Result<double> parse_duration(const std::string& text, const std::string& option) {
    auto bad = [&] { return usage(option, text, "give a time from 1ms to 720h, such as 10, 2.5, 500ms, 5m or 1h"); };
    auto parsed = decimal_and_unit(text);
    if (!parsed) return bad();
    auto [value, unit] = *parsed;
    double scale = 0;
    if (unit.empty() || unit == "s") scale = 1;
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
    if (scale == 0) return bad();
    double seconds = value * scale; // may be inf for a huge value: the range check refuses it
    if (!std::isfinite(seconds) || seconds < limits::kMinSeconds || seconds > limits::kMaxSeconds) return bad();
    return seconds;
}

Result<uint32_t> parse_rate(const std::string& text, const std::string& option) {
    auto v = whole(text);
    if (!v || *v > limits::kMaxSampleHz)
        return usage(option, text, fmt::format("give a rate from 0 (off) to {} Hz", limits::kMaxSampleHz));
    return static_cast<uint32_t>(*v);
}

Result<uint32_t> parse_py_stacks(const std::string& text) {
    if (text == "all") return 1u;
    if (text == "off") return 0u;
    auto v = whole(text);
    if (!v || *v < 1 || *v > limits::kMaxEvery)
        return usage("--py-stacks", text, fmt::format("give all, off, or N from 1 to {} (every Nth call)", limits::kMaxEvery));
    return static_cast<uint32_t>(*v);
}

Result<uint64_t> parse_ring_size(const std::string& text, const std::string& option) {
    const std::string range = "give a power of two from 4K to 2G, e.g. 64 (MiB), 512K, 1G";
    auto bytes = size_in_bytes(text, limits::kMaxRingBytes);
    if (!bytes || *bytes < limits::kMinRingBytes) return usage(option, text, range);
    if (*bytes & (*bytes - 1)) {
        uint64_t below = uint64_t{1} << (63 - __builtin_clzll(*bytes));
        auto shown = [](uint64_t b) {
            return b >= (1u << 30) ? fmt::format("{}G", b >> 30) : b >= (1u << 20) ? fmt::format("{}M", b >> 20) : fmt::format("{}K", b >> 10);
        };
        // `bytes` is under 2G here, so twice the power below it is at most 2G.
        std::string nearest = fmt::format("{} or {}", shown(below), shown(below * 2));
        return usage(option, text, fmt::format("a BPF ring buffer is a power of two from 4K to 2G; give {}", nearest));
    }
    return *bytes;
}

Result<std::pair<uint32_t, uint32_t>> parse_steps(const std::string& text) {
    auto bad = [&] {
        return usage("--steps", text, fmt::format("give A:B, the first and last step, with 1 <= A <= B <= {}, e.g. --steps 10:20",
                                                  limits::kMaxEvery));
    };
    size_t colon = text.find(':');
    if (colon == std::string::npos) return bad();
    auto first = whole(text.substr(0, colon)), last = whole(text.substr(colon + 1));
    if (!first || !last || *first < 1 || *first > *last || *last > limits::kMaxEvery) return bad();
    return std::make_pair(static_cast<uint32_t>(*first), static_cast<uint32_t>(*last));
}

Result<uint64_t> parse_max_events(const std::string& text) {
    return parse_whole_number(text, "--max-events", 1, limits::kMaxEvents);
}

Result<double> parse_flight_window(const std::string& text) {
    auto seconds = parse_duration(text, "--flight-recorder");
    if (!seconds || *seconds < limits::kMinFlightSeconds || *seconds > limits::kMaxFlightSeconds)
        return usage("--flight-recorder", text, "give the window to keep, from 1s to 1h, such as 30s, 90 or 5m");
    return *seconds;
}

Result<uint64_t> parse_memory_size(const std::string& text, const std::string& option) {
    auto bad = [&] { return usage(option, text, "give a size from 16M to 64G, such as 512M, 2G or 256 (MiB)"); };
    auto bytes = size_in_bytes(text, limits::kMaxFlightBytes);
    if (!bytes || *bytes < limits::kMinFlightBytes) return bad();
    return *bytes;
}

Result<double> parse_slow_step_factor(const std::string& text) {
    auto parsed = decimal_and_unit(text);
    if (!parsed || (parsed->second != "" && parsed->second != "x") || parsed->first <= 1 ||
        parsed->first > limits::kMaxSlowStepFactor)
        return usage("--on-slow-step", text, "give a factor of the median step time above 1 and up to 100, such as 2x or 1.5x");
    return parsed->first;
}

namespace {

// "SS" or "SS.fff…" (up to nanoseconds): the second and its fraction in ns.
std::optional<uint64_t> seconds_ns(std::string_view text, uint64_t max_seconds) {
    auto dot = text.find('.');
    std::string_view whole_part = text.substr(0, dot), fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
    if (whole_part.empty() || (dot != std::string_view::npos && (fraction.empty() || fraction.size() > 9))) return std::nullopt;
    auto s = whole(std::string(whole_part));
    if (!s || *s > max_seconds) return std::nullopt;
    uint64_t ns = 0;
    for (size_t i = 0; i < 9; ++i) {
        char c = i < fraction.size() ? fraction[i] : '0';
        if (c < '0' || c > '9') return std::nullopt;
        ns = ns * 10 + static_cast<uint64_t>(c - '0');
    }
    return *s * 1'000'000'000ull + ns;
}

// YYYY-MM-DDTHH:MM:SS[.f]Z (or +00:00): ns since the epoch, UTC.
std::optional<uint64_t> iso_utc_ns(std::string_view t) {
    if (t.ends_with("Z")) t.remove_suffix(1);
    else if (t.ends_with("+00:00")) t.remove_suffix(6);
    else return std::nullopt;
    if (t.size() < 19 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' || t[16] != ':') return std::nullopt;
    auto field = [&](size_t at, size_t len) { return whole(std::string(t.substr(at, len))); };
    auto y = field(0, 4), mo = field(5, 2), d = field(8, 2), h = field(11, 2), mi = field(14, 2);
    auto sec = seconds_ns(t.substr(17), 59);
    if (!y || !mo || !d || !h || !mi || !sec || *h > 23 || *mi > 59) return std::nullopt;
    std::chrono::year_month_day ymd{std::chrono::year(static_cast<int>(*y)), std::chrono::month(static_cast<unsigned>(*mo)),
                                    std::chrono::day(static_cast<unsigned>(*d))};
    if (!ymd.ok() || *y < 1970) return std::nullopt;
    auto days = static_cast<uint64_t>(std::chrono::sys_days(ymd).time_since_epoch().count());
    return ((days * 24 + *h) * 60 + *mi) * 60'000'000'000ull + *sec;
}

} // namespace

Result<uint64_t> parse_start_at(const std::string& text, uint64_t now_unix_ns) {
    constexpr uint64_t kMaxAheadNs = static_cast<uint64_t>(limits::kMaxSeconds) * 1'000'000'000ull;
    std::optional<uint64_t> at = text.starts_with("@") ? seconds_ns(std::string_view(text).substr(1), 1ull << 40) : iso_utc_ns(text);
    if (!at)
        return usage("--start-at", text, "give a UTC time such as 2026-11-26T03:00:00Z, or @SECONDS since the epoch (date +@%s)");
    if (*at < now_unix_ns)
        return usage("--start-at", text, fmt::format("it was {:.1f} s ago; give a time to come", static_cast<double>(now_unix_ns - *at) / 1e9));
    if (*at - now_unix_ns > kMaxAheadNs) return usage("--start-at", text, "give a time at most 720h from now");
    return *at;
}

} // namespace gtrace
