/* Off-CPU intervals of the tracked tree's main threads: a main thread that goes to sleep
 * (blocks on a lock, a queue, a future, a CUDA sync, I/O) and how long it stays off the CPU,
 * with the native and Python stacks it went to sleep in. A thread preempted while runnable is
 * not blocked: it wants the CPU, and stays CPU time. Shared by BPF and userspace. */
#ifndef GTRACE_OFFCPU_H
#define GTRACE_OFFCPU_H

#include "gtrace/sampling.h"

#define GT_OFFCPU_NATIVE_FRAMES 16 /* the innermost frames name the wait; the Python stack the caller */

struct gt_offcpu_event {
	unsigned char cls;       /* GT_EV_OFFCPU */
	unsigned char py_status; /* enum gt_py_status of the walk at the switch */
	unsigned char pad[2];
	unsigned int pid;
	unsigned int tid;
	int native_bytes;        /* bytes of `native` filled, or a negative error */
	int syscall;             /* the system call it slept in (x86-64 numbers), or -1: none */
	unsigned int pad2;
	unsigned long long off_ns; /* CLOCK_MONOTONIC: switched out, asleep ... */
	unsigned long long on_ns;  /* ... switched back in */
	unsigned long long py_stack; /* id of the Python stack at the switch (gtrace/pystack.h); 0: none */
	unsigned long long native[GT_OFFCPU_NATIVE_FRAMES]; /* innermost first */
};

#endif
