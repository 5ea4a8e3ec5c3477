// SPDX-License-Identifier: GPL-2.0
/* c10d collectives and the waits on them, and NCCL's API calls. A backend's collective method (ProcessGroupGloo::
 * allreduce, …) enqueues the work and returns a Work; the caller blocks in Work::wait until
 * every rank took part (gloo on the CPU; NCCL only makes the stream wait). Probes on the entry
 * and on the ret instructions of both give the call and the wait, per thread; the Work's
 * address pairs a wait with the collective that made it, so the wait names it.
 *
 * A call is matched to its return by the stack pointer: at the entry and at the ret it points
 * at the same return address. Only the outermost call of a kind counts (an override may call
 * the base class's wait); one left open by an exception is replaced by the thread's next call
 * at the same depth or above, whose frame could not exist were the old one still live. */
#include "common.bpf.h"
#include "gtrace/comm.h"

#define GT_MAX_OPEN_WORKS 16384

struct open_call {
	__u64 sp; /* at the entry: where the return address is; 0: none open */
	__u64 start_ns;
	__u64 work; /* a wait's Work (this) */
	__u64 group; /* a call's backend object (this) */
	__u8 op, backend, returns_void, pad[5];
};

/* An NCCL API call between its entry and its return: what its arguments said. */
struct open_nccl {
	__u64 sp; /* 0: none open */
	__u64 start_ns;
	__u64 count, stream, comm;
	__u64 comm_out; /* comm init: where the new communicator is written */
	__s32 peer;
	__u8 api, datatype, redop, group_depth;
};

struct thread_state {
	struct open_call call, wait;
	struct open_nccl nccl;
	__u32 nccl_group_depth; /* ncclGroupStart calls not yet ended on this thread */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} comm_threads SEC(".maps");

struct work_key {
	__u32 tgid;
	__u32 pad;
	__u64 work;
};

struct open_work {
	__u64 issued_ns;
	__u64 group;
	__u8 op, backend, pad[6];
};

/* Works issued and not yet waited for. LRU: one never waited on (NCCL's, freed unwaited)
 * cannot fill the map for good. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GT_MAX_OPEN_WORKS);
	__type(key, struct work_key);
	__type(value, struct open_work);
} open_works SEC(".maps");

/* A collective event with what every kind has, the rest zero (NCCL's fields: none); null when
 * the ring has no room (counted). The caller fills in its own and submits it. */
static __always_inline struct gt_collective_event *new_event(__u8 phase, __u8 op, __u8 backend, __u32 tgid, __u32 tid, __u64 start)
{
	/* NCCL's calls are a class of their own: a loss of them does not make c10d's counts incomplete. */
	__u8 cls = phase == GT_COMM_NCCL ? GT_EV_NCCL : GT_EV_COLLECTIVE;
	struct gt_collective_event *e = gt_reserve(sizeof(*e), cls);
	if (!e)
		return 0;
	e->cls = cls;
	e->phase = phase;
	e->op = op;
	e->backend = backend;
	e->pid = tgid;
	e->tid = tid;
	e->result = 0;
	e->start_ns = start;
	e->end_ns = bpf_ktime_get_ns();
	e->issued_ns = 0;
	e->work = 0;
	e->group = 0;
	e->count = 0;
	e->stream = 0;
	e->peer = -1;
	e->datatype = 0;
	e->redop = 255;
	e->group_depth = 0;
	e->pad = 0;
	return e;
}

static __always_inline void emit(__u8 phase, __u8 op, __u8 backend, __u32 tgid, __u32 tid, __u64 start, __u64 issued,
				 __u64 work, __u64 group)
{
	struct gt_collective_event *e = new_event(phase, op, backend, tgid, tid, start);
	if (!e)
		return;
	e->issued_ns = issued;
	e->work = work;
	e->group = group;
	bpf_ringbuf_submit(e, gt_submit_flags());
}

/* An entry: opens the thread's call of this kind unless one is open further up the stack.
 * `work`: a wait's Work; `group`: a collective call's backend object. */
static __always_inline void entered(struct open_call *c, __u64 sp, __u64 cookie, __u64 work, __u64 group)
{
	if (c->sp && c->sp > sp)
		return; /* nested in an open one (or below one an exception left: replaced higher up) */
	c->sp = sp;
	c->start_ns = bpf_ktime_get_ns();
	c->op = (cookie >> 8) & 0xff;
	c->backend = (cookie >> 16) & 0xff;
	c->returns_void = ((cookie >> 24) & GT_COLL_RETURNS_VOID) != 0;
	c->work = work;
	c->group = group;
}

static __always_inline void collective_returned(struct open_call *c, __u64 result, __u32 tgid, __u32 tid)
{
	__u64 work = 0;
	bool forgotten = false;
	/* rax holds the hidden result pointer at the return: the intrusive_ptr<Work> is there. */
	if (!c->returns_void && bpf_probe_read_user(&work, sizeof(work), (void *)result))
		work = 0;
	if (work) {
		struct work_key key = {.tgid = tgid, .work = work};
		struct open_work w = {.issued_ns = c->start_ns, .group = c->group, .op = c->op, .backend = c->backend};
		if (bpf_map_update_elem(&open_works, &key, &w, BPF_ANY)) {
			gt_count(GT_CNT_COLLECTIVES_OPEN_FULL);
			forgotten = true;
		}
	}
	emit(GT_COMM_ISSUE, c->op, c->backend, tgid, tid, c->start_ns, c->start_ns, work, c->group);
	/* After the issue: its wait, which will not know its group, is the thread's next record. */
	if (forgotten)
		emit(GT_COMM_UNRECORDED, c->op, c->backend, tgid, tid, c->start_ns, 0, work, c->group);
}

static __always_inline void wait_returned(struct open_call *c, __u32 tgid, __u32 tid)
{
	struct work_key key = {.tgid = tgid, .work = c->work};
	struct open_work *w = bpf_map_lookup_elem(&open_works, &key);
	__u8 op = GT_COLL_UNKNOWN, backend = GT_BACKEND_UNKNOWN;
	__u64 issued = 0, group = 0;
	if (w) {
		op = w->op, backend = w->backend, issued = w->issued_ns, group = w->group;
		bpf_map_delete_elem(&open_works, &key); /* a second wait on it returns at once */
	}
	emit(GT_COMM_WAIT, op, backend, tgid, tid, c->start_ns, issued, c->work, group);
}

/* Argument `i` (1-based, SysV x86-64) of an NCCL call at its entry: registers read once (the
 * verifier refuses context loads at computed offsets), 7 and 8 from the stack above the return
 * address. */
static __always_inline __u64 nccl_arg(const __u64 *regs, __u64 sp, unsigned i)
{
	__u64 v = 0;
	if (i >= 1 && i <= 6)
		return regs[i - 1];
	if (i == 7 || i == 8)
		bpf_probe_read_user(&v, sizeof(v), (void *)(sp + 8 * (i - 6)));
	return v;
}

static __always_inline void nccl_entered(struct pt_regs *ctx, struct thread_state *t, __u64 sp, __u64 cookie)
{
	struct open_nccl *c = &t->nccl;
	if (c->sp && c->sp > sp)
		return; /* called from inside an NCCL call (the library's own use of its exports) */
	__u8 api = (cookie >> 8) & 0xff;
	if (api == GT_NCCL_GROUP_START) {
		if (t->nccl_group_depth < 255)
			t->nccl_group_depth++;
		return;
	}
	__u64 regs[6] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
			 PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), PT_REGS_PARM6(ctx)};
	__u64 layout = cookie >> 16;
	c->sp = sp;
	c->start_ns = bpf_ktime_get_ns();
	c->api = api;
	c->group_depth = t->nccl_group_depth;
	c->count = nccl_arg(regs, sp, layout & 0xf);
	c->datatype = nccl_arg(regs, sp, (layout >> 4) & 0xf);
	c->redop = (layout >> 8) & 0xf ? nccl_arg(regs, sp, (layout >> 8) & 0xf) : 255;
	c->peer = (layout >> 12) & 0xf ? (__s32)nccl_arg(regs, sp, (layout >> 12) & 0xf) : -1;
	__u64 comm = nccl_arg(regs, sp, (layout >> 16) & 0xf);
	bool comm_out = (layout & GT_NCCL_COMM_OUT) != 0;
	c->comm = comm_out ? 0 : comm;
	c->comm_out = comm_out ? comm : 0;
	c->stream = nccl_arg(regs, sp, (layout >> 20) & 0xf);
}

static __always_inline void nccl_returned(struct thread_state *t, __u64 result, __u32 tgid, __u32 tid)
{
	struct open_nccl *c = &t->nccl;
	if (c->api == GT_NCCL_GROUP_END && t->nccl_group_depth)
		t->nccl_group_depth--;
	if (c->comm_out && bpf_probe_read_user(&c->comm, sizeof(c->comm), (void *)c->comm_out))
		c->comm = 0;
	struct gt_collective_event *e = new_event(GT_COMM_NCCL, c->api, GT_BACKEND_NCCL, tgid, tid, c->start_ns);
	if (!e)
		return;
	e->result = (int)result;
	e->group = c->comm;
	e->count = c->count;
	e->stream = c->stream;
	e->peer = c->peer;
	e->datatype = c->datatype;
	e->redop = c->redop;
	e->group_depth = c->api == GT_NCCL_GROUP_END ? t->nccl_group_depth : c->group_depth;
	bpf_ringbuf_submit(e, gt_submit_flags());
}

/* One program for every site; the attach cookie says which (enum gt_comm_site). */
SEC("uprobe")
int comm_probe(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (!gt_is_tracked(tgid))
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 kind = cookie & 0xff, sp = PT_REGS_SP(ctx);
	bool entry = kind == GT_COMM_SITE_CALL || kind == GT_COMM_SITE_WAIT || kind == GT_COMM_SITE_NCCL;
	struct thread_state *t = bpf_task_storage_get(&comm_threads, bpf_get_current_task_btf(), 0,
						      entry ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!t) {
		/* The task storage could not be had (memory, or busy on this CPU): counted, an NCCL
		 * call as a lost one of its own class (it does not make c10d's counts incomplete). */
		if (entry)
			gt_count(kind == GT_COMM_SITE_NCCL ? GT_EV_NCCL : GT_CNT_COLLECTIVES_NO_STATE);
		/* Said with its time, so that a dump can tell whether the hole matters (when the ring
		 * has no room for that either, the loss of a collective event is counted: that does). */
		if (kind == GT_COMM_SITE_CALL || kind == GT_COMM_SITE_WAIT)
			emit(GT_COMM_UNRECORDED, (cookie >> 8) & 0xff, (cookie >> 16) & 0xff, tgid, tid, bpf_ktime_get_ns(), 0, 0, 0);
		return 0;
	}
	switch (kind) {
	case GT_COMM_SITE_CALL: {
		/* The backend object is `this`: the first argument, or the second after the hidden
		 * pointer a method returning intrusive_ptr<Work> is given (SysV x86-64). DDP's
		 * finalize_backward is the Reducer's, not a backend's. */
		__u8 op = (cookie >> 8) & 0xff;
		bool returns_void = ((cookie >> 24) & GT_COLL_RETURNS_VOID) != 0;
		/* Both read as they are: the verifier refuses a context load at a computed offset,
		 * which the compiler makes of a load in each branch. */
		__u64 first = PT_REGS_PARM1(ctx), second = PT_REGS_PARM2(ctx);
		barrier_var(first);
		barrier_var(second);
		__u64 group = op == GT_COLL_DDP_GRADIENTS ? 0 : returns_void ? first : second;
		entered(&t->call, sp, cookie, 0, group);
		break;
	}
	case GT_COMM_SITE_WAIT:
		entered(&t->wait, sp, cookie, PT_REGS_PARM1(ctx), 0);
		break;
	case GT_COMM_SITE_CALL_RET:
		if (t->call.sp == sp) {
			collective_returned(&t->call, PT_REGS_RC(ctx), tgid, tid);
			t->call.sp = 0;
		}
		break;
	case GT_COMM_SITE_WAIT_RET:
		if (t->wait.sp == sp) {
			wait_returned(&t->wait, tgid, tid);
			t->wait.sp = 0;
		}
		break;
	case GT_COMM_SITE_NCCL:
		nccl_entered(ctx, t, sp, cookie);
		break;
	case GT_COMM_SITE_NCCL_RET:
		if (t->nccl.sp == sp) {
			nccl_returned(t, PT_REGS_RC(ctx), tgid, tid);
			t->nccl.sp = 0;
		}
		break;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
