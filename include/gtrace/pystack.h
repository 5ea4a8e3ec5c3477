/* CPython stack walking shared by BPF and userspace: where a process's interpreter keeps its
 * thread states and frames (set per process by userspace after it detects the version), and
 * the stack event. Fixed-size fields only. */
#ifndef GTRACE_PYSTACK_H
#define GTRACE_PYSTACK_H

#define GT_PY_MAX_FRAMES 128
#define GT_PY_NO_OFFSET 0xffff

/* How to walk one process's Python frames (offsets in bytes). */
struct gt_py_layout {
	unsigned long long tss_key_addr; /* address of the autoTSSkey's pthread key (int) */
	unsigned short pthread_specific; /* offsetof(struct pthread, specific_1stblock) in its glibc */
	unsigned short tstate_frame;     /* tstate -> frame (<=3.10), cframe (3.11/3.12), current_frame (3.13+) */
	unsigned short cframe_frame;     /* cframe -> current_frame, or GT_PY_NO_OFFSET */
	unsigned short frame_previous;
	unsigned short frame_code;
	unsigned short frame_instr;      /* f_lasti (int, <=3.10) or prev_instr/instr_ptr (pointer) */
	unsigned short frame_owner;      /* owner byte (3.12+), or GT_PY_NO_OFFSET */
	unsigned char instr_is_pointer;
	unsigned char owner_c_stack;     /* owner value of frames that belong to the C stack (skipped) */
	unsigned char code_tagged;       /* the code reference has a tag in its low bit (3.14) */
	unsigned char frames_stacked;    /* 3.11+: a thread's frames lie in its data stack, callers below
					  * callees: one read of a window serves many frames */
	/* One read per frame: the byte range [frame_read_start, +frame_read_len) holds every field
	 * above (offsets stay relative to the frame); frame_read_len <= GT_PY_FRAME_READ. Reading
	 * no more than needed matters: the walk is ~50 such reads per call. */
	unsigned short frame_read_start;
	unsigned short frame_read_len;
	/* Set by userspace each time it (re)sets a process's layout (after an exec): mixed into the
	 * stack ids, so that an id never means a stack of the process's previous image. */
	unsigned int epoch;
};

#define GT_PY_FRAME_READ 88

struct gt_py_frame {
	unsigned long long code;  /* PyCodeObject* */
	unsigned long long instr; /* instruction pointer, or f_lasti */
};

/* Python stacks are interned in BPF: an event (CUDA call, torch range, timer sample) carries the
 * id of its stack — a hash of its frames, seeded by the process and its layout's epoch — and a
 * stack's frames go out once, in this event, the first time the id is seen (again only if that
 * event was lost, or the id fell out of BPF's table of ids sent). 0 is no stack. */
struct gt_py_stack_event {
	unsigned char cls; /* GT_EV_PYSTACK */
	unsigned char truncated; /* deeper than GT_PY_MAX_FRAMES */
	unsigned short nframes;
	unsigned int pid;
	unsigned long long id;
	struct gt_py_frame frames[GT_PY_MAX_FRAMES]; /* innermost first; only nframes are sent */
};

#define GT_PY_STACK_HEADER 16 /* bytes of gt_py_stack_event before frames */

/* What became of a walk, on the event that asked for it. */
enum gt_py_status {
	GT_PY_NONE = 0xff,         /* not walked (not a Python process, or --py-stacks skipped it) */
	GT_PY_OK = 0,
	GT_PY_NO_THREAD_STATE = 1, /* the thread has no Python thread state (a C thread) */
	GT_PY_READ_FAILED = 2,     /* a read of the interpreter's memory failed mid-walk */
};

#endif
