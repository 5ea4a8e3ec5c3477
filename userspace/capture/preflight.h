// Checks made before touching the kernel, each with its own exit code and a one-line remedy.
#pragma once
#include <string>

#include "foundation/result.h"

namespace gtrace {

// The PID names a live user-space process (not a kernel thread, not gtrace itself or one of its
// threads). Returns its start time, which tells it apart from a later process that reuses the PID.
Result<uint64_t> check_target(int pid);
// Without --system-wide, a tree that is the whole host is refused (Usage): PID 1 of gtrace's PID
// namespace, or a tree whose processes belong to more than one user (real UID) — init, sshd,
// a container runtime — rather than one job's.
Result<void> check_scope(int pid, bool system_wide);
// Caller against target, decided before anything reads gtrace's environment: root acting on
// another user's process enters the privileged mode (foundation/privilege.h); a caller that is
// not root (file capabilities) or came through sudo traces only its own user's processes, unless
// --allow-other-users (`allow_other_users`), which only root (sudo included) may give.
// Privileges (exit 6) when refused.
Result<void> check_target_owner(int pid, bool allow_other_users);
// Root, or CAP_BPF and CAP_PERFMON (and CAP_SYS_PTRACE to read other users' processes).
Result<void> check_privileges();
// Root or CAP_SYS_PTRACE, to read other processes' threads (gtrace dump).
Result<void> check_ptrace_privileges();
// The kernel exposes BTF (the test hook GTRACE_TEST_KERNEL_BTF overrides the path, for tests of this check).
Result<void> check_btf();
} // namespace gtrace
