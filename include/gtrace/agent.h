/* The channel between the agent inside a traced process (libgtrace_agent.so, CUPTI side) and
 * gtrace. Fixed-size fields only; both sides are x86-64.
 *
 * Nothing of it lives in the file system, so no local user can forge or redirect it:
 * - gtrace asks through the agent's mailbox (symbol gtrace_agent_mailbox), a struct in the
 *   agent's own memory that gtrace writes with process_vm_writev — which only a process allowed
 *   to ptrace the target can do, i.e. one that could already do anything to it.
 * - The agent answers by creating a sealed memfd holding a ring of GPU records (this header, then
 *   a single-producer ring of variable-size records) and a pipe, and naming both fds in the
 *   mailbox. gtrace takes them with pidfd_getfd (again: ptrace rights needed), maps the ring and
 *   keeps the pipe's write end: when gtrace dies, however it dies, the agent's read end hangs up.
 * - Launch mode (CUDA_INJECTION64_PATH): the agent starts from its environment's config at CUDA
 *   initialization and offers its ring the same way to the gtrace named in that config. */
#ifndef GTRACE_AGENT_H
#define GTRACE_AGENT_H

#define GT_AGENT_MAGIC 0x32524147u /* "GAR2" */
#define GT_AGENT_VERSION 5u
#define GT_AGENT_DATA_OFFSET 4096u           /* records start one page after the header */
#define GT_AGENT_DEFAULT_RING (8u << 20)     /* bytes of records, a power of two */
#define GT_AGENT_MIN_RING (64u << 10)
#define GT_AGENT_MAX_RING (1u << 30)
#define GT_AGENT_NAME_MAX 1024u              /* kernel names longer than this are cut */
/* Correlation slots, indexed by tid % GT_AGENT_SLOTS: at the entry and the exit of each thread's
 * outermost CUPTI-visible GPU-work call the agent stores [in-call bit 63 | agent-records bit 62 |
 * tid << 32 | correlation id]; bit 63 is set at entry, clear after exit; bit 62 says the agent
 * records this call itself (capture_calls, decided at its entry), so a uprobe that saw the same
 * call drops it: no call twice, none lost, while the probes come off. */
#define GT_AGENT_SLOT_IN_CALL (1ull << 63)
#define GT_AGENT_SLOT_AGENT_RECORDS (1ull << 62)
#define GT_AGENT_SLOT_TID(v) ((unsigned int)((v) >> 32) & 0x3fffffffu)
#define GT_AGENT_SLOTS 4096u
#define GT_AGENT_ANNOUNCE_SYMBOL "gtrace_agent_announce" /* (uint64_t *slots), probed by gtrace */
#define GT_AGENT_MAILBOX_SYMBOL "gtrace_agent_mailbox"   /* struct gt_agent_mailbox */
#define GT_AGENT_ENV_CONFIG "GTRACE_AGENT_CONFIG" /* launch mode: the config string */
#define GT_MAILBOX_MAGIC 0x32584d47u /* "GMX2" */
#define GT_MAILBOX_CONFIG_MAX 2048u
#define GT_OWNER_TOKEN_MAX 64u

#ifndef __bpf__ /* BPF reads only the correlation slots: the constants above */
#include <stdint.h>

#include "gtrace/pystack.h"

/* What the agent is doing, written by the agent. */
enum gt_agent_state {
	GT_AGENT_STARTING = 1, /* loading CUPTI */
	GT_AGENT_ACTIVE = 2,   /* CUPTI enabled, records flowing */
	GT_AGENT_FAILED = 3,   /* could not start: see message; the process keeps its CPU trace */
	GT_AGENT_DETACHED = 4, /* flushed, CUPTI disabled and finalized, ring complete */
};

/* What gtrace asks, written by gtrace. */
enum gt_agent_control {
	GT_AGENT_RUN = 0,
	GT_AGENT_DETACH = 1, /* flush, disable CUPTI, finalize, set DETACHED */
};

enum gt_agent_flags {
	GT_AGENT_CALLBACKS = 1 << 0,   /* the CUPTI callback API is ours: correlation ids reach BPF */
	GT_AGENT_LATE_ATTACH = 1 << 1, /* started in a process whose CUDA was already initialized */
	GT_AGENT_CALLS = 1 << 2,       /* recording API calls (GT_GPU_CALL) as gtrace asked */
	GT_AGENT_CALL_RECORDS = 1 << 3, /* ... from CUPTI's API records (capture_calls 2), not its callbacks */
	GT_AGENT_MULTI_SUBSCRIBER = 1 << 4, /* a subscriber of its own beside others (CUPTI's multi-subscriber mode, CUDA 13.3+) */
};

/* What the agent's mailbox says, written by the agent. */
enum gt_mailbox_status {
	GT_MAILBOX_IDLE = 0,    /* dormant: no session */
	GT_MAILBOX_OFFERED = 1, /* a session's ring and owner pipe wait to be taken (fds below) */
	GT_MAILBOX_OWNED = 2,   /* taken by the gtrace named in owner_token */
	GT_MAILBOX_REFUSED = 3, /* the request answered last was refused: message says why */
};

/* In the agent's .data (found through its symbol); the agent initializes magic and version, so
 * it is valid from the moment the library is mapped. */
struct gt_agent_mailbox {
	uint32_t magic;
	uint32_t version;
	/* gtrace → agent. gtrace writes config (NUL-terminated), then increments request_seq. */
	char config[GT_MAILBOX_CONFIG_MAX];
	volatile uint64_t request_seq;
	/* agent → gtrace, under a sequence lock: answer_gen is odd while the agent writes. */
	volatile uint32_t answer_gen;
	uint32_t status;                /* enum gt_mailbox_status */
	uint64_t answered_seq;          /* the request_seq answered last (launch mode: 0) */
	int32_t ring_fd;                /* the ring's memfd in the agent's process (OFFERED, OWNED) */
	int32_t owner_fd;               /* the owner pipe's write end (OFFERED only) */
	uint32_t session;               /* counts the agent's sessions */
	uint32_t pad;
	uint64_t ring_inode;            /* st_ino of the memfd and of the pipe: gtrace checks the fds */
	uint64_t pipe_inode;
	char owner_token[GT_OWNER_TOKEN_MAX]; /* who the offer is for, then who owns it */
	char message[256];
};

struct gt_agent_ring {
	uint32_t magic;
	uint32_t version;
	uint32_t pid;
	volatile uint32_t state;   /* enum gt_agent_state */
	volatile uint32_t control; /* enum gt_agent_control */
	volatile uint32_t flags;   /* enum gt_agent_flags */
	volatile uint32_t owner_pid; /* gtrace's pid once it took the ring (compare-and-swap from 0) */
	uint32_t pad0;
	uint64_t data_bytes;       /* ring capacity, a power of two */
	uint64_t head;             /* bytes produced (agent; release store) */
	uint64_t tail;             /* bytes consumed (gtrace; release store) */
	uint64_t ring_dropped;     /* records the agent dropped because the ring was full */
	uint64_t cupti_dropped;    /* records CUPTI dropped (cuptiActivityGetNumDroppedRecords) */
	uint64_t buffers_refused;  /* CUPTI buffers refused to keep the agent's memory bounded */
	int64_t clock_offset_ns;   /* CUPTI timestamp minus CLOCK_MONOTONIC, tightest of many reads */
	uint64_t clock_error_ns;   /* half the width of the read window that gave the offset */
	char cupti_path[256];      /* the libcupti in use */
	char message[512];         /* the reason for FAILED, or a warning (callback API taken, ...) */
	/* gtrace → agent: record the process's API calls in the ring (GT_GPU_CALL), with Python
	 * stacks walked in the process with this layout (py_layout.epoch 0: none). Written by gtrace
	 * before it sets capture_calls; the agent answers with GT_AGENT_CALLS in flags. An uprobe
	 * costs a trap per call (~6 µs on a GPU host measured); a CUPTI callback costs far less. */
	struct gt_py_layout py_layout;
	uint32_t py_stack_every;         /* 0: no Python stacks; 1: every call */
	volatile uint32_t capture_calls; /* enum gt_call_source: record calls */
	uint64_t py_walks_refused;       /* agent: walks not done (layout failed its check) */
	uint64_t calls_since_ns;         /* agent: CLOCK_MONOTONIC when it began recording calls */
	uint64_t ops_trimmed_at_stop;    /* agent: GPU ops of calls still in flight when the session
					  * stopped (their calls' ends are past the capture): left out */
	uint64_t call_stacks_missed;     /* agent: calls from API records whose stack was walked but
					  * overwritten before the record came (recorded without it) */
	/* gtrace → agent: time the agent's own work on the job's threads (--bpf-stats). The agent's
	 * thread copies its totals here each watch period and before it stops (agent → gtrace):
	 * CUPTI API callbacks and the ns spent in them (Python walks included), the Python stack
	 * walks and their ns. */
	volatile uint32_t time_self;
	uint32_t pad1;
	uint64_t self_callbacks;
	uint64_t self_callback_ns;
	uint64_t self_py_walks;
	uint64_t self_py_walk_ns;
};

/* gt_agent_ring.capture_calls: where the agent takes the calls from. */
enum gt_call_source {
	GT_CALLS_OFF = 0,
	GT_CALLS_FROM_CALLBACKS = 1, /* entry and exit callbacks time the call */
	GT_CALLS_FROM_RECORDS = 2,   /* CUPTI's API activity records are the calls; an entry callback
				      * walks the Python stack, none at all without stacks */
};

/* Every record starts with this; sizes are multiples of 8. */
enum gt_gpu_record_type {
	GT_GPU_KERNEL = 1,
	GT_GPU_MEMCPY = 2,
	GT_GPU_MEMSET = 3,
	GT_GPU_SYNC = 4,
	GT_GPU_MEMORY = 5, /* device memory allocated or freed */
	GT_GPU_API = 6,    /* a CUPTI runtime/driver API record (joins when callbacks are not ours) */
	GT_GPU_CALL = 7,   /* an API call the agent recorded in its callback (capture_calls) */
	GT_GPU_PYSTACK = 8, /* a Python stack's frames, once per id, before the calls naming it */
	GT_GPU_MEMORY_STATE = 9, /* the GPU memory in use when the agent started (attach), per device */
	GT_GPU_NVTX_RANGE = 10, /* an NVTX range that ended (push/pop or start/end) */
	GT_GPU_NVTX_MODULE = 11, /* attach mode: what became of one module's NVTX table */
	GT_GPU_SHARED_CUPTI = 12, /* a window of the job's own CUPTI client (its profiler) beside the session */
	GT_GPU_CALLBACKS_YIELDED = 13, /* the session gave CUPTI's callback API up to the job's profiler */
	GT_GPU_PAD = 0xffff, /* skip to the ring's end */
};

struct gt_gpu_header {
	uint16_t type;
	uint16_t size;
	uint32_t correlation; /* CUPTI correlation id of the API call that caused it */
};

/* Kernel, copy and set records share their first fields. Times are CUPTI timestamps. */
struct gt_gpu_op {
	struct gt_gpu_header h;
	uint64_t start;
	uint64_t end;
	uint32_t device;
	uint32_t context;
	uint32_t stream;
	uint32_t pad;
};

struct gt_gpu_kernel {
	struct gt_gpu_op op;
	int32_t grid[3];
	int32_t block[3];
	uint32_t registers;
	uint32_t static_shared;
	uint32_t dynamic_shared;
	uint16_t name_len;
	uint16_t graph; /* nonzero when launched by a CUDA graph */
	char name[];    /* name_len bytes, not terminated */
};

struct gt_gpu_copy { /* GT_GPU_MEMCPY and GT_GPU_MEMSET */
	struct gt_gpu_op op;
	uint64_t bytes;
	uint8_t copy_kind; /* CUpti_ActivityMemcpyKind (memcpy) */
	uint8_t src_kind;  /* CUpti_ActivityMemoryKind */
	uint8_t dst_kind;
	uint8_t pad[5];
	uint32_t value; /* memset */
	uint32_t pad2;
};

struct gt_gpu_sync {
	struct gt_gpu_op op; /* device/context/stream of what was waited for */
	uint32_t sync_type;  /* CUpti_ActivitySynchronizationType */
	uint32_t pad;
};

struct gt_gpu_memory {
	struct gt_gpu_header h;
	uint64_t ts;
	uint64_t address;
	uint64_t bytes;
	uint32_t device;
	uint8_t freed; /* 0: allocated, 1: freed */
	uint8_t pad[3];
};

/* gt_gpu_memory_state.have: which figures the agent could read. */
enum gt_memory_state_have {
	GT_MEMSTATE_DEVICE = 1 << 0, /* device_used, device_total (cuMemGetInfo in the primary context) */
	GT_MEMSTATE_TORCH = 1 << 1,  /* torch_reserved, torch_allocated (torch.cuda's caching allocator) */
};

/* gt_gpu_memory_state.torch: why torch's figures are there or not. */
enum gt_memory_state_torch {
	GT_TORCH_READ = 0,          /* read */
	GT_TORCH_NO_PYTHON = 1,     /* no initialized CPython in the process */
	GT_TORCH_NOT_IMPORTED = 2,  /* Python without torch, or torch whose CUDA is not initialized */
	GT_TORCH_GIL_TIMEOUT = 3,   /* the interpreter did not let the agent in within its patience */
	GT_TORCH_ERROR = 4,         /* torch.cuda raised (an old or odd torch) */
	GT_TORCH_NO_DEVICE = 5,     /* torch has no figures for this device (index beyond its count) */
};

/* Sent once per device whose primary context the process already has active, right after CUPTI
 * started in a running process (never in launch mode: there CUDA is just starting and nothing is
 * allocated). The agent never creates a context to read it. ts is CLOCK_MONOTONIC just before the
 * figures were read: memory records stamped before it are already in them. */
struct gt_gpu_memory_state {
	struct gt_gpu_header h;
	uint64_t ts;
	uint64_t device_used;  /* total - free: every process and context on the device */
	uint64_t device_total;
	uint64_t torch_reserved;  /* bytes the caching allocator holds from CUDA (its cudaMallocs) */
	uint64_t torch_allocated; /* of those, bytes in live tensors */
	uint32_t device;
	uint8_t have;  /* enum gt_memory_state_have */
	uint8_t torch; /* enum gt_memory_state_torch */
	uint8_t pad[2];
};

/* The job's own CUPTI client (torch.profiler's Kineto, a tool) had activity records on from
 * `from` to `to` (CLOCK_MONOTONIC; to 0: still on when the session stopped) while the agent
 * recorded beside it, its buffers passed back to it (collect/agent/job_profiler.h). */
struct gt_gpu_shared_cupti {
	struct gt_gpu_header h;
	uint64_t from;
	uint64_t to;
	uint64_t buffers_lost; /* the job's buffers that reached the agent and could not go back to it */
	uint8_t found_open;    /* already open when the session started */
	uint8_t found_by_kinds; /* ... found by its kinds' records in the session's buffers: its records till then were the session's */
	uint8_t pad[6];
};

/* The job's profiler subscribed to CUPTI's callback API, which takes one subscriber (before CUDA
 * 13.3): the session let it go at `ts` (CLOCK_MONOTONIC) rather than leave the job's profiler
 * without GPU records; GPU work is joined through CUPTI's API records from then on. */
struct gt_gpu_callbacks_yielded {
	struct gt_gpu_header h;
	uint64_t ts;
	uint8_t calls; /* enum gt_calls_after_yield */
	uint8_t pad[7];
};

enum gt_calls_after_yield {
	GT_YIELD_CALLS_UNCHANGED = 0,    /* the agent was not recording the calls, or records them from API records already */
	GT_YIELD_CALLS_FROM_RECORDS = 1, /* it recorded them in its callbacks, and from API records from now on (no stacks) */
	GT_YIELD_CALLS_TO_UPROBES = 2,   /* it recorded them in its callbacks, and cannot go on: the uprobes must */
};

struct gt_gpu_api {
	struct gt_gpu_header h;
	uint64_t start;
	uint64_t end;
	uint32_t tid;
	uint32_t cbid;
	uint8_t driver; /* 1: driver API, 0: runtime API */
	uint8_t pad[7];
};

/* The outermost call of a thread to an API of gtrace's table (gtrace/cuda_api.h); the header's
 * correlation is the call's CUPTI correlation id. Times are CLOCK_MONOTONIC. */
struct gt_gpu_call {
	struct gt_gpu_header h;
	uint64_t start;
	uint64_t end;
	uint64_t py_stack; /* stack id (0: none), as gtrace/pystack.h */
	uint32_t tid;
	uint16_t api;      /* enum gt_cuda_api */
	uint8_t py_status; /* enum gt_py_status */
	uint8_t pad;
	int32_t ret;       /* the call's cudaError_t or CUresult */
	uint32_t pad2;
};

struct gt_gpu_pystack {
	struct gt_gpu_header h;
	uint64_t id;
	uint16_t nframes;
	uint8_t truncated;
	uint8_t pad[5];
	struct gt_py_frame frames[]; /* innermost first */
};

/* NVTX (nvtx_injection.h in the agent): the agent is the process's NVTX injection, so every
 * range is timed in the process. Times are CLOCK_MONOTONIC. */
#define GT_NVTX_DOMAIN_MAX 128u   /* longer domain names are cut */
#define GT_NVTX_MESSAGE_MAX 1024u /* longer messages are cut */

enum gt_nvtx_range_kind {
	GT_NVTX_PUSH_POP = 1,    /* nvtxRangePush / nvtxDomainRangePushEx ... Pop: nested per thread */
	GT_NVTX_START_END = 2,   /* nvtxRangeStart / End: may end on another thread */
};

struct gt_nvtx_range {
	struct gt_gpu_header h; /* correlation: 0 */
	uint64_t start;
	uint64_t end;
	uint64_t payload;     /* raw bits, as payload_type says */
	uint32_t tid;         /* the thread that opened it */
	uint32_t end_tid;     /* the thread that ended it */
	uint32_t category;    /* 0: none */
	uint8_t payload_type; /* nvtxPayloadType_t, 0: none */
	uint8_t kind;         /* enum gt_nvtx_range_kind */
	uint16_t depth;       /* push/pop: nesting level in its domain on its thread, 0 outermost */
	uint16_t domain_len;  /* 0: the default domain */
	uint16_t message_len;
	uint32_t pad;
	char text[];          /* the domain's name, then the message; neither terminated */
};

/* What the agent did with a module's NVTX table (nvtxGlobals_v3) that gtrace named in attach mode. */
enum gt_nvtx_table_status {
	GT_NVTX_TABLE_INSTALLED = 1,   /* initialized without a tool: the agent's functions are in it now */
	GT_NVTX_TABLE_INITIALIZED = 2, /* never used yet: the agent initialized it, as NVTX's own init would */
	GT_NVTX_TABLE_OURS = 3,        /* already the agent's (record mode, or an earlier capture) */
	GT_NVTX_TABLE_OTHER_TOOL = 4,  /* another NVTX injection (nsys, CUPTI) serves it: left alone */
	GT_NVTX_TABLE_BUSY = 5,        /* its initialization was under way on another thread throughout */
	GT_NVTX_TABLE_INVALID = 6,     /* not an NVTX v3 table as this agent knows it: left alone */
};

struct gt_nvtx_module {
	struct gt_gpu_header h;
	uint64_t table;  /* the address gtrace named */
	uint32_t status; /* enum gt_nvtx_table_status */
	uint32_t pad;
};

#endif /* __bpf__ */
#endif
