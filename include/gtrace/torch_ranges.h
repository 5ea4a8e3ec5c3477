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
	/* --autograd-links only (a hit per autograd node, forward and backward): */
	GT_TORCH_SEQUENCE_RET = 6, /* at::sequence_number::get_and_increment's ret: a forward op made a node */
	GT_TORCH_NODE = 7,         /* torch::autograd::Engine::evaluate_function's entry: a node runs */
	GT_TORCH_NODE_RET = 8,     /* ... one of its ret instructions */
};

/* What a range event is. A backward pass (loss.backward(), torch.autograd.grad) is sent when it
 * begins too: the autograd engine's device threads launch its kernels meanwhile, without any
 * Python frame of their own, and gtrace gives those launches the stack that began the pass. */
enum gt_range_kind {
	GT_RANGE_USER = 0,           /* a user-scope RecordFunction range */
	GT_RANGE_BACKWARD_BEGUN = 1, /* a backward pass began (end_ns 0) */
	GT_RANGE_BACKWARD = 2,       /* a backward pass, begin to end */
	/* Forward op to backward node (--autograd-links): autograd numbers each node it creates with
	 * the creating thread's next sequence number and runs it, in backward, under that number —
	 * the link PyTorch's profiler draws. */
	GT_RANGE_FORWARD_OP = 3, /* a forward op made node `sequence_nr`: its Python stack (start_ns only) */
	GT_RANGE_NODE_BEGUN = 4, /* node `sequence_nr` began running on tid (its frame: `sp`) */
	GT_RANGE_NODE_ENDED = 5, /* the node whose frame is `sp` returned on tid (end_ns) */
};

/* Where torch::autograd::Node keeps its sequence_nr_. It moved between releases: 24 in Debian's
 * 1.13 (after the vtable pointer and enable_shared_from_this's weak_ptr; checked with gdb), 16 in
 * pip's 2.15. gtrace reads it from the install's own libtorch_python (the Python getter of a
 * C++ node's sequence_nr loads it: attach/torch_probes.cpp) and passes it in the GT_TORCH_NODE
 * site's cookie, above bit 32; this is the default where that getter does not exist (1.13). */
#define GT_TORCH_NODE_SEQUENCE_OFFSET 24
#define GT_TORCH_SITE_MASK 0xffffffffULL

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
	unsigned long long sequence_nr; /* GT_RANGE_FORWARD_OP, GT_RANGE_NODE_BEGUN */
	unsigned long long sp;          /* GT_RANGE_NODE_*: the node's frame on its thread */
	char name[GT_RANGE_NAME_LEN];
};

#endif
