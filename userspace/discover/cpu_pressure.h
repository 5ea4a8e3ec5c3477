// How contended the host's CPUs are, from the kernel's pressure stall information
// (/proc/pressure/cpu, Documentation/accounting/psi.rst): "some total" counts the microseconds
// in which at least one runnable task waited for a CPU. Over a capture, its share of the wall
// time says whether the traced threads could run when woken — on a contended host a rank returns
// from a collective late by a scheduling delay, which the alignment of several nodes must know.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gtrace {

// The "some" line's total (µs) of a /proc/pressure/cpu text; nullopt when it has none.
std::optional<uint64_t> parse_cpu_pressure_some_us(std::string_view text);
// From the running kernel; nullopt without PSI (CONFIG_PSI off, or psi=0).
std::optional<uint64_t> cpu_pressure_some_us();

} // namespace gtrace
