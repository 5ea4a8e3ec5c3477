// The rows of gtrace's Kineto files that are there for Holistic Trace Analysis
// (docs/trace_readers.md): CPU collectives as cpu_op rows and on a lane HTA counts as
// communication, cuda_sync rows from CUPTI's synchronization records, gpu_user_annotation spans.
#include <cstring>

#include <fmt/format.h>

#include "output/kineto_writer.h"

namespace gtrace {
using kineto::begin_x;
using kineto::meta;

namespace {

// Kineto's names of CUPTI's synchronization types (CUpti_ActivitySynchronizationType), as HTA
// matches them; the event-based ones need the cudaEventRecord's correlation, which gtrace does
// not have: not written (nor UNKNOWN, on which HTA's critical path asserts).
const char* sync_name(uint32_t type) {
    switch (type) {
    case 3: return "Stream Sync";
    case 4: return "Context Sync";
    default: return nullptr;
    }
}

// A CPU collective (gloo, MPI: no NCCL kernel shows it) on a lane of the rank's GPU, named as HTA
// recognises communication (^nccl.*Kernel), so that its communication analyses see it.
constexpr uint32_t kCollectiveLaneBase = 1'000'000'000; // + the thread's tid: not a CUDA stream id
constexpr uint32_t kCollectiveCorrelationBase = 1u << 31; // above CUPTI's ids
bool is_nccl(const char* backend) { return backend && std::strcmp(backend, "nccl") == 0; }

} // namespace

// A cpu_op row (HTA's critical path takes only cpu_op and CUDA calls as CPU nodes; gtrace's
// reader knows a collective by its "phase"), and for a collective run on the CPU its lane row,
// once the process's device is known (its first GPU op may come after its first collectives),
// from the GPU records' start on.
// A collective without a backend (DDP's gradient all-reduce) has its process's.
void KinetoWriter::collective(const Collective& c) {
    File* f = file_of(c.pid);
    if (!f) return;
    const char*& backend = backend_of_pid_[c.pid];
    if (c.backend) backend = c.backend;
    bool lane = !is_nccl(backend);
    uint32_t correlation = lane ? kCollectiveCorrelationBase + next_lane_correlation_++ % kCollectiveCorrelationBase : 0;
    buf_.clear();
    begin_x(buf_, "cpu_op", c.name, c.pid, c.tid, c.start_ns, c.end_ns);
    append_collective_args(buf_, c);
    if (lane) buf_.pop_back(), buf_ += fmt::format(",\"correlation\":{}}}", correlation);
    buf_ += '}';
    emit(*f, buf_);
    if (!lane) return;
    auto& pending = pending_lanes_[c.pid];
    pending.push_back({c, correlation});
    if (pending.size() > kMaxPendingLanes) pending.pop_front();
    write_lanes(c.pid);
}

void KinetoWriter::write_lanes(uint32_t pid) {
    auto device = devices_of_pid_.find(pid);
    auto pending = pending_lanes_.find(pid);
    File* f = file_of(pid);
    if (device == devices_of_pid_.end() || pending == pending_lanes_.end() || !f) return;
    const char* backend = backend_of_pid_[pid];
    uint64_t gpu_from = gpu_span_[pid].first;
    for (const auto& [c, correlation] : pending->second) {
        if (is_nccl(backend)) break; // learnt since: its kernels show these
        if (c.start_ns < gpu_from) continue; // before the GPU records: HTA would count the GPU's time from it
        uint32_t stream = kCollectiveLaneBase + c.tid;
        if (f->lanes.insert({device->second, stream}).second) {
            std::string name = fmt::format("CPU collectives of thread {} ({})", c.tid, backend ? backend : "backend not known");
            emit(*f, meta("thread_name", device->second, stream, {{"name", name}}));
        }
        buf_.clear();
        begin_x(buf_, "cpu_collective", fmt::format("ncclKernel_{}:{} (CPU collective)", backend ? backend : "cpu", c.name),
                device->second, stream, c.start_ns, c.end_ns);
        fmt::format_to(std::back_inserter(buf_), ",\"args\":{{\"device\":{},\"stream\":{},\"correlation\":{},\"host_tid\":{}}}}}",
                       device->second, stream, correlation, c.tid);
        emit(*f, buf_);
    }
    pending_lanes_.erase(pending);
}

void KinetoWriter::gpu_sync(const GpuOp& op) {
    const char* name = sync_name(op.sync_type);
    File* f = name ? file_of(op.pid) : nullptr;
    if (!f || !op.correlation) return;
    // CUPTI's record names the context; the device is the one gtrace saw that context's work on.
    auto device = device_of_context_.find({op.pid, op.context});
    uint32_t dev = device != device_of_context_.end() ? device->second : 0;
    int64_t stream = op.sync_type == 3 ? static_cast<int64_t>(op.stream) : -1;
    f->devices.insert(dev);
    buf_.clear();
    begin_x(buf_, "cuda_sync", name, dev, stream >= 0 ? static_cast<uint32_t>(stream) : 0, op.start_ns, op.end_ns);
    fmt::format_to(std::back_inserter(buf_), ",\"args\":{{\"cuda_sync_kind\":\"{}\",\"stream\":{},\"correlation\":{},\"device\":{},\"context\":{}}}}}",
                   name, stream, op.correlation, dev, op.context);
    emit(*f, buf_);
}

void KinetoWriter::gpu_range(const GpuRangeSpan& s) {
    File* f = file_of(s.pid);
    if (!f) return;
    buf_.clear();
    begin_x(buf_, "gpu_user_annotation", s.name, s.device, s.stream, s.start_ns, s.end_ns);
    buf_ += '}';
    emit(*f, buf_);
}

} // namespace gtrace
