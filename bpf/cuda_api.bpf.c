// SPDX-License-Identifier: GPL-2.0
/* Entry and return uprobes on the CUDA runtime and driver API. One generic program pair serves
 * every probed function: the attach cookie says which API it is and what to capture. Calls from
 * processes outside the tracked tree are dropped at entry. */
#include "common.bpf.h"
#include "gtrace/cuda_api.h"

struct call_key {
	__u32 tid;
	__u32 api;
};

struct call_entry {
	__u64 enter_ns;
	__u64 args[GT_REG_ARGS];
	__u64 stack_args[GT_STACK_ARGS];
	__u64 config[GT_CONFIG_WORDS];
};

/* Calls in flight, by thread and API (an API may call another probed API). LRU so that a
 * thread that dies inside a call cannot leak an entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct call_key);
	__type(value, struct call_entry);
} calls SEC(".maps");

/* Scratch space: call_entry is too big for the BPF stack together with the rest. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct call_entry);
} scratch SEC(".maps");

SEC("uprobe")
int cuda_api_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!gt_is_tracked(pid_tgid >> 32))
		return 0;

	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 caps = GT_COOKIE_CAPS(cookie);
	__u32 zero = 0;
	struct call_entry *entry = bpf_map_lookup_elem(&scratch, &zero);
	if (!entry)
		return 0;

	entry->enter_ns = bpf_ktime_get_ns();
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

	struct call_key key = {.tid = (__u32)pid_tgid, .api = GT_COOKIE_API(cookie)};
	if (bpf_map_update_elem(&calls, &key, entry, BPF_ANY))
		gt_count(GT_CNT_ENTRY_STATE_FULL);
	return 0;
}

static __always_inline void emit_func_name(struct call_entry *entry, __u32 pid, __u32 api,
					   __u32 caps, __u64 handle)
{
	struct gt_func_name_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		gt_count(GT_EV_FUNC_NAME);
		return;
	}
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct call_key key = {.tid = (__u32)pid_tgid, .api = GT_COOKIE_API(cookie)};
	struct call_entry *entry = bpf_map_lookup_elem(&calls, &key);
	if (!entry) {
		if (gt_is_tracked(pid_tgid >> 32))
			gt_count(GT_CNT_RETURN_WITHOUT_ENTRY);
		return 0;
	}

	__u32 caps = GT_COOKIE_CAPS(cookie);
	long long ret = (long long)PT_REGS_RC(ctx);
	__u64 out_value = 0;
	if ((caps & GT_CAP_OUT_PTR_ARG0) && entry->args[0])
		bpf_probe_read_user(&out_value, sizeof(out_value), (void *)entry->args[0]);

	/* Function handles are only named when the lookup succeeded. */
	if ((caps & GT_CAP_OUT_PTR_ARG0) && (caps & GT_CAP_NAME_ARG2 || key.api == GT_API_CU_KERNEL_GET_FUNCTION) &&
	    ret == 0)
		emit_func_name(entry, pid_tgid >> 32, key.api, caps, out_value);

	struct gt_api_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		gt_count(GT_EV_API);
		bpf_map_delete_elem(&calls, &key);
		return 0;
	}
	e->cls = GT_EV_API;
	e->api = key.api;
	e->caps = caps;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->enter_ns = entry->enter_ns;
	e->exit_ns = bpf_ktime_get_ns();
	e->ret = ret;
	__builtin_memcpy(e->args, entry->args, sizeof(e->args));
	__builtin_memcpy(e->stack_args, entry->stack_args, sizeof(e->stack_args));
	__builtin_memcpy(e->config, entry->config, sizeof(e->config));
	e->out_value = out_value;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, gt_submit_flags());
	bpf_map_delete_elem(&calls, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
