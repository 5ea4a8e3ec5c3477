// SPDX-License-Identifier: GPL-2.0
/* Follows the tracked process tree: processes forked under it join it, exec is reported so
 * userspace rescans the new image, exited processes leave it. Executable mmaps by tracked
 * processes are reported so newly loaded CUDA libraries get probed at once. */
#include "common.bpf.h"

#define PROT_EXEC 0x4

/* The new image's argv, read here (the exec'ing task is current, its new stack holds the
 * strings): a short-lived program may be gone before userspace could read /proc/PID/cmdline. */
static __always_inline void read_exec_argv(struct gt_proc_event *e, struct task_struct *task)
{
	__u64 start = BPF_CORE_READ(task, mm, arg_start), end = BPF_CORE_READ(task, mm, arg_end);
	__u64 len = end > start ? end - start : 0;
	if (len > GT_PROC_ARGV_LEN - 1)
		len = GT_PROC_ARGV_LEN - 1;
	len &= GT_PROC_ARGV_LEN - 1; /* a bound the verifier sees */
	if (len && bpf_probe_read_user(e->argv, len, (const void *)start) == 0)
		e->argv_len = len;
}

static __always_inline void emit_proc(__u8 kind, __u32 pid, __u32 ppid, int exit_code,
				      struct task_struct *task)
{
	struct gt_proc_event *e = gt_reserve(sizeof(*e), GT_EV_PROC);
	if (!e)
		return;
	e->cls = GT_EV_PROC;
	e->kind = kind;
	e->pid = pid;
	e->ppid = ppid;
	e->exit_code = exit_code;
	e->ts_ns = bpf_ktime_get_ns();
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	e->argv_len = 0;
	if (kind == GT_PROC_EXEC)
		read_exec_argv(e, task);
	/* Process lifecycle events are rare and userspace reacts to them: always wake it. */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_pid = BPF_CORE_READ(child, pid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);

	/* A new thread shares its parent's tgid and is already covered. */
	if (child_pid != child_tgid || !gt_is_tracked(parent_tgid))
		return 0;
	__u32 zero = 0;
	if (bpf_map_update_elem(&tracked, &child_tgid, &zero, BPF_ANY)) {
		gt_count(GT_CNT_TRACKED_FULL);
		return 0;
	}
	emit_proc(GT_PROC_FORK, child_tgid, parent_tgid, 0, child);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (!gt_is_tracked(tgid))
		return 0;
	/* The old image's interpreter and agent are gone; the new image's agent announces later. */
	bpf_map_delete_elem(&py_layouts, &tgid);
	bpf_map_delete_elem(&agent_slots, &tgid);
	emit_proc(GT_PROC_EXEC, tgid, 0, 0, task);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (!gt_is_tracked(tgid))
		return 0;
	/* sched_process_exit fires per thread; the process is gone with its last thread. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	bpf_map_delete_elem(&tracked, &tgid);
	bpf_map_delete_elem(&py_layouts, &tgid);
	bpf_map_delete_elem(&agent_slots, &tgid);
	int exit_code = BPF_CORE_READ(task, exit_code);
	emit_proc(GT_PROC_EXIT, tgid, 0, exit_code, task);
	return 0;
}

SEC("tp/syscalls/sys_enter_mmap")
int on_mmap(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	long prot = (long)ctx->args[2];
	long fd = (long)ctx->args[4];
	if (!(prot & PROT_EXEC) || fd < 0 || !gt_is_tracked(tgid))
		return 0;
	struct gt_mmap_event *e = gt_reserve(sizeof(*e), GT_EV_MMAP);
	if (!e)
		return 0;
	e->cls = GT_EV_MMAP;
	e->pid = tgid;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
