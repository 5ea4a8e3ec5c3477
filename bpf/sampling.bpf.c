// SPDX-License-Identifier: GPL-2.0
/* Timer sampling (a CPU-clock perf event per CPU): when the interrupted thread belongs to the
 * tracked tree, record its native user stack and its Python stack. The target never stops. */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "gtrace/sampling.h"

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	if (!tgid || !gt_is_tracked(tgid))
		return 0;
	struct gt_sample_event *e = gt_reserve(sizeof(*e), GT_EV_SAMPLE);
	if (!e)
		return 0;
	e->cls = GT_EV_SAMPLE;
	e->pid = tgid;
	e->tid = (__u32)pid_tgid;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->native_bytes = bpf_get_stack(ctx, e->native, sizeof(e->native), BPF_F_USER_STACK);
	e->py_stack = 0;
	e->py_status = GT_PY_NONE;
	struct gt_py_layout *layout = bpf_map_lookup_elem(&py_layouts, &tgid);
	if (layout)
		e->py_stack = gt_python_stack(layout, tgid, &e->py_status, NULL);
	bpf_ringbuf_submit(e, gt_submit_flags());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
