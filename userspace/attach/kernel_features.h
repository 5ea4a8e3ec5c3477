// What the running kernel offers gtrace, probed at run time: printed by `gtrace --version`, asked
// before choosing a fallback (per-probe links without uprobe_multi, …), and checked before any
// BPF object is loaded so that an older kernel gets one line naming what it lacks.
#pragma once
#include <string>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

enum class Support { Yes, No, Unknown };

struct KernelFeature {
    std::string name;
    Support support = Support::Unknown;
    std::string detail; // what was found, or why it could not be probed
};

struct KernelFeatures {
    std::string release; // uname -r
    KernelFeature btf, uprobes, ring_buffer, attach_cookie, uprobe_multi, uprobe_session, task_storage, bpf_loop,
        bpf_stats;
    std::vector<const KernelFeature*> all() const {
        return {&btf, &uprobes, &ring_buffer, &attach_cookie, &uprobe_multi, &uprobe_session, &task_storage, &bpf_loop,
                &bpf_stats};
    }
};

// Loads nothing that stays: each probe creates a map or a program and closes it. The BPF probes
// need root or CAP_BPF; without them they are Unknown, and say so. the test hook GTRACE_TEST_KERNEL_BTF overrides
// the BTF path, as for the pre-flight check.
KernelFeatures probe_kernel_features();
// The two link types the CUDA probes choose between (also in probe_kernel_features()).
KernelFeature probe_uprobe_multi();
KernelFeature probe_uprobe_session();

// The BPF features gtrace's programs have no fallback for (ring buffer, task storage, uprobe
// attach cookies, bpf_loop), probed before any program is loaded: exit 7 with one line naming
// the ones this kernel lacks. A feature that could not be probed is left to the load to report.
// Keep in step with bpf/*.bpf.c: a feature given a fallback there leaves the list.
Result<void> check_kernel_features();

} // namespace gtrace
