/* Events sent from BPF to userspace through the ring buffer, and the loss counters.
 * Shared by the BPF programs and userspace: fixed-size fields only. */
#ifndef GTRACE_EVENTS_H
#define GTRACE_EVENTS_H

#define GT_REG_ARGS 6      /* x86-64 SysV integer argument registers */
#define GT_STACK_ARGS 3    /* arguments 7..9 */
#define GT_CONFIG_WORDS 5  /* cudaLaunchConfig_t / CUlaunchConfig up to and including the stream */
#define GT_NAME_LEN 256    /* kernel names captured at cuModuleGetFunction and friends */
#define GT_COMM_LEN 16
#define GT_PROC_ARGV_LEN 256

/* Event classes: the first byte of every ring buffer record, and the index of its loss counter. */
enum gt_event_class {
	GT_EV_API = 1,       /* one CUDA API call, enter to return */
	GT_EV_FUNC_NAME = 2, /* a driver function handle and the kernel name it was looked up by */
	GT_EV_PROC = 3,      /* fork, exec or exit of a process in the tracked tree */
	GT_EV_MMAP = 4,      /* a tracked process mapped a file executable: rescan its objects */
	GT_EV_PYSTACK = 5,   /* a Python stack seen for the first time: its id and frames (gtrace/pystack.h) */
	GT_EV_SAMPLE = 6,    /* a timer sample of an on-CPU thread (gtrace/sampling.h) */
	GT_EV_TORCH_RANGE = 7, /* a PyTorch record_function range (gtrace/torch_ranges.h) */
	GT_EV_COLLECTIVE = 8,  /* a c10d collective call or a wait on its Work (gtrace/comm.h) */
	GT_EV_OFFCPU = 9,      /* a main thread's time asleep, off the CPU (gtrace/offcpu.h) */
	GT_EV_NCCL = 10,       /* an NCCL API call (gtrace/comm.h's struct, phase GT_COMM_NCCL): lost apart from c10d's */
	GT_EV_CLASS_COUNT = 11,
};

/* Other counters kept beside the per-class losses (index into the same array). */
enum gt_counter {
	GT_CNT_ENTRY_STATE_FULL = GT_EV_CLASS_COUNT, /* a call not traced: no per-thread state, or nested too deep */
	GT_CNT_RETURN_WITHOUT_ENTRY,                 /* return seen for a call whose entry was missed */
	GT_CNT_TRACKED_FULL,                         /* a new process could not be added to the tree */
	GT_CNT_RANGES_OPEN_FULL,                     /* a torch range's beginning could not be remembered */
	GT_CNT_COLLECTIVES_OPEN_FULL,                /* a collective's Work could not be remembered for its wait */
	GT_CNT_OFFCPU_SHORT,                         /* off-CPU intervals shorter than the recorded minimum ... */
	GT_CNT_OFFCPU_SHORT_NS,                      /* ... and their time */
	GT_CNT_COLLECTIVES_NO_STATE,                 /* a c10d collective or wait not traced: no per-thread state */
	GT_CNT_COUNT,
};

enum gt_proc_kind {
	GT_PROC_FORK = 1,
	GT_PROC_EXEC = 2,
	GT_PROC_EXIT = 3,
};

enum gt_api_event_flags {
	GT_API_EV_AGENT_RECORDS = 1, /* the process's agent recorded this call too (its slot said so) */
};

struct gt_api_event {
	unsigned char cls; /* GT_EV_API */
	unsigned char api; /* enum gt_cuda_api */
	unsigned char flags;     /* enum gt_api_event_flags */
	unsigned char py_status; /* enum gt_py_status of the walk at the call's entry */
	unsigned int pid; /* tgid */
	unsigned int tid;
	unsigned int correlation; /* CUPTI correlation id when the process's agent is active, else 0 */
	unsigned long long enter_ns; /* CLOCK_MONOTONIC */
	unsigned long long exit_ns;
	long long ret;
	unsigned long long args[GT_REG_ARGS];
	unsigned long long stack_args[GT_STACK_ARGS];
	unsigned long long config[GT_CONFIG_WORDS];
	unsigned long long out_value; /* *arg0 after the call (GT_CAP_OUT_PTR_ARG0) */
	unsigned long long py_stack;  /* id of the Python stack at entry (gtrace/pystack.h); 0: none */
	char comm[GT_COMM_LEN]; /* thread name, on a thread's first event only (empty after) */
};

struct gt_func_name_event {
	unsigned char cls; /* GT_EV_FUNC_NAME */
	unsigned char api;
	unsigned short pad;
	unsigned int pid;
	unsigned long long handle;  /* CUfunction or CUkernel written to *arg0 */
	unsigned long long source;  /* for cuKernelGetFunction: the CUkernel it came from */
	char name[GT_NAME_LEN];
};

struct gt_proc_event {
	unsigned char cls; /* GT_EV_PROC */
	unsigned char kind; /* enum gt_proc_kind */
	unsigned short pad;
	unsigned int pid;
	unsigned int ppid; /* fork: the parent process */
	int exit_code;
	unsigned long long ts_ns;
	char comm[GT_COMM_LEN];
	/* exec: the new image's argv as /proc/PID/cmdline has it (NUL-separated), its first
	 * argv_len bytes: a process that exits before userspace reads /proc is still named. */
	unsigned short argv_len;
	unsigned short pad2[3];
	char argv[GT_PROC_ARGV_LEN];
};

struct gt_mmap_event {
	unsigned char cls; /* GT_EV_MMAP */
	unsigned char pad[3];
	unsigned int pid;
	unsigned long long ts_ns;
};

#endif
