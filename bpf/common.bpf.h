/* Maps and helpers shared by every gtrace BPF object. Each object declares the same maps;
 * userspace loads proctree first and makes the others reuse its map fds, so they share them. */
#ifndef GTRACE_COMMON_BPF_H
#define GTRACE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "gtrace/events.h"
#include "gtrace/pystack.h"

#ifndef PT_REGS_PARM6 /* libbpf before 1.2 stops at five */
#define PT_REGS_PARM6(x) ((x)->r9)
#endif

#define GT_MAX_TRACKED 16384

/* Processes (tgids) of the tracked tree. The value is unused. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

/* Per-process interpreter layout (gtrace/pystack.h), written by userspace once it knows the
 * version; removed at exec (below in proctree), so a new image is never walked with the old one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct gt_py_layout);
} py_layouts SEC(".maps");

/* Per process with an active agent: the address of its correlation slots (gtrace/agent.h), set
 * by the agent's announce and removed at exec and exit — here in BPF, in order: userspace would
 * see the exec after the new image's agent announced, and wipe the announce. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} agent_slots SEC(".maps");

/* All events; size set by userspace before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

/* Lost events per class, and the other counters of enum gt_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GT_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Wake the reader only when the ring is a quarter full; it also polls on a short timer.
 * Saves a wakeup per event on the traced thread's path. */
const volatile __u64 wakeup_threshold = 1 << 22;

static __always_inline void gt_count(__u32 index)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &index);
	if (value)
		*value += 1;
}

/* Ring buffer space for one event of class `cls`; a failure is counted as a loss of that class. */
static __always_inline void *gt_reserve(__u64 size, __u32 cls)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);
	if (!e)
		gt_count(cls);
	return e;
}

static __always_inline bool gt_is_tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

static __always_inline __u64 gt_submit_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_threshold ? BPF_RB_FORCE_WAKEUP
										   : BPF_RB_NO_WAKEUP;
}

#endif
