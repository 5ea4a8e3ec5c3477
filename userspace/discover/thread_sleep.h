// How long a thread has been asleep — `gtrace dump`'s "ranks 0-6 wait in all_reduce (for 212 s,
// asleep)": for a thread sleeping now (state S or D), the time since it last ran, by the
// scheduler's own clock: /proc/PID/task/TID/sched's se.exec_start (when it last ran) against the
// same per-CPU clock read now on the CPU it last ran on (gtrace's thread moved there for the
// read: the CPUs' task clocks drift apart by tenths of a second over a day). Read before anything
// stops the thread: a ptrace stop wakes it. None for a running thread (a spin-wait, a busy loop)
// or where the kernel has no /proc/PID/sched (built without CONFIG_SCHED_DEBUG), nor for a thread
// whose se.exec_start is 0 (moved to another CPU and not run since: not known).
#pragma once
#include <cstdint>
#include <unordered_map>

namespace gtrace {

// Seconds asleep by TID, for the threads of `pid` asleep now.
std::unordered_map<uint32_t, double> asleep_seconds(int pid);

} // namespace gtrace
