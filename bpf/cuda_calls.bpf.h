/* The CUDA API probes' work, shared by the two ways they attach: an entry and a return uprobe
 * (cuda_api.bpf.c), or one uprobe session program that runs at both (cuda_api_session.bpf.c,
 * kernel 6.13+: an entry that returns 1 arms no return probe at all).
 *
 * Only the outermost probed call of a thread is traced. In CUDA 13 every runtime call makes its
 * work through the driver's exported functions (cudaLaunchKernel calls cuLaunchKernel), and
 * libraries nest calls too: a nested call adds no Python walk and no event (and, with sessions,
 * no return trap). The GPU work it causes carries the outer call's CUPTI correlation id anyway. */
#ifndef GTRACE_CUDA_CALLS_BPF_H
#define GTRACE_CUDA_CALLS_BPF_H

#include "common.bpf.h"
#include "pystack.bpf.h"
#include "gtrace/cuda_api.h"
#include "gtrace/agent.h"

/* Record the Python stack at every Nth call of a thread (0: never). */
const volatile __u32 py_stack_every = 1;

#define GT_MAX_DEPTH 4 /* probed calls in flight on one thread (classic probes count nested ones) */
#define GT_NESTED 0x80000000u /* call_entry.api: a nested call, only there to pair with its return */

/* The agent's slot: bit 63 while an outermost CUPTI-visible call is in progress on the thread,
 * then the tid, then the call's correlation id (include/gtrace/agent.h). */
#define GT_SLOT_IN_CALL GT_AGENT_SLOT_IN_CALL
#define GT_SLOT_TID(v) GT_AGENT_SLOT_TID(v)

struct call_entry {
	__u64 enter_ns;
	__u64 sp;          /* stack pointer at entry: a later entry above it means this call is over */
	__u64 slot_before; /* the thread's agent correlation slot at entry */
	__u64 slots;       /* where the process's agent slots are (0: no agent at entry) */
	__u64 py_stack;
	__u32 api;         /* enum gt_cuda_api, | GT_NESTED */
	__u8 py_status;
	__u8 pad[3];
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
	__u64 last_stack; /* the Python stack id this thread sent last */
	__u32 own_tid;   /* the thread's id in its own PID namespace, */
	__u32 own_tid_of; /* read while its host tid was this (an exec by another thread changes it) */
	struct call_entry stack[GT_MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_calls);
} calls SEC(".maps");

/* The current thread's id as its own PID namespace numbers it: what the agent's gettid() returns
 * in a container, and so what indexes and names its slots. The host's tid outside containers. */
static __always_inline __u32 own_namespace_tid(struct thread_calls *tc)
{
	__u32 host_tid = (__u32)bpf_get_current_pid_tgid();
	if (tc->own_tid && tc->own_tid_of == host_tid)
		return tc->own_tid;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *p = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(p, level);
	int nr = 0;
	bpf_probe_read_kernel(&nr, sizeof(nr), (void *)p + bpf_core_field_offset(struct pid, numbers) +
							   (level & 31) * bpf_core_type_size(struct upid) +
							   bpf_core_field_offset(struct upid, nr));
	tc->own_tid = nr > 0 ? (__u32)nr : host_tid;
	tc->own_tid_of = host_tid;
	return tc->own_tid;
}

/* Looked up at a call's entry, and again at its return when the agent announced itself during
 * the call (CUDA's initialization starts it inside the process's first CUDA call): the slot then
 * names the outermost call the agent saw inside this one — its nested driver call, which it may
 * have recorded as a call of its own (then userspace drops ours, the same call twice). */
static __always_inline __u64 agent_slots_of(__u32 tgid)
{
	__u64 *base = bpf_map_lookup_elem(&agent_slots, &tgid);
	return base ? *base : 0;
}

static __always_inline __u64 agent_slot(__u64 slots, __u32 tid)
{
	__u64 v = 0;
	if (slots)
		bpf_probe_read_user(&v, sizeof(v), (void *)(slots + (tid % GT_AGENT_SLOTS) * 8));
	return v;
}

/* The CUPTI correlation id of a probed call, from the thread's slot before and after it: the
 * call's own id when an outermost CUPTI callback ran inside it (the slot changed), else the id of
 * the CUPTI call the probed one runs inside (a library's statically linked runtime calling the
 * driver: the slot said "in a call" already at entry). */
static __always_inline __u32 call_correlation(__u64 before, __u64 after, __u32 tid)
{
	if ((__u32)after != (__u32)before && GT_SLOT_TID(after) == tid)
		return (__u32)after;
	if ((before & GT_SLOT_IN_CALL) && GT_SLOT_TID(before) == tid)
		return (__u32)before;
	return 0;
}

/* The agent announces its slots by calling gtrace_agent_announce() in the process, before
 * CUPTI's callbacks start: no call is made before BPF knows where to look. */
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

/* At a probed function's entry. Returns 1 when its return needs no work (session probes then
 * arm no return probe): the process is not traced, or the call is nested in a traced one. */
static __always_inline int gt_call_enter(struct pt_regs *ctx, bool session)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	/* A thread has call state only once its process was tracked, and a process is untracked only
	 * when it is gone: the state found means tracked, without the hash lookup on every call. */
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread_calls *tc = bpf_task_storage_get(&calls, task, 0, 0);
	if (!tc) {
		if (!gt_is_tracked(tgid))
			return 1;
		tc = bpf_task_storage_get(&calls, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!tc) {
			gt_count(GT_CNT_ENTRY_STATE_FULL);
			return 1;
		}
	}
	__u64 sp = PT_REGS_SP(ctx);
	__u32 depth = tc->depth;
	/* Calls whose return was never seen (a longjmp, a return probe that missed) are over once the
	 * stack is back above them: forget them rather than take this call for a nested one. */
	for (int i = 0; i < GT_MAX_DEPTH && depth > 0; i++) {
		if (tc->stack[(depth - 1) & (GT_MAX_DEPTH - 1)].sp > sp)
			break;
		depth--;
	}
	tc->depth = depth;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 api = GT_COOKIE_API(cookie);
	if (depth > 0 && session)
		return 1;
	if (depth >= GT_MAX_DEPTH) {
		gt_count(GT_CNT_ENTRY_STATE_FULL);
		return 1; /* classic probes: the return then finds another api on top and is dropped */
	}
	struct call_entry *entry = &tc->stack[depth & (GT_MAX_DEPTH - 1)];
	entry->sp = sp;
	tc->depth = depth + 1;
	if (depth > 0) { /* classic probes: a marker that its return pops */
		entry->api = api | GT_NESTED;
		return 0;
	}
	__u32 caps = GT_COOKIE_CAPS(cookie);
	entry->enter_ns = bpf_ktime_get_ns();
	entry->api = api;
	entry->args[0] = PT_REGS_PARM1(ctx);
	entry->args[1] = PT_REGS_PARM2(ctx);
	entry->args[2] = PT_REGS_PARM3(ctx);
	entry->args[3] = PT_REGS_PARM4(ctx);
	entry->args[4] = PT_REGS_PARM5(ctx);
	entry->args[5] = PT_REGS_PARM6(ctx);
	if (caps & GT_CAP_STACK_ARGS) {
		/* At entry the stack pointer holds the return address; argument 7 follows it. */
		if (bpf_probe_read_user(entry->stack_args, sizeof(entry->stack_args), (void *)(sp + 8)))
			__builtin_memset(entry->stack_args, 0, sizeof(entry->stack_args));
	}
	if (caps & GT_CAP_CONFIG_ARG0) {
		if (bpf_probe_read_user(entry->config, sizeof(entry->config), (void *)entry->args[0]))
			__builtin_memset(entry->config, 0, sizeof(entry->config));
	}
	entry->slots = agent_slots_of(tgid);
	entry->slot_before = agent_slot(entry->slots, own_namespace_tid(tc));
	entry->py_stack = 0;
	entry->py_status = GT_PY_NONE;
	struct gt_py_layout *layout = py_stack_every ? bpf_map_lookup_elem(&py_layouts, &tgid) : NULL;
	if (layout && (tc->py_calls++ % py_stack_every) == 0)
		entry->py_stack = gt_python_stack(layout, tgid, &entry->py_status, &tc->last_stack);
	return 0;
}

static __always_inline void emit_func_name(struct call_entry *entry, __u32 pid, __u32 api, __u32 caps, __u64 handle)
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

/* At a probed function's return: the event of an outermost call. */
static __always_inline void gt_call_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 exit_ns = bpf_ktime_get_ns();
	struct thread_calls *tc = bpf_task_storage_get(&calls, bpf_get_current_task_btf(), 0, 0);
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 api = GT_COOKIE_API(cookie);
	if (!tc || tc->depth == 0 || tc->depth > GT_MAX_DEPTH) {
		if (gt_is_tracked(pid_tgid >> 32))
			gt_count(GT_CNT_RETURN_WITHOUT_ENTRY);
		return;
	}
	__u32 top = (tc->depth - 1) & (GT_MAX_DEPTH - 1);
	struct call_entry *entry = &tc->stack[top];
	if ((entry->api & ~GT_NESTED) != api) { /* a return whose entry was not recorded */
		gt_count(GT_CNT_RETURN_WITHOUT_ENTRY);
		return;
	}
	tc->depth = top;
	if (entry->api & GT_NESTED)
		return;

	__u32 caps = GT_COOKIE_CAPS(cookie);
	long long ret = (long long)PT_REGS_RC(ctx);
	__u64 out_value = 0;
	if ((caps & GT_CAP_OUT_PTR_ARG0) && entry->args[0])
		bpf_probe_read_user(&out_value, sizeof(out_value), (void *)entry->args[0]);
	/* Function handles are only named when the lookup succeeded. */
	if ((caps & GT_CAP_OUT_PTR_ARG0) && (caps & GT_CAP_NAME_ARG2 || api == GT_API_CU_KERNEL_GET_FUNCTION) && ret == 0)
		emit_func_name(entry, pid_tgid >> 32, api, caps, out_value);

	struct gt_api_event *e = gt_reserve(sizeof(*e), GT_EV_API);
	if (!e)
		return;
	e->cls = GT_EV_API;
	e->api = api;
	e->py_status = entry->py_status;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->enter_ns = entry->enter_ns;
	e->exit_ns = exit_ns;
	e->ret = ret;
	__builtin_memcpy(e->args, entry->args, sizeof(e->args));
	__builtin_memcpy(e->stack_args, entry->stack_args, sizeof(e->stack_args));
	__builtin_memcpy(e->config, entry->config, sizeof(e->config));
	e->out_value = out_value;
	e->py_stack = entry->py_stack;
	__u32 own_tid = own_namespace_tid(tc);
	__u64 slots = entry->slots ? entry->slots : agent_slots_of(pid_tgid >> 32);
	__u64 slot_after = agent_slot(slots, own_tid);
	e->correlation = call_correlation(entry->slot_before, slot_after, own_tid);
	/* The agent recorded this very call itself (its slot names it, marked): userspace drops ours. */
	e->flags = e->correlation && (__u32)slot_after == e->correlation && GT_SLOT_TID(slot_after) == own_tid &&
		   (slot_after & GT_AGENT_SLOT_AGENT_RECORDS) ? GT_API_EV_AGENT_RECORDS : 0;
	/* The thread's name rides on its first event only: userspace keeps it. */
	if (!tc->comm_sent) {
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		tc->comm_sent = 1;
	} else {
		e->comm[0] = 0;
	}
	bpf_ringbuf_submit(e, gt_submit_flags());
}

#endif
