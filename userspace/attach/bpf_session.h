// The loaded BPF side of a capture: the process-tree object and the CUDA API uprobe object,
// sharing the tracked-process map, the ring buffer and the counters. Destroying the session
// detaches every link and frees every map (RAII over the skeletons).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attach/cuda_object.h"
#include "foundation/result.h"
#include "gtrace/events.h"
#include "gtrace/pystack.h"

struct gtrace_proctree;
struct gtrace_sampling;
struct gtrace_offcpu;
struct gtrace_torch_ranges;
struct gtrace_comm;
struct bpf_program;
struct bpf_link;

namespace gtrace {

struct BpfOptions {
    uint64_t ring_buffer_bytes = 64ull << 20;
    uint32_t py_stack_every = 1; // Python stack at every Nth CUDA call of a thread; 0: never
    uint32_t sample_hz = 100;    // timer samples per second per CPU; 0: no sampling
    bool stats = false;          // count runs and run time of every gtrace BPF program (--bpf-stats)
    bool off_cpu = true;         // main threads' time asleep (sched_switch), so blocked is not counted busy
};

// How often one of gtrace's BPF programs ran, and for how long (kernel BPF stats).
struct ProgramStats {
    std::string name;
    uint64_t runs = 0, run_ns = 0;
};

// Attached uprobes (one libbpf link, or a multi-uprobe link's fd); detached when destroyed.
class UprobeLink {
public:
    explicit UprobeLink(bpf_link* link) : link_(link) {}
    explicit UprobeLink(int multi_fd) : fd_(multi_fd) {}
    UprobeLink(UprobeLink&& o) noexcept : link_(o.link_), fd_(o.fd_) {
        o.link_ = nullptr;
        o.fd_ = -1;
    }
    UprobeLink& operator=(UprobeLink&&) = delete;
    UprobeLink(const UprobeLink&) = delete;
    ~UprobeLink();

private:
    bpf_link* link_ = nullptr;
    int fd_ = -1;
};

// One probe of a file: where, and the cookie that tells the BPF program which API it is.
struct ApiProbeSite {
    uint64_t offset = 0;
    uint64_t cookie = 0;
};

class BpfSession {
public:
    static Result<std::unique_ptr<BpfSession>> create(const BpfOptions& options);
    ~BpfSession();

    Result<void> track(uint32_t pid);
    void untrack(uint32_t pid);
    bool is_tracked(uint32_t pid) const;
    // Where a process's CPython keeps its frames; its CUDA calls then carry Python stacks.
    Result<gt_py_layout> set_python_layout(uint32_t pid, gt_py_layout layout); // with its epoch
    void clear_python_layout(uint32_t pid);
    // Probe the agent's announce function: each process's agent then tells BPF where it
    // publishes correlation ids, and that process's calls carry them.
    Result<UprobeLink> attach_agent_probe(const std::string& path, uint64_t offset);

    // Entry or return uprobes on every site of a file, for every process; BPF keeps the tracked
    // ones. One multi-uprobe link per call where the kernel has them (6.6+): attaching and,
    // above all, detaching is then one operation instead of one RCU wait per probe. `path` is
    // what the kernel opens (an InputFile's fd_path()), `shown` the file's name for messages.
    Result<std::vector<UprobeLink>> attach_api_probes(const std::string& path, const std::string& shown,
                                                      const std::vector<ApiProbeSite>& sites, bool at_return);

    // Entry uprobes on libtorch's record_function sites (cookies: enum gt_torch_site).
    Result<std::vector<UprobeLink>> attach_torch_probes(const std::string& path, const std::string& shown,
                                                        const std::vector<ApiProbeSite>& sites);

    // Entry uprobes on c10d's collectives and Work::wait, entries and ret instructions (cookies:
    // enum gt_comm_site).
    Result<std::vector<UprobeLink>> attach_comm_probes(const std::string& path, const std::string& shown,
                                                       const std::vector<ApiProbeSite>& sites);

    int ring_buffer_fd() const;
    int py_stack_ring_fd() const; // Python stack definitions (bpf/pystack.bpf.h): read on their own
    // Sum over CPUs of every counter in enum gt_counter (loss per event class and the others).
    std::array<uint64_t, GT_CNT_COUNT> read_counters() const;
    bool mmap_notifications() const { return mmap_link_ != nullptr; }
    CudaProbeMode cuda_probe_mode() const { return cuda_->mode(); }
    // Runs and run time per program since the session started (empty without BpfOptions::stats).
    std::vector<ProgramStats> program_stats() const;

private:
    BpfSession() = default;
    Result<void> start_sampling(uint32_t hz);
    Result<void> start_off_cpu();
    Result<void> load_torch_ranges();
    Result<void> load_comm();
    Result<std::vector<UprobeLink>> attach_probes(bpf_program* prog, const std::string& path, const std::string& shown,
                                                  const std::vector<ApiProbeSite>& sites, bool at_return);
    gtrace_proctree* proc_ = nullptr;
    std::unique_ptr<CudaObject> cuda_;
    bpf_link* mmap_link_ = nullptr;
    gtrace_sampling* sampling_ = nullptr;
    gtrace_offcpu* offcpu_ = nullptr; // owns its sched_switch link
    gtrace_torch_ranges* torch_ = nullptr;
    gtrace_comm* comm_ = nullptr;
    std::vector<bpf_link*> sample_links_; // one CPU-clock perf event per CPU
    int stats_fd_ = -1;
    uint32_t layout_epoch_ = 0;                   // holds the kernel's BPF run-time statistics on
};

} // namespace gtrace
