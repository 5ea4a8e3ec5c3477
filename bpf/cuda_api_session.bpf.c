// SPDX-License-Identifier: GPL-2.0
/* One uprobe session program on the CUDA runtime and driver API (kernel 6.13+,
 * cuda_calls.bpf.h): it runs at a function's entry and, when the entry returned 0, at its
 * return. Calls of untraced processes and calls nested in a traced call return 1 at entry and
 * cost no return trap. Loaded by userspace only where the kernel has sessions (the kfunc below
 * does not exist before). */
#include "cuda_calls.bpf.h"

extern bool bpf_session_is_return(void) __ksym;

SEC("uprobe")
int cuda_api_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		gt_call_exit(ctx);
		return 0;
	}
	return gt_call_enter(ctx, true);
}

char LICENSE[] SEC("license") = "GPL";
