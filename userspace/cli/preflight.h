// Checks made before touching the kernel, each with its own exit code and a one-line remedy.
#pragma once
#include <string>

#include "foundation/result.h"

namespace gtrace {

// The PID names a live user-space process (not a kernel thread). Returns its start time, which
// tells it apart from a later process that reuses the PID.
Result<uint64_t> check_target(int pid);
// Root, or CAP_BPF and CAP_PERFMON (and CAP_SYS_PTRACE to read other users' processes).
Result<void> check_privileges();
// Root or CAP_SYS_PTRACE, to read other processes' threads (gtrace dump).
Result<void> check_ptrace_privileges();
// The kernel exposes BTF (GTRACE_KERNEL_BTF overrides the path, for tests of this check).
Result<void> check_btf();
// Seconds from "10", "2.5", "500ms", "5m", "1h"; must be positive.
Result<double> parse_duration(const std::string& text, const std::string& option);
// A sampling rate in Hz: 0 (off) to 10000.
Result<uint32_t> parse_rate(const std::string& text, const std::string& option);
// --py-stacks: "all" -> 1, "off" -> 0, "N" -> N.
Result<uint32_t> parse_py_stacks(const std::string& text);
// Bytes from "64" (MiB), "512K", "64M", "1G".
Result<uint64_t> parse_size_mib(const std::string& text, const std::string& option);

} // namespace gtrace
