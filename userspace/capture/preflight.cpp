#include "capture/preflight.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "discover/proc_tree.h"

namespace gtrace {

Result<uint64_t> check_target(int pid) {
    if (pid <= 0) return make_error(ExitCode::Usage, fmt::format("invalid --pid {}: give the PID of a running process", pid));
    // Tracing itself would trace its own reads of the trace; ptrace would stop its own threads.
    if (pid == getpid() || access(fmt::format("/proc/self/task/{}", pid).c_str(), F_OK) == 0)
        return make_error(ExitCode::Usage, fmt::format("--pid {} is gtrace itself; give the PID of the job to trace (e.g. torchrun's)", pid));
    auto st = read_proc_stat(pid);
    if (!st)
        return make_error(ExitCode::NoSuchProcess,
                          fmt::format("no process with PID {}; gtrace ps lists the jobs gtrace can attach to", pid));
    if (st->is_kernel_thread())
        return make_error(ExitCode::KernelThread,
                          fmt::format("PID {} ({}) is a kernel thread; give the PID of a user process such as torchrun", pid,
                                      st->comm));
    if (st->state == 'Z')
        return make_error(ExitCode::ProcessExited, fmt::format("PID {} has already exited (zombie); nothing to trace", pid));
    return st->start_time_ticks;
}

Result<void> check_scope(int pid, bool system_wide) {
    if (system_wide) return {};
    if (pid == 1)
        return make_error(ExitCode::Usage, "--pid 1 is every process on this host (init): all would be traced and get the GPU "
                                           "agent; give the job's PID (e.g. torchrun's), or add --system-wide to mean it");
    std::set<uint32_t> uids;
    for (int p : list_tree(pid, getpid()))
        if (auto uid = read_real_uid(p)) uids.insert(*uid);
    if (uids.size() > 1)
        return make_error(ExitCode::Usage,
                          fmt::format("the tree of PID {} holds processes of {} users (UIDs {}): it looks like a whole host or a "
                                      "shared service, not one job; give the job's PID, or add --system-wide to mean it",
                                      pid, uids.size(), fmt::join(uids, ", ")));
    return {};
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

} // namespace gtrace
