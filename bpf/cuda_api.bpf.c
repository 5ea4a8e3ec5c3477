// SPDX-License-Identifier: GPL-2.0
/* Entry and return uprobes on the CUDA runtime and driver API. One generic program pair serves
 * every probed function: the attach cookie says which API it is and what to capture. Calls from
 * processes outside the tracked tree are dropped at entry. */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "gtrace/cuda_api.h"
#include "gtrace/agent.h"

/* Record the Python stack at every Nth call of a thread (0: never). */
const volatile __u32 py_stack_every = 1;

#define GT_MAX_DEPTH 4 /* nested probed calls on one thread (an API calling another) */

struct call_entry {
	__u64 enter_ns;
	__u64 slot_before; /* the thread's agent correlation slot at entry */
	__u32 api;
	__u32 pad;
	__u64 args[GT_REG_ARGS];
	__u64 stack_args[GT_STACK_ARGS];
	__u64 config[GT_CONFIG_WORDS];
};

/* Calls in flight on a thread, innermost last. Task-local storage: no hashing on the hot path,
 * and it goes away with the thread. */
struct thread_calls {
	__u32 depth;
	__u32 comm_sent; /* the thread's name went out with one of its events */
	__u64 py_calls;  /* calls seen from a Python process, for --py-stacks N */
	struct call_entry stack[GT_MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_calls);
} calls SEC(".maps");

/* Per process with an active agent: the address of its gtrace_agent_slots array. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} agent_slots SEC(".maps");

/* The agent's CUPTI callback stores [tid << 32 | correlation id] in the thread's slot when a
 * GPU-work API is entered, inside the call. A slot that changed between entry and return holds
 * this call's correlation id: the exact CPU↔GPU join. */
static __always_inline __u64 agent_slot(__u32 tgid, __u32 tid)
{
	__u64 *base = bpf_map_lookup_elem(&agent_slots, &tgid);
	__u64 v = 0;
	if (base)
		bpf_probe_read_user(&v, sizeof(v), (void *)(*base + (tid % GT_AGENT_SLOTS) * 8));
	return v;
}

/* The agent announces its slots by calling gtrace_agent_announce() in
 * the process, before CUPTI's callbacks start: no call is made before BPF knows where to look. */
SEC("uprobe")
int agent_announce(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!gt_is_tracked(tgid))
		return 0;
	__u64 slots = PT_REGS_PARM1(ctx);
	/* NULL (the agent stopping) is ignored: a call in flight then must still find its slot, and
	 * the slots stay valid (the agent is never unloaded) but are no longer written. Userspace
	 * forgets the process at its exit or exec. */
	if (slots)
		bpf_map_update_elem(&agent_slots, &tgid, &slots, BPF_ANY);
	return 0;
}

SEC("uprobe")
int cuda_api_enter(struct pt_regs *ctx)
{
	if (!gt_is_tracked(bpf_get_current_pid_tgid() >> 32))
		return 0;

	struct thread_calls *tc = bpf_task_storage_get(&calls, bpf_get_current_task_btf(), 0,
						       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tc) {
		gt_count(GT_CNT_ENTRY_STATE_FULL);
		return 0;
	}
	__u32 depth = tc->depth;
	if (depth >= GT_MAX_DEPTH) {
		gt_count(GT_CNT_ENTRY_STATE_FULL);
		return 0;
	}
	struct call_entry *entry = &tc->stack[depth & (GT_MAX_DEPTH - 1)];
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 caps = GT_COOKIE_CAPS(cookie);

	entry->enter_ns = bpf_ktime_get_ns();
	entry->api = GT_COOKIE_API(cookie);
	entry->args[0] = PT_REGS_PARM1(ctx);
	entry->args[1] = PT_REGS_PARM2(ctx);
	entry->args[2] = PT_REGS_PARM3(ctx);
	entry->args[3] = PT_REGS_PARM4(ctx);
	entry->args[4] = PT_REGS_PARM5(ctx);
	entry->args[5] = PT_REGS_PARM6(ctx);
	if (caps & GT_CAP_STACK_ARGS) {
		/* At entry the stack pointer holds the return address; argument 7 follows it. */
		__u64 sp = PT_REGS_SP(ctx);
		if (bpf_probe_read_user(entry->stack_args, sizeof(entry->stack_args), (void *)(sp + 8)))
			__builtin_memset(entry->stack_args, 0, sizeof(entry->stack_args));
	}
	if (caps & GT_CAP_CONFIG_ARG0) {
		if (bpf_probe_read_user(entry->config, sizeof(entry->config), (void *)entry->args[0]))
			__builtin_memset(entry->config, 0, sizeof(entry->config));
	}
	tc->depth = depth + 1;

	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	entry->slot_before = agent_slot(tgid, (__u32)bpf_get_current_pid_tgid());
	struct gt_py_layout *layout = py_stack_every ? bpf_map_lookup_elem(&py_layouts, &tgid) : NULL;
	if (layout && (tc->py_calls++ % py_stack_every) == 0) {
		struct gt_py_stack_event *e = gt_reserve(sizeof(*e), GT_EV_PYSTACK);
		if (!e)
			return 0;
		e->cls = GT_EV_PYSTACK;
		e->pid = tgid;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->enter_ns = entry->enter_ns;
		gt_walk_python(layout, e);
		bpf_ringbuf_submit(e, gt_submit_flags());
	}
	return 0;
}

static __always_inline void emit_func_name(struct call_entry *entry, __u32 pid, __u32 api,
					   __u32 caps, __u64 handle)
{
	struct gt_func_name_event *e = gt_reserve(sizeof(*e), GT_EV_FUNC_NAME);
	if (!e)
		return;
	e->cls = GT_EV_FUNC_NAME;
	e->api = api;
	e->pid = pid;
	e->handle = handle;
	e->source = entry->args[1];
	e->name[0] = 0;
	if (caps & GT_CAP_NAME_ARG2)
		bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)entry->args[2]);
	bpf_ringbuf_submit(e, gt_submit_flags());
}

SEC("uretprobe")
int cuda_api_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 exit_ns = bpf_ktime_get_ns();
	struct thread_calls *tc = bpf_task_storage_get(&calls, bpf_get_current_task_btf(), 0, 0);
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 api = GT_COOKIE_API(cookie);
	if (!tc || tc->depth == 0 || tc->depth > GT_MAX_DEPTH) {
		if (gt_is_tracked(pid_tgid >> 32))
			gt_count(GT_CNT_RETURN_WITHOUT_ENTRY);
		return 0;
	}
	__u32 top = (tc->depth - 1) & (GT_MAX_DEPTH - 1);
	tc->depth = top;
	struct call_entry *entry = &tc->stack[top];
	if (entry->api != api) { /* a return whose entry was not recorded */
		gt_count(GT_CNT_RETURN_WITHOUT_ENTRY);
		return 0;
	}

	__u32 caps = GT_COOKIE_CAPS(cookie);
	long long ret = (long long)PT_REGS_RC(ctx);
	__u64 out_value = 0;
	if ((caps & GT_CAP_OUT_PTR_ARG0) && entry->args[0])
		bpf_probe_read_user(&out_value, sizeof(out_value), (void *)entry->args[0]);

	/* Function handles are only named when the lookup succeeded. */
	if ((caps & GT_CAP_OUT_PTR_ARG0) && (caps & GT_CAP_NAME_ARG2 || api == GT_API_CU_KERNEL_GET_FUNCTION) &&
	    ret == 0)
		emit_func_name(entry, pid_tgid >> 32, api, caps, out_value);

	struct gt_api_event *e = gt_reserve(sizeof(*e), GT_EV_API);
	if (!e)
		return 0;
	e->cls = GT_EV_API;
	e->api = api;
	e->caps = caps;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->enter_ns = entry->enter_ns;
	e->exit_ns = exit_ns;
	e->ret = ret;
	__builtin_memcpy(e->args, entry->args, sizeof(e->args));
	__builtin_memcpy(e->stack_args, entry->stack_args, sizeof(e->stack_args));
	__builtin_memcpy(e->config, entry->config, sizeof(e->config));
	e->out_value = out_value;
	__u64 slot = agent_slot(e->pid, e->tid);
	e->correlation = (slot != entry->slot_before && (slot >> 32) == e->tid) ? (__u32)slot : 0;
	/* The thread's name rides on its first event only: userspace keeps it. */
	if (!tc->comm_sent) {
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		tc->comm_sent = 1;
	} else {
		e->comm[0] = 0;
	}
	bpf_ringbuf_submit(e, gt_submit_flags());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
