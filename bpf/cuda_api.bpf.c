// SPDX-License-Identifier: GPL-2.0
/* Entry and return uprobes on the CUDA runtime and driver API (cuda_calls.bpf.h), for kernels
 * without uprobe sessions: one generic program pair serves every probed function; the attach
 * cookie says which API it is and what to capture. */
#include "cuda_calls.bpf.h"

SEC("uprobe")
int cuda_api_enter(struct pt_regs *ctx)
{
	gt_call_enter(ctx, false);
	return 0;
}

SEC("uretprobe")
int cuda_api_exit(struct pt_regs *ctx)
{
	gt_call_exit(ctx);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
