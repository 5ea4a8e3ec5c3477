#include "attach/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attach/uprobe_multi.h"
#include "foundation/privilege.h"
#include "attach/bpf_objects.h"
#include "attach/cuda_object.h"
#include "attach/kernel_features.h"
#include "proctree.skel.h"
#include "sampling.skel.h"
#include "offcpu.skel.h"
#include "torch_ranges.skel.h"
#include "comm.skel.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>

namespace gtrace {
namespace {

// libbpf's own messages only with GTRACE_LIBBPF_DEBUG set; gtrace reports failures itself.
int libbpf_print(enum libbpf_print_level, const char* fmt, va_list args) {
    static const bool debug = own_env("GTRACE_LIBBPF_DEBUG") != nullptr;
    return debug ? vfprintf(stderr, fmt, args) : 0;
}

// One link per probe holds a perf event and a BPF link open for each probe: a library's API table
// (entries and returns) alone passes the soft limit of 1024 descriptors most processes start with
// (found booting Debian's 6.1: "Too many open files" from the third library on). The soft limit
// goes up to the hard one, and the hard one to kWantedFds where gtrace may (CAP_SYS_RESOURCE).
void raise_fd_limit() {
    constexpr rlim_t kWantedFds = 65536;
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < kWantedFds) {
        rlimit more{kWantedFds, kWantedFds};
        if (setrlimit(RLIMIT_NOFILE, &more) == 0) return;
    }
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

uint64_t round_ring_size(uint64_t bytes) {
    uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    uint64_t size = page;
    while (size < bytes) size <<= 1;
    return size;
}

} // namespace

Error bpf_error(const char* what, int err) {
    err = err < 0 ? -err : err;
    if (err == EPERM || err == EACCES)
        return make_error(ExitCode::Privileges, std::string(what) +
                                                    ": permission denied; run as root or grant CAP_BPF and CAP_PERFMON");
    return make_error(ExitCode::KernelUnsupported,
                      std::string(what) + ": " + strerror(err) + "; this kernel refused BPF (needs BTF, uprobes, ring buffers)");
}

Result<void> share_maps(std::initializer_list<SharedMap> maps) {
    for (const auto& m : maps) {
        bpf_map__set_max_entries(m.mine, bpf_map__max_entries(m.shared));
        if (int err = bpf_map__reuse_fd(m.mine, bpf_map__fd(m.shared))) return bpf_error("sharing BPF maps", err);
    }
    return {};
}

UprobeLink::~UprobeLink() {
    if (link_) bpf_link__destroy(link_);
    if (fd_ >= 0) close(fd_);
}

namespace {

int link_probe_sites(int prog_fd, const std::string& path, const std::vector<ApiProbeSite>& sites, bool at_return,
                     uint32_t attach_type = kTraceUprobeMulti) {
    std::vector<uint64_t> offsets, cookies;
    for (const auto& s : sites) {
        offsets.push_back(s.offset);
        cookies.push_back(s.cookie);
    }
    return gtrace::create_uprobe_multi_link(prog_fd, path.c_str(), offsets.data(), cookies.data(),
                                            static_cast<uint32_t>(sites.size()), at_return, attach_type);
}

Error probe_error(const std::string& shown, int err) {
    if (err == EPERM || err == EACCES) return bpf_error(("attaching a uprobe to " + shown).c_str(), err);
    return make_error(ExitCode::Internal, "cannot probe " + shown + ": " + strerror(err) + "; its calls are not traced");
}

} // namespace

Result<std::unique_ptr<BpfSession>> BpfSession::create(const BpfOptions& options) {
    libbpf_set_print(libbpf_print);
    if (auto r = check_kernel_features(); !r) return r.error(); // one line, not a verifier log
    std::unique_ptr<BpfSession> s(new BpfSession());

    s->proc_ = gtrace_proctree__open();
    if (!s->proc_) return bpf_error("opening the process-tree BPF object", errno);
    uint64_t ring = round_ring_size(options.ring_buffer_bytes);
    bpf_map__set_max_entries(s->proc_->maps.events, static_cast<uint32_t>(ring));
    s->proc_->rodata->wakeup_threshold = ring / 4;
    // The mmap notification is optional (needs the syscalls tracepoints); polling covers its absence.
    bpf_program__set_autoattach(s->proc_->progs.on_mmap, false);
    if (int err = gtrace_proctree__load(s->proc_)) return bpf_error("loading the process-tree BPF programs", err);

    auto cuda = CudaObject::load(s->proc_, options.py_stack_every);
    if (!cuda) return cuda.error();
    s->cuda_ = std::move(*cuda);
    if (s->cuda_->mode() == CudaProbeMode::PerProbe) raise_fd_limit();

    if (auto r = s->load_torch_ranges(); !r) return r.error();
    if (auto r = s->load_comm(); !r) return r.error();
    if (int err = gtrace_proctree__attach(s->proc_)) return bpf_error("attaching sched fork/exec/exit tracepoints", err);
    s->mmap_link_ = bpf_program__attach(s->proc_->progs.on_mmap); // nullptr: fall back to polling
    if (options.sample_hz)
        if (auto r = s->start_sampling(options.sample_hz); !r) return r.error();
    if (options.off_cpu)
        if (auto r = s->start_off_cpu(); !r) return r.error();
    if (options.stats && (s->stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0)
        return bpf_error("enabling BPF run-time statistics (--bpf-stats)", errno);
    return s;
}

std::vector<ProgramStats> BpfSession::program_stats() const {
    std::vector<ProgramStats> out;
    if (stats_fd_ < 0) return out;
    std::vector<bpf_program*> progs = cuda_->programs();
    progs.push_back(torch_->progs.torch_range_probe);
    progs.push_back(comm_->progs.comm_probe);
    progs.push_back(proc_->progs.on_mmap);
    if (sampling_) progs.push_back(sampling_->progs.on_sample);
    if (offcpu_) progs.push_back(offcpu_->progs.on_switch);
    for (bpf_program* p : progs) {
        bpf_prog_info info{};
        uint32_t len = sizeof info;
        if (bpf_program__fd(p) < 0 || bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0) continue;
        out.push_back({bpf_program__name(p), info.run_cnt, info.run_time_ns});
    }
    return out;
}

Result<void> BpfSession::load_torch_ranges() {
    torch_ = gtrace_torch_ranges__open();
    if (!torch_) return bpf_error("opening the PyTorch range BPF object", errno);
    if (auto r = join_session(torch_, proc_); !r) return r;
    if (auto r = join_stack_maps(torch_, *cuda_); !r) return r;
    if (cuda_->mode() != CudaProbeMode::PerProbe)
        bpf_program__set_expected_attach_type(torch_->progs.torch_range_probe, static_cast<bpf_attach_type>(kTraceUprobeMulti));
    if (int err = gtrace_torch_ranges__load(torch_)) return bpf_error("loading the PyTorch range BPF program", err);
    return {};
}

Result<void> BpfSession::load_comm() {
    comm_ = gtrace_comm__open();
    if (!comm_) return bpf_error("opening the collective BPF object", errno);
    if (auto r = join_session(comm_, proc_); !r) return r;
    if (cuda_->mode() != CudaProbeMode::PerProbe)
        bpf_program__set_expected_attach_type(comm_->progs.comm_probe, static_cast<bpf_attach_type>(kTraceUprobeMulti));
    if (int err = gtrace_comm__load(comm_)) return bpf_error("loading the collective BPF program", err);
    return {};
}

Result<void> BpfSession::start_sampling(uint32_t hz) {
    sampling_ = gtrace_sampling__open();
    if (!sampling_) return bpf_error("opening the sampling BPF object", errno);
    if (auto r = join_session(sampling_, proc_); !r) return r;
    if (auto r = join_stack_maps(sampling_, *cuda_); !r) return r;
    if (int err = gtrace_sampling__load(sampling_)) return bpf_error("loading the sampling BPF program", err);
    int ncpu = libbpf_num_possible_cpus();
    for (int cpu = 0; cpu < ncpu; ++cpu) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.freq = 1;
        attr.sample_freq = hz;
        int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
        if (fd < 0) {
            if (errno == ENODEV || errno == ENOENT) continue; // CPU offline
            return bpf_error("opening the sampling timer (perf_event_open)", errno);
        }
        bpf_link* link = bpf_program__attach_perf_event(sampling_->progs.on_sample, fd);
        if (!link) {
            int err = errno;
            close(fd);
            return bpf_error("attaching the sampling program", err);
        }
        sample_links_.push_back(link); // the link owns the perf event fd
    }
    return {};
}

Result<void> BpfSession::start_off_cpu() {
    offcpu_ = gtrace_offcpu__open();
    if (!offcpu_) return bpf_error("opening the off-CPU BPF object", errno);
    if (auto r = join_session(offcpu_, proc_); !r) return r;
    if (auto r = join_stack_maps(offcpu_, *cuda_); !r) return r;
    if (int err = gtrace_offcpu__load(offcpu_)) return bpf_error("loading the off-CPU BPF program", err);
    if (int err = gtrace_offcpu__attach(offcpu_)) return bpf_error("attaching the sched_switch program (off-CPU time)", err);
    return {};
}

BpfSession::~BpfSession() {
    if (offcpu_) gtrace_offcpu__destroy(offcpu_);
    if (stats_fd_ >= 0) close(stats_fd_);
    for (bpf_link* link : sample_links_) bpf_link__destroy(link);
    if (sampling_) gtrace_sampling__destroy(sampling_);
    if (mmap_link_) bpf_link__destroy(mmap_link_);
    if (torch_) gtrace_torch_ranges__destroy(torch_);
    if (comm_) gtrace_comm__destroy(comm_);
    cuda_.reset();
    if (proc_) gtrace_proctree__destroy(proc_);
}

Result<void> BpfSession::track(uint32_t pid) {
    uint32_t zero = 0;
    if (bpf_map__update_elem(proc_->maps.tracked, &pid, sizeof(pid), &zero, sizeof(zero), BPF_ANY))
        return make_error(ExitCode::Internal, "cannot track pid " + std::to_string(pid) + ": " + strerror(errno));
    return {};
}

void BpfSession::untrack(uint32_t pid) { bpf_map__delete_elem(proc_->maps.tracked, &pid, sizeof(pid), 0); }

bool BpfSession::is_tracked(uint32_t pid) const {
    uint32_t value = 0;
    return bpf_map__lookup_elem(proc_->maps.tracked, &pid, sizeof(pid), &value, sizeof(value), 0) == 0;
}

Result<std::vector<UprobeLink>> BpfSession::attach_api_probes(const std::string& path, const std::string& shown,
                                                              const std::vector<ApiProbeSite>& sites, bool at_return) {
    if (cuda_->mode() == CudaProbeMode::Session) {
        if (at_return) return std::vector<UprobeLink>{}; // the session program serves both
        int fd = link_probe_sites(bpf_program__fd(cuda_->entry()), path, sites, false, kTraceUprobeSession);
        if (fd < 0) return probe_error(shown, errno);
        std::vector<UprobeLink> links;
        links.emplace_back(fd);
        return links;
    }
    return attach_probes(at_return ? cuda_->exit() : cuda_->entry(), path, shown, sites, at_return);
}

Result<std::vector<UprobeLink>> BpfSession::attach_torch_probes(const std::string& path, const std::string& shown,
                                                                const std::vector<ApiProbeSite>& sites) {
    return attach_probes(torch_->progs.torch_range_probe, path, shown, sites, false);
}

Result<std::vector<UprobeLink>> BpfSession::attach_comm_probes(const std::string& path, const std::string& shown,
                                                               const std::vector<ApiProbeSite>& sites) {
    return attach_probes(comm_->progs.comm_probe, path, shown, sites, false);
}

Result<std::vector<UprobeLink>> BpfSession::attach_probes(bpf_program* prog, const std::string& path, const std::string& shown,
                                                          const std::vector<ApiProbeSite>& sites, bool at_return) {
    auto failed = [&](int err) { return probe_error(shown, err); };
    std::vector<UprobeLink> links;
    if (cuda_->mode() != CudaProbeMode::PerProbe) {
        int fd = link_probe_sites(bpf_program__fd(prog), path, sites, at_return);
        if (fd < 0) return failed(errno);
        links.emplace_back(fd);
        return links;
    }
    for (const auto& site : sites) {
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = site.cookie, .retprobe = at_return);
        bpf_link* link = bpf_program__attach_uprobe_opts(prog, -1, path.c_str(), site.offset, &opts);
        if (!link) return failed(errno);
        links.emplace_back(link);
    }
    return links;
}

Result<gt_py_layout> BpfSession::set_python_layout(uint32_t pid, gt_py_layout layout) {
    layout.epoch = ++layout_epoch_; // stack ids of this image never collide with an earlier one's
    if (bpf_map__update_elem(proc_->maps.py_layouts, &pid, sizeof(pid), &layout, sizeof(layout), BPF_ANY))
        return make_error(ExitCode::Internal, "cannot record the Python layout of pid " + std::to_string(pid) + ": " +
                                                  strerror(errno));
    return layout;
}

void BpfSession::clear_python_layout(uint32_t pid) { bpf_map__delete_elem(proc_->maps.py_layouts, &pid, sizeof(pid), 0); }

Result<UprobeLink> BpfSession::attach_agent_probe(const std::string& path, uint64_t offset) {
    if (cuda_->mode() != CudaProbeMode::PerProbe) {
        int fd = link_probe_sites(bpf_program__fd(cuda_->announce()), path, {{offset, 0}}, false);
        if (fd < 0) return bpf_error(("attaching a uprobe to the agent " + path).c_str(), errno);
        return UprobeLink(fd);
    }
    bpf_link* link = bpf_program__attach_uprobe(cuda_->announce(), false, -1, path.c_str(), offset);
    if (!link) return bpf_error(("attaching a uprobe to the agent " + path).c_str(), errno);
    return UprobeLink(link);
}


int BpfSession::ring_buffer_fd() const { return bpf_map__fd(proc_->maps.events); }
int BpfSession::py_stack_ring_fd() const { return bpf_map__fd(cuda_->py_stack_defs()); }

std::array<uint64_t, GT_CNT_COUNT> BpfSession::read_counters() const {
    std::array<uint64_t, GT_CNT_COUNT> totals{};
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return totals;
    std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
    for (uint32_t i = 0; i < GT_CNT_COUNT; ++i) {
        if (bpf_map__lookup_elem(proc_->maps.counters, &i, sizeof(i), per_cpu.data(),
                                 per_cpu.size() * sizeof(uint64_t), 0))
            continue;
        for (uint64_t v : per_cpu) totals[i] += v;
    }
    return totals;
}

} // namespace gtrace
