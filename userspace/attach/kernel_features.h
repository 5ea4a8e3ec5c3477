// What the running kernel offers gtrace, probed at run time: printed by `gtrace --version`, and
// the place to ask before choosing a fallback (per-probe links without uprobe_multi, …).
#pragma once
#include <string>
#include <vector>

namespace gtrace {

enum class Support { Yes, No, Unknown };

struct KernelFeature {
    std::string name;
    Support support = Support::Unknown;
    std::string detail; // what was found, or why it could not be probed
};

struct KernelFeatures {
    std::string release; // uname -r
    KernelFeature btf, uprobes, ring_buffer, attach_cookie, uprobe_multi, uprobe_session, task_storage, bpf_stats;
    std::vector<const KernelFeature*> all() const {
        return {&btf, &uprobes, &ring_buffer, &attach_cookie, &uprobe_multi, &uprobe_session, &task_storage, &bpf_stats};
    }
};

// Loads nothing that stays: each probe creates a map or a program and closes it. The BPF probes
// need root or CAP_BPF; without them they are Unknown, and say so. GTRACE_KERNEL_BTF overrides
// the BTF path, as for the pre-flight check.
KernelFeatures probe_kernel_features();
// The two link types the CUDA probes choose between (also in probe_kernel_features()).
KernelFeature probe_uprobe_multi();
KernelFeature probe_uprobe_session();

} // namespace gtrace
