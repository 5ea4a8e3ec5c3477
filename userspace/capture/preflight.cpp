#include "capture/preflight.h"
#include "foundation/test_hooks.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "discover/proc_tree.h"
#include "foundation/privilege.h"

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

Result<void> check_target_owner(int pid, bool allow_other_users) {
    auto creds = read_credentials(pid);
    if (!creds) return {}; // gone: check_target says so
    const Invoker& who = Privilege::invoker();
    if (allow_other_users && !Privilege::effective_root())
        return make_error(ExitCode::Privileges, "--allow-other-users needs root: a gtrace running on file capabilities traces only "
                                                "the processes of the user who runs it");
    Privilege::acting_on(creds->real_uid());
    if (who.real_root() || allow_other_users || creds->all_uids(who.uid)) return {};
    return make_error(ExitCode::Privileges,
                      fmt::format("PID {} belongs to uid {}, not to uid {} who runs gtrace{}; a privileged gtrace traces only its "
                                  "caller's processes: run it as that user, or as root add --allow-other-users",
                                  pid, creds->real_uid(), who.uid, who.via_sudo ? " through sudo" : ""));
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
                          fmt::format("missing privileges:{}; run gtrace as root (sudo), or give its binary the capabilities "
                                      "for one group of users only: chgrp gtrace-users gtrace && chmod 0750 gtrace && setcap "
                                      "cap_bpf,cap_perfmon,cap_sys_ptrace+ep gtrace (mode 0750: only that group gets BPF through it; it traces "
                                      "only its caller's processes)",
                                      missing));
    return {};
}

Result<void> check_ptrace_privileges() {
    if (geteuid() == 0 || has_capability(CAP_SYS_PTRACE)) return {};
    return make_error(ExitCode::Privileges,
                      "missing privileges: CAP_SYS_PTRACE; run gtrace dump as root (sudo) or grant CAP_SYS_PTRACE");
}

Result<void> check_btf() {
    const char* env = GTRACE_TEST_HOOK("KERNEL_BTF");
    std::string path = env ? env : "/sys/kernel/btf/vmlinux";
    if (access(path.c_str(), R_OK) != 0)
        return make_error(ExitCode::KernelUnsupported,
                          fmt::format("this kernel has no BTF ({} is missing); gtrace needs a kernel built with "
                                      "CONFIG_DEBUG_INFO_BTF=y (most distributions since 2020)",
                                      path));
    return {};
}

} // namespace gtrace
