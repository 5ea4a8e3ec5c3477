#include "cli/preflight.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

#include "discover/proc_tree.h"

namespace gtrace {

Result<uint64_t> check_target(int pid) {
    if (pid <= 0) return make_error(ExitCode::Usage, fmt::format("invalid --pid {}: give the PID of a running process", pid));
    auto st = read_proc_stat(pid);
    if (!st)
        return make_error(ExitCode::NoSuchProcess,
                          fmt::format("no process with PID {}; check the PID (e.g. pgrep -f torchrun)", pid));
    if (st->is_kernel_thread())
        return make_error(ExitCode::KernelThread,
                          fmt::format("PID {} ({}) is a kernel thread; give the PID of a user process such as torchrun", pid,
                                      st->comm));
    if (st->state == 'Z')
        return make_error(ExitCode::ProcessExited, fmt::format("PID {} has already exited (zombie); nothing to trace", pid));
    return st->start_time_ticks;
}

namespace {

// Whether this process holds `cap` in its effective set.
bool has_capability(int cap) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    return syscall(SYS_capget, &header, data) == 0 && ((data[cap / 32].effective >> (cap % 32)) & 1u);
}

} // namespace

Result<void> check_privileges() {
    if (geteuid() == 0) return {};
    auto has = has_capability;
    std::string missing;
    if (!has(CAP_BPF)) missing += " CAP_BPF";
    if (!has(CAP_PERFMON)) missing += " CAP_PERFMON";
    if (!missing.empty())
        return make_error(ExitCode::Privileges,
                          fmt::format("missing privileges:{}; run gtrace as root (sudo) or grant CAP_BPF and CAP_PERFMON "
                                      "(setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep gtrace)",
                                      missing));
    return {};
}

Result<void> check_ptrace_privileges() {
    if (geteuid() == 0 || has_capability(CAP_SYS_PTRACE)) return {};
    return make_error(ExitCode::Privileges,
                      "missing privileges: CAP_SYS_PTRACE; run gtrace dump as root (sudo) or grant CAP_SYS_PTRACE");
}

Result<void> check_btf() {
    const char* env = getenv("GTRACE_KERNEL_BTF");
    std::string path = env ? env : "/sys/kernel/btf/vmlinux";
    if (access(path.c_str(), R_OK) != 0)
        return make_error(ExitCode::KernelUnsupported,
                          fmt::format("this kernel has no BTF ({} is missing); gtrace needs a kernel built with "
                                      "CONFIG_DEBUG_INFO_BTF=y (most distributions since 2020)",
                                      path));
    return {};
}

Result<double> parse_duration(const std::string& text, const std::string& option) {
    auto bad = [&] {
        return make_error(ExitCode::Usage, fmt::format("invalid {} '{}': give a positive time such as 10, 2.5, 500ms, 5m or 1h",
                                                       option, text));
    };
    if (text.empty()) return bad();
    char* end = nullptr;
    errno = 0;
    double value = strtod(text.c_str(), &end);
    if (end == text.c_str() || errno != 0 || !std::isfinite(value)) return bad();
    std::string unit(end);
    double scale = 0;
    if (unit.empty() || unit == "s") scale = 1;
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
    if (scale == 0 || value <= 0) return bad();
    return value * scale;
}

Result<uint32_t> parse_rate(const std::string& text, const std::string& option) {
    char* end = nullptr;
    errno = 0;
    unsigned long n = strtoul(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || *end || errno || n > 10000)
        return make_error(ExitCode::Usage, fmt::format("invalid {} '{}': give a rate from 0 (off) to 10000 Hz", option, text));
    return static_cast<uint32_t>(n);
}

Result<uint32_t> parse_py_stacks(const std::string& text) {
    if (text == "all") return 1u;
    if (text == "off") return 0u;
    char* end = nullptr;
    errno = 0;
    unsigned long n = strtoul(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || *end || errno || n == 0 || n > 1000000)
        return make_error(ExitCode::Usage, fmt::format("invalid --py-stacks '{}': give all, off, or N (every Nth call)", text));
    return static_cast<uint32_t>(n);
}

Result<uint64_t> parse_size_mib(const std::string& text, const std::string& option) {
    char* end = nullptr;
    errno = 0;
    unsigned long long value = strtoull(text.c_str(), &end, 10);
    std::string unit(end ? end : "");
    uint64_t scale = 0;
    if (unit.empty() || unit == "M" || unit == "MiB") scale = 1ull << 20;
    else if (unit == "K" || unit == "KiB") scale = 1ull << 10;
    else if (unit == "G" || unit == "GiB") scale = 1ull << 30;
    if (text.empty() || text[0] == '-' || end == text.c_str() || errno || scale == 0 || value == 0 ||
        value * scale > (4ull << 30))
        return make_error(ExitCode::Usage,
                          fmt::format("invalid {} '{}': give a size between 4K and 4G, e.g. 64 (MiB), 512K, 1G", option, text));
    return value * scale;
}

} // namespace gtrace
