/* Walks the calling thread's CPython frames from BPF. The thread state is found through the
 * interpreter's autoTSSkey pthread slot, which holds it whether or not the thread holds the GIL
 * (PyTorch releases the GIL around every op, so at a CUDA call it usually does not). Included
 * by the programs that record Python stacks. */
#ifndef GTRACE_PYSTACK_BPF_H
#define GTRACE_PYSTACK_BPF_H

#include "common.bpf.h"
#include "gtrace/pystack.h"

#define GT_PY_MAX_WALK (GT_PY_MAX_FRAMES + 32) /* C-stack shim frames are walked but not kept */
#define GT_PTHREAD_KEY_2NDLEVEL_SIZE 32        /* glibc: keys below this live in specific_1stblock */

static __always_inline __u64 gt_read_u64(__u64 addr, int *failed)
{
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		*failed = 1;
	return v;
}

/* The PyThreadState* of the current thread, or 0. */
static __always_inline __u64 gt_py_thread_state(const struct gt_py_layout *l, int *failed)
{
	int key = 0;
	if (bpf_probe_read_user(&key, sizeof(key), (void *)l->tss_key_addr) || key < 0 ||
	    key >= GT_PTHREAD_KEY_2NDLEVEL_SIZE)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 pthread_self = BPF_CORE_READ(task, thread.fsbase); /* x86-64 glibc: fs base = struct pthread */
	/* specific_1stblock[key] is {seq, data}: the thread state is data. */
	return gt_read_u64(pthread_self + l->pthread_specific + key * 16 + 8, failed);
}

/* A window of the thread's memory read in one go. From 3.11 a thread's frames are consecutive in
 * its data stack, each caller just below its callee: one read of the window below the innermost
 * frame serves the next dozens of frames, where a read per frame costs ~40 ns each. Per CPU and
 * per BPF object (a uprobe program cannot interrupt another on its CPU; the sampler has its own). */
#define GT_PY_WINDOW 1024

struct gt_py_window {
	__u64 base; /* address of bytes[0]; 0: empty */
	__u64 len;
	__u8 bytes[GT_PY_WINDOW];
	__u8 single[GT_PY_FRAME_READ]; /* one frame read on its own (before 3.11, or off the window) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gt_py_window);
} py_window SEC(".maps");

struct gt_walk_ctx {
	const struct gt_py_layout *layout;
	struct gt_py_stack_event *event;
	struct gt_py_window *window;
	__u64 frame;
	__u64 hash; /* of the frames kept so far */
	__u32 n;
	int failed;
};

/* The stack being walked, per CPU and per BPF object; sent as the stack's definition when its id
 * is new. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gt_py_stack_event);
} py_stack_scratch SEC(".maps");

struct gt_py_stack_key {
	__u32 pid;
	__u32 pad;
	__u64 id;
};

/* Ids whose frames went out. Shared by every object that walks stacks (userspace reuses the fd).
 * LRU: a stack evicted here is sent again when next seen, which costs bytes, never correctness. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct gt_py_stack_key);
	__type(value, __u8);
} py_stacks_sent SEC(".maps");

/* Stack definitions, in a ring of their own with a wakeup each: userspace reads a definition's
 * code objects from the live process, so a reader of its own takes them at once, however far
 * behind the capture loop is with the other events (a process may exit 50 ms after its last
 * call). Shared like py_stacks_sent. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} py_stack_defs SEC(".maps");

#define GT_HASH_MUL 0x9e3779b97f4a7c15ull

/* Where the frame's bytes [addr, addr + len) can be read, or NULL: in the window when it holds
 * them (3.11+); else the window is refilled with the memory from addr's page start (or 1 KiB
 * below addr) to addr + len, where the frame's callers are — a read that started lower could
 * cross below the data stack's first chunk, and a faulting read costs more than several reads.
 * Fields are then loaded in place: no copy per frame. */
static __always_inline const __u8 *gt_frame_bytes(struct gt_walk_ctx *w, __u64 addr, __u32 len)
{
	struct gt_py_window *win = w->window;
	if (!w->layout->frames_stacked)
		goto single;
	__u64 off = addr - win->base;
	if (!win->base || addr < win->base || off + len > win->len) {
		__u64 end = addr + len;
		__u64 page = addr & ~4095ull;
		/* 8-aligned like the frames, so that fields load as aligned words */
		__u64 start = end - page > GT_PY_WINDOW ? (end - GT_PY_WINDOW + 7) & ~7ull : page;
		__u64 n = end - start;
		win->base = 0;
		if (n > GT_PY_WINDOW || bpf_probe_read_user(win->bytes, n, (void *)start))
			goto single;
		win->base = start;
		win->len = n;
		off = addr - start;
	}
	if (off > GT_PY_WINDOW - GT_PY_FRAME_READ)
		goto single;
	return win->bytes + off;
single:
	if (bpf_probe_read_user(win->single, len, (void *)addr))
		return NULL;
	return win->single;
}

static __always_inline __u64 gt_field_u64(const __u8 *p, __u32 off)
{
	return off <= GT_PY_FRAME_READ - 8 ? *(const __u64 *)(p + off) : 0;
}

/* One frame per call from bpf_loop (the verifier checks it once, not per iteration). */
static long gt_walk_step(__u32 index, void *data)
{
	struct gt_walk_ctx *w = data;
	const struct gt_py_layout *l = w->layout;
	struct gt_py_stack_event *e = w->event;
	__u64 frame = w->frame;
	if (!frame)
		return 1;
	__u32 len = l->frame_read_len;
	if (len > GT_PY_FRAME_READ)
		len = GT_PY_FRAME_READ;
	const __u8 *p = gt_frame_bytes(w, frame + l->frame_read_start, len);
	if (!p) {
		w->failed = 1;
		w->frame = 0;
		return 1;
	}
	__u32 base = l->frame_read_start;
	__u64 code = gt_field_u64(p, l->frame_code - base);
	__u64 instr = 0;
	__u32 off = l->frame_instr - base;
	if (l->instr_is_pointer)
		instr = gt_field_u64(p, off);
	else if (off <= GT_PY_FRAME_READ - 4)
		instr = (__u64)(__s64) * (const int *)(p + off);
	w->frame = gt_field_u64(p, l->frame_previous - base);
	if (l->frame_owner != GT_PY_NO_OFFSET) {
		off = l->frame_owner - base;
		if (off <= GT_PY_FRAME_READ - 1 && p[off] == l->owner_c_stack)
			return 0; /* a shim frame owned by the C stack: not a Python frame */
	}
	if (w->n >= GT_PY_MAX_FRAMES) {
		e->truncated = 1;
		return 1;
	}
	struct gt_py_frame *f = &e->frames[w->n & (GT_PY_MAX_FRAMES - 1)];
	f->code = l->code_tagged ? code & ~1ull : code;
	f->instr = instr;
	w->hash = ((w->hash ^ f->code) * GT_HASH_MUL ^ f->instr) * GT_HASH_MUL;
	w->n++;
	return 0;
}

/* Fills e->frames with the current thread's Python stack, innermost first; returns its status
 * (enum gt_py_status) and the frames' hash in *hash. */
static __always_inline __u8 gt_walk_python(const struct gt_py_layout *l, struct gt_py_stack_event *e, __u64 *hash)
{
	__u32 zero = 0;
	struct gt_walk_ctx w = {.layout = l, .event = e, .window = bpf_map_lookup_elem(&py_window, &zero)};
	e->nframes = 0;
	e->truncated = 0;
	if (!w.window)
		return GT_PY_READ_FAILED;
	w.window->base = 0; /* another thread's memory, or stale: refill */
	__u64 tstate = gt_py_thread_state(l, &w.failed);
	if (!tstate)
		return w.failed ? GT_PY_READ_FAILED : GT_PY_NO_THREAD_STATE;
	w.frame = gt_read_u64(tstate + l->tstate_frame, &w.failed);
	if (w.frame && l->cframe_frame != GT_PY_NO_OFFSET)
		w.frame = gt_read_u64(w.frame + l->cframe_frame, &w.failed);
	bpf_loop(GT_PY_MAX_WALK, gt_walk_step, &w, 0);
	if (w.frame && !e->truncated)
		e->truncated = 1; /* more frames than the walk may visit */
	e->nframes = w.n;
	*hash = w.hash;
	return w.failed ? GT_PY_READ_FAILED : GT_PY_OK;
}

/* The id of the current thread's Python stack (0: none, *status says why). The first time an id
 * is seen its frames go to userspace; after that only the id travels. `last`, when given, is the
 * id this thread sent last: the same stack again skips even the table lookup. */
static __always_inline __u64 gt_python_stack(const struct gt_py_layout *l, __u32 tgid, __u8 *status, __u64 *last)
{
	__u32 zero = 0;
	struct gt_py_stack_event *e = bpf_map_lookup_elem(&py_stack_scratch, &zero);
	__u64 hash = 0;
	if (!e) {
		*status = GT_PY_READ_FAILED;
		return 0;
	}
	*status = gt_walk_python(l, e, &hash);
	if (*status != GT_PY_OK)
		return 0;
	hash = (hash ^ ((__u64)tgid << 32 | l->epoch) ^ (__u64)e->truncated) * GT_HASH_MUL;
	if (!hash)
		hash = 1;
	if (last && *last == hash)
		return hash;
	struct gt_py_stack_key key = {.pid = tgid, .id = hash};
	if (!bpf_map_lookup_elem(&py_stacks_sent, &key)) {
		e->cls = GT_EV_PYSTACK;
		e->pid = tgid;
		e->id = hash;
		__u32 n = e->nframes;
		if (n > GT_PY_MAX_FRAMES)
			n = GT_PY_MAX_FRAMES;
		if (bpf_ringbuf_output(&py_stack_defs, e, GT_PY_STACK_HEADER + n * sizeof(struct gt_py_frame), BPF_RB_FORCE_WAKEUP)) {
			gt_count(GT_EV_PYSTACK); /* the events that name this id show no frames */
			return hash;
		}
		__u8 one = 1;
		bpf_map_update_elem(&py_stacks_sent, &key, &one, BPF_ANY);
	}
	if (last)
		*last = hash;
	return hash;
}

#endif
