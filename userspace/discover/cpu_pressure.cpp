#include "discover/cpu_pressure.h"

#include "foundation/input_file.h"
#include "foundation/numbers.h"

namespace gtrace {

std::optional<uint64_t> parse_cpu_pressure_some_us(std::string_view text) {
    // "some avg10=0.22 avg60=7.98 avg300=16.42 total=10719509427\nfull ..."
    if (!text.starts_with("some ")) return std::nullopt;
    std::string_view line = text.substr(0, text.find('\n'));
    auto at = line.find(" total=");
    if (at == std::string_view::npos) return std::nullopt;
    return parse_decimal<uint64_t>(line.substr(at + 7));
}

std::optional<uint64_t> cpu_pressure_some_us() {
    constexpr size_t kMaxBytes = 4096;
    return parse_cpu_pressure_some_us(read_input_file("/proc/pressure/cpu", kMaxBytes));
}

} // namespace gtrace
