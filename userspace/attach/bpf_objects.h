// Helpers for BPF objects that join a session: sharing maps, and the one error shape for BPF
// refusals. Used by BpfSession and the objects it loads.
#pragma once
#include <bpf/libbpf.h>

#include <initializer_list>
#include <string>

#include "foundation/result.h"

namespace gtrace {

// A BPF failure as the user sees it: permissions (exit 6) or the kernel refusing (exit 7).
Error bpf_error(const char* what, int err);

struct SharedMap {
    bpf_map* mine;   // the map as declared in an object not loaded yet
    bpf_map* shared; // the loaded map it must become
};

// Makes an object's maps the already loaded ones, so that every object sees one tree, one ring
// buffer, one set of counters and one table of Python stacks sent.
Result<void> share_maps(std::initializer_list<SharedMap> maps);

// An object not loaded yet joins the session: the tree, ring buffer, counters, Python layouts and
// agent slots of the loaded process-tree object `proc`, and its ring wakeup threshold.
template <typename Skeleton, typename Proc>
Result<void> join_session(Skeleton* skel, const Proc* proc) {
    skel->rodata->wakeup_threshold = proc->rodata->wakeup_threshold;
    return share_maps({{skel->maps.tracked, proc->maps.tracked},
                       {skel->maps.events, proc->maps.events},
                       {skel->maps.counters, proc->maps.counters},
                       {skel->maps.py_layouts, proc->maps.py_layouts},
                       {skel->maps.agent_slots, proc->maps.agent_slots}});
}

// An object that walks Python stacks shares the table of stacks sent and the ring their
// definitions go to with the CUDA object (`stacks`), which owns both.
template <typename Skeleton, typename StackMaps>
Result<void> join_stack_maps(Skeleton* skel, const StackMaps& stacks) {
    return share_maps({{skel->maps.py_stacks_sent, stacks.py_stacks_sent()}, {skel->maps.py_stack_defs, stacks.py_stack_defs()}});
}

} // namespace gtrace
