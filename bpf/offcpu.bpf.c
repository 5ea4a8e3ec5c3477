// SPDX-License-Identifier: GPL-2.0
/* Blocked is not busy: when a main thread of the tracked tree goes to sleep (sched_switch with
 * a non-running state, not a preemption), remember when and where — its native and Python
 * stacks, taken in its own context, which the switch still is — and when it runs again, send
 * the interval if it lasted at least min_off_ns (shorter ones are counted, with their time). */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "gtrace/offcpu.h"

const volatile __u64 min_off_ns = 20000;

struct asleep {
	__u64 off_ns;
	__u64 py_stack;
	int native_bytes;
	int syscall;
	__u8 py_status;
	__u8 pad[3];
	__u64 native[GT_OFFCPU_NATIVE_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct asleep);
} asleep_since SEC(".maps");

static __always_inline bool tracked_main_thread(struct task_struct *t)
{
	__u32 tgid = BPF_CORE_READ(t, tgid);
	return tgid && BPF_CORE_READ(t, pid) == (pid_t)tgid && gt_is_tracked(tgid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	if (!preempt && BPF_CORE_READ(prev, __state) != 0 && tracked_main_thread(prev)) {
		struct asleep *a = bpf_task_storage_get(&asleep_since, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (a) {
			__u32 tgid = BPF_CORE_READ(prev, tgid);
			a->off_ns = now;
			/* prev is current here: its user stacks are readable */
			a->native_bytes = bpf_get_stack(ctx, a->native, sizeof(a->native), BPF_F_USER_STACK);
			/* The system call names the wait where user stacks lack frame pointers (glibc's). */
			struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
			a->syscall = regs ? (int)BPF_CORE_READ(regs, orig_ax) : -1;
			a->py_stack = 0;
			a->py_status = GT_PY_NONE;
			struct gt_py_layout *layout = bpf_map_lookup_elem(&py_layouts, &tgid);
			if (layout)
				a->py_stack = gt_python_stack(layout, tgid, &a->py_status, NULL);
		}
	}
	struct asleep *a = bpf_task_storage_get(&asleep_since, next, 0, 0);
	if (!a || !a->off_ns)
		return 0;
	__u64 off = a->off_ns;
	a->off_ns = 0;
	if (now - off < min_off_ns) {
		gt_count(GT_CNT_OFFCPU_SHORT);
		__u32 index = GT_CNT_OFFCPU_SHORT_NS;
		__u64 *ns = bpf_map_lookup_elem(&counters, &index);
		if (ns)
			*ns += now - off;
		return 0;
	}
	struct gt_offcpu_event *e = gt_reserve(sizeof(*e), GT_EV_OFFCPU);
	if (!e)
		return 0;
	e->cls = GT_EV_OFFCPU;
	e->py_status = a->py_status;
	e->pid = BPF_CORE_READ(next, tgid);
	e->tid = BPF_CORE_READ(next, pid);
	e->native_bytes = a->native_bytes;
	e->syscall = a->syscall;
	e->off_ns = off;
	e->on_ns = now;
	e->py_stack = a->py_stack;
	__builtin_memcpy(e->native, a->native, sizeof(e->native));
	bpf_ringbuf_submit(e, gt_submit_flags());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
