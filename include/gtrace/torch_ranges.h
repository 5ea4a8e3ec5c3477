/* PyTorch record_function ranges (Optimizer.step#…, enumerate(DataLoader)#…, user ranges) from
 * uprobes on libtorch, shared by BPF and userspace. Fixed-size fields only. */
#ifndef GTRACE_TORCH_RANGES_H
#define GTRACE_TORCH_RANGES_H

#define GT_RANGE_NAME_LEN 128

/* What a libtorch probe site is (its BPF cookie). */
enum gt_torch_site {
	GT_TORCH_RANGE_BEGIN = 1, /* at::RecordFunction::RecordFunction(at::RecordScope) */
	GT_TORCH_RANGE_END = 2,   /* at::RecordFunction::end() and ~RecordFunction() */
	GT_TORCH_RANGE_NAME = 3,  /* torch::autograd::profiler::record_function_enter_new(name, args) */
	GT_TORCH_BACKWARD = 4,     /* THPEngine_run_backward's entry: Python starts a backward pass */
	GT_TORCH_BACKWARD_RET = 5, /* ... one of its ret instructions: the pass is over */
};

/* What a range event is. A backward pass (loss.backward(), torch.autograd.grad) is sent when it
 * begins too: the autograd engine's device threads launch its kernels meanwhile, without any
 * Python frame of their own, and gtrace gives those launches the stack that began the pass. */
enum gt_range_kind {
	GT_RANGE_USER = 0,           /* a user-scope RecordFunction range */
	GT_RANGE_BACKWARD_BEGUN = 1, /* a backward pass began (end_ns 0) */
	GT_RANGE_BACKWARD = 2,       /* a backward pass, begin to end */
};

/* at::RecordScope::USER_SCOPE in torch 1.13 to 2.x (record_function.h): the scope of Python's
 * record_function and of RECORD_USER_SCOPE. */
#define GT_TORCH_USER_SCOPE 7

/* One finished range, with the id of the Python stack taken at its beginning (gtrace/pystack.h). */
struct gt_torch_range_event {
	unsigned char cls; /* GT_EV_TORCH_RANGE */
	unsigned char named; /* name holds the range's own name (torch 2.x); else name it from its stack */
	unsigned char py_status; /* enum gt_py_status */
	unsigned char kind; /* enum gt_range_kind */
	unsigned int pid;
	unsigned int tid;
	unsigned int pad2;
	unsigned long long py_stack;
	unsigned long long start_ns; /* CLOCK_MONOTONIC */
	unsigned long long end_ns;
	char name[GT_RANGE_NAME_LEN];
};

#endif
