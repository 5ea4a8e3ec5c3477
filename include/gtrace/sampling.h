/* Timer samples of the tracked tree's on-CPU threads: native user stack (frame pointers) and
 * Python stack. Shared by BPF and userspace; fixed-size fields only. */
#ifndef GTRACE_SAMPLING_H
#define GTRACE_SAMPLING_H

#include "gtrace/pystack.h"

#define GT_NATIVE_MAX_FRAMES 64

struct gt_sample_event {
	unsigned char cls; /* GT_EV_SAMPLE */
	unsigned char pad[3];
	unsigned int pid;
	unsigned int tid;
	int native_bytes; /* bytes of `native` filled by bpf_get_stack, or a negative error */
	unsigned long long ts_ns;
	char comm[16];
	unsigned long long py_stack; /* id of the thread's Python stack (gtrace/pystack.h); 0: none */
	unsigned char py_status;     /* enum gt_py_status */
	unsigned char pad2[7];
	unsigned long long native[GT_NATIVE_MAX_FRAMES]; /* innermost first: the sampled IP, then return addresses */
};

#endif
