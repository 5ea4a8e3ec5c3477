// SPDX-License-Identifier: GPL-2.0
/* PyTorch record_function ranges without a profiler and without code changes. Python's
 * record_function (and RECORD_USER_SCOPE in C++) constructs an at::RecordFunction with
 * USER_SCOPE and calls end() on it (or destroys it): those two exported functions bound the
 * range, keyed by the object's address. torch 2.x passes the name through the exported
 * record_function_enter_new just before; torch 1.13 never hands it to an exported function
 * unless a profiler is on, so its ranges are named from the Python stack taken at the start.
 *
 * Backward passes: THPEngine_run_backward (libtorch_python) is where Python's backward() and
 * autograd.grad() enter the engine. Its entry and its ret instructions are probed (not a return
 * probe: see gtrace/comm.h), matched by the stack pointer, outermost call per thread only.
 *
 * Autograd links (--autograd-links): the ret of at::sequence_number::get_and_increment hands a
 * forward op's new node its number (rax) — sent with the Python stack of the op; the entry of
 * Engine::evaluate_function runs a node (its Node* the third argument, the number in it) and its
 * rets end it — sent with the stack pointer, which pairs them (userspace keeps the nesting). */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "gtrace/torch_ranges.h"

#define GT_MAX_OPEN_RANGES 16384

struct open_key {
	__u32 tgid;
	__u32 pad;
	__u64 object; /* the at::RecordFunction */
};

struct open_range {
	__u64 start_ns;
	__u64 py_stack;
	__u32 tid;
	__u8 named;
	__u8 py_status;
	__u8 pad[2];
	char name[GT_RANGE_NAME_LEN];
};

/* Ranges begun and not ended. LRU: one whose end is never seen (gtrace detached meanwhile)
 * cannot fill the map for good. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GT_MAX_OPEN_RANGES);
	__type(key, struct open_key);
	__type(value, struct open_range);
} open_ranges SEC(".maps");

/* The name record_function_enter_new received, waiting for the RecordFunction it constructs
 * next on the same thread. */
struct pending_name {
	__u32 valid;
	__u32 pad;
	char name[GT_RANGE_NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending_name);
} pending_names SEC(".maps");

/* A zeroed value to insert from: open_range is too big for the BPF stack with the rest. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct open_range);
} scratch SEC(".maps");

/* The thread's open backward pass. */
struct open_backward {
	__u64 sp; /* at the entry: where the return address is; 0: none open */
	__u64 start_ns;
	__u64 py_stack;
	__u8 py_status;
	__u8 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct open_backward);
} backward_threads SEC(".maps");

/* libstdc++'s std::string (C++11 ABI) starts with {char *data; size_t length}. */
static __always_inline void remember_name(__u64 string_addr)
{
	struct pending_name *p = bpf_task_storage_get(&pending_names, bpf_get_current_task_btf(), 0,
						      BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return;
	__u64 str[2] = {};
	p->valid = 0;
	if (bpf_probe_read_user(str, sizeof(str), (void *)string_addr))
		return;
	__u64 len = str[1];
	if (len >= GT_RANGE_NAME_LEN)
		len = GT_RANGE_NAME_LEN - 1;
	if (bpf_probe_read_user(p->name, len & (GT_RANGE_NAME_LEN - 1), (void *)str[0]))
		return;
	p->name[len & (GT_RANGE_NAME_LEN - 1)] = 0;
	p->valid = 1;
}

static __always_inline void begin_range(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 py_stack, __u8 py_status)
{
	__u32 zero = 0;
	struct open_range *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return;
	r->start_ns = bpf_ktime_get_ns();
	r->tid = tid;
	r->named = 0;
	r->name[0] = 0;
	struct pending_name *p = bpf_task_storage_get(&pending_names, bpf_get_current_task_btf(), 0, 0);
	if (p && p->valid) {
		__builtin_memcpy(r->name, p->name, sizeof(r->name));
		r->named = 1;
		p->valid = 0;
	}
	r->py_stack = py_stack;
	r->py_status = py_status;
	struct open_key key = {.tgid = tgid, .object = PT_REGS_PARM1(ctx)};
	if (bpf_map_update_elem(&open_ranges, &key, r, BPF_ANY))
		gt_count(GT_CNT_RANGES_OPEN_FULL);
}

/* A range event reserved with every field set: unnamed, no stack, begun and ended now. */
static __always_inline struct gt_torch_range_event *new_range_event(__u8 kind, __u32 tgid, __u32 tid, __u64 sequence_nr, __u64 sp)
{
	struct gt_torch_range_event *e = gt_reserve(sizeof(*e), GT_EV_TORCH_RANGE);
	if (!e)
		return NULL;
	e->cls = GT_EV_TORCH_RANGE;
	e->named = 0;
	e->kind = kind;
	e->pid = tgid;
	e->tid = tid;
	e->pad2 = 0;
	e->start_ns = e->end_ns = bpf_ktime_get_ns();
	e->py_stack = 0;
	e->py_status = GT_PY_NONE;
	e->sequence_nr = sequence_nr;
	e->sp = sp;
	e->name[0] = 0;
	return e;
}

static __always_inline void end_range(__u32 tgid, __u64 object)
{
	struct open_key key = {.tgid = tgid, .object = object};
	struct open_range *r = bpf_map_lookup_elem(&open_ranges, &key);
	if (!r)
		return; /* not a user range, begun before attach, or already ended (end() then ~) */
	struct gt_torch_range_event *e = new_range_event(GT_RANGE_USER, tgid, r->tid, 0, 0);
	if (e) {
		e->named = r->named;
		e->start_ns = r->start_ns;
		e->py_stack = r->py_stack;
		e->py_status = r->py_status;
		__builtin_memcpy(e->name, r->name, sizeof(e->name));
		bpf_ringbuf_submit(e, gt_submit_flags());
	}
	bpf_map_delete_elem(&open_ranges, &key);
}

/* A backward pass's begin (end_ns 0) or whole span; named by userspace. */
static __always_inline void emit_backward(__u8 kind, __u32 tgid, __u32 tid, const struct open_backward *b, __u64 end_ns)
{
	struct gt_torch_range_event *e = new_range_event(kind, tgid, tid, 0, 0);
	if (!e)
		return;
	e->start_ns = b->start_ns;
	e->end_ns = end_ns;
	e->py_stack = b->py_stack;
	e->py_status = b->py_status;
	bpf_ringbuf_submit(e, gt_submit_flags());
}

static __always_inline void backward_returned(__u32 tgid, __u32 tid, __u64 sp)
{
	struct open_backward *b = bpf_task_storage_get(&backward_threads, bpf_get_current_task_btf(), 0, 0);
	if (!b || b->sp != sp)
		return; /* a nested pass's return, or one begun before attach */
	emit_backward(GT_RANGE_BACKWARD, tgid, tid, b, bpf_ktime_get_ns());
	b->sp = 0;
}

static __always_inline void forward_op(struct pt_regs *ctx, __u32 tgid, __u32 tid)
{
	struct gt_py_layout *layout = bpf_map_lookup_elem(&py_layouts, &tgid);
	if (!layout)
		return; /* no Python here (an engine thread making a node in double backward): no source to give */
	__u8 py_status = GT_PY_NONE;
	__u64 py_stack = gt_python_stack(layout, tgid, &py_status, NULL);
	if (!py_stack)
		return;
	struct gt_torch_range_event *e = new_range_event(GT_RANGE_FORWARD_OP, tgid, tid, PT_REGS_RC(ctx), 0);
	if (!e)
		return;
	e->py_stack = py_stack;
	e->py_status = py_status;
	bpf_ringbuf_submit(e, gt_submit_flags());
}

static __always_inline void node_begun(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 sp, __u64 offset)
{
	__u64 sequence_nr = 0;
	if (!offset)
		offset = GT_TORCH_NODE_SEQUENCE_OFFSET;
	if (bpf_probe_read_user(&sequence_nr, sizeof(sequence_nr), (void *)(PT_REGS_PARM3(ctx) + offset)))
		return;
	struct gt_torch_range_event *e = new_range_event(GT_RANGE_NODE_BEGUN, tgid, tid, sequence_nr, sp);
	if (e)
		bpf_ringbuf_submit(e, gt_submit_flags());
}

/* One program for every libtorch site; the attach cookie says which (enum gt_torch_site). */
SEC("uprobe")
int torch_range_probe(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	if (!gt_is_tracked(tgid))
		return 0;
	__u32 tid = (__u32)pid_tgid;
	__u64 cookie = bpf_get_attach_cookie(ctx), sp = PT_REGS_SP(ctx);
	__u64 site = cookie & GT_TORCH_SITE_MASK;
	struct open_backward *b = NULL;
	switch (site) {
	case GT_TORCH_RANGE_NAME:
		/* Returns an intrusive_ptr in memory: the hidden result pointer comes first. */
		remember_name(PT_REGS_PARM2(ctx));
		return 0;
	case GT_TORCH_RANGE_END:
		end_range(tgid, PT_REGS_PARM1(ctx));
		return 0;
	case GT_TORCH_BACKWARD_RET:
		backward_returned(tgid, tid, sp);
		return 0;
	case GT_TORCH_SEQUENCE_RET:
		forward_op(ctx, tgid, tid);
		return 0;
	case GT_TORCH_NODE:
		node_begun(ctx, tgid, tid, sp, cookie >> 32);
		return 0;
	case GT_TORCH_NODE_RET: {
		struct gt_torch_range_event *e = new_range_event(GT_RANGE_NODE_ENDED, tgid, tid, 0, sp);
		if (e)
			bpf_ringbuf_submit(e, gt_submit_flags());
		return 0;
	}
	case GT_TORCH_RANGE_BEGIN:
		if ((int)PT_REGS_PARM2(ctx) != GT_TORCH_USER_SCOPE)
			return 0;
		break;
	case GT_TORCH_BACKWARD:
		b = bpf_task_storage_get(&backward_threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!b || (b->sp && b->sp > sp))
			return 0; /* nested in the thread's open pass (a reentrant backward) */
		break;
	default:
		return 0;
	}
	/* A range or a pass begins: the Python stack that began it, walked once for both kinds. */
	__u64 py_stack = 0;
	__u8 py_status = GT_PY_NONE;
	struct gt_py_layout *layout = bpf_map_lookup_elem(&py_layouts, &tgid);
	if (layout)
		py_stack = gt_python_stack(layout, tgid, &py_status, NULL);
	if (!b) {
		begin_range(ctx, tgid, tid, py_stack, py_status);
		return 0;
	}
	b->sp = sp;
	b->start_ns = bpf_ktime_get_ns();
	b->py_stack = py_stack;
	b->py_status = py_status;
	emit_backward(GT_RANGE_BACKWARD_BEGUN, tgid, tid, b, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
