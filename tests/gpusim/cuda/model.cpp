// Device model: streams are FIFO queues with a free_at time; ops start at
// max(now + launch latency, stream free_at, implicit legacy-stream barriers).
#include "model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gtsim {
namespace {

const CUstream kLegacy = CU_STREAM_LEGACY;
const CUstream kPerThread = CU_STREAM_PER_THREAD;

uint64_t env_u64(const char* name, uint64_t def) {
    const char* v = getenv(name);
    if (!v || !*v) return def;
    char* end = nullptr;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) {
        fprintf(stderr, "gpusim: ignoring %s=%s (not an integer)\n", name, v);
        return def;
    }
    return x;
}

double env_f64(const char* name, double def) {
    const char* v = getenv(name);
    if (!v || !*v) return def;
    char* end = nullptr;
    double x = strtod(v, &end);
    if (*end || !(x > 0)) {
        fprintf(stderr, "gpusim: ignoring %s=%s (not a positive number)\n", name, v);
        return def;
    }
    return x;
}

Config read_config() {
    Config c;
    c.devices = static_cast<int>(std::clamp<uint64_t>(env_u64("GTSIM_DEVICES", 1), 1, 64));
    c.launch_latency_ns = env_u64("GTSIM_LAUNCH_LATENCY_NS", c.launch_latency_ns);
    c.kernel_base_ns = env_u64("GTSIM_KERNEL_BASE_NS", c.kernel_base_ns);
    c.kernel_ns_per_block = env_u64("GTSIM_KERNEL_NS_PER_BLOCK", c.kernel_ns_per_block);
    c.slow_factor = env_f64("GTSIM_SLOW_FACTOR", c.slow_factor);
    const char* rank = getenv("RANK");
    const char* slow_rank = getenv("GTSIM_SLOW_RANK");
    c.slow = rank && slow_rank && *slow_rank && strcmp(rank, slow_rank) == 0;
    c.copy_base_ns = env_u64("GTSIM_COPY_BASE_NS", c.copy_base_ns);
    c.h2d_gbps = env_f64("GTSIM_H2D_GBPS", c.h2d_gbps);
    c.d2h_gbps = env_f64("GTSIM_D2H_GBPS", c.d2h_gbps);
    c.d2d_gbps = env_f64("GTSIM_D2D_GBPS", c.d2d_gbps);
    if (const char* log = getenv("GTSIM_LOG")) c.log_path = log;
    return c;
}

} // namespace

Model& Model::get() {
    // Leaked on purpose: detached CUPTI threads and atexit handlers may still call in at exit.
    static Model* m = new Model();
    return *m;
}

Model::Model() : cfg_(read_config()) {
    to_mono(0); // measure the clock offset now, not on the first op
    for (int d = 0; d < cfg_.devices; ++d) {
        Stream& s = streams_.emplace_back();
        s.id = 7;
        s.device = d;
        s.kind = StreamKind::Legacy;
        legacy_.push_back(&s);
    }
    retired_free_at_.assign(cfg_.devices, 0);
}

uint64_t Model::kernel_ns(uint64_t blocks) const {
    uint64_t d = cfg_.kernel_base_ns + cfg_.kernel_ns_per_block * blocks;
    if (cfg_.slow) d = static_cast<uint64_t>(static_cast<double>(d) * cfg_.slow_factor);
    return d;
}

uint64_t Model::copy_ns(gtsim_copy_kind kind, uint64_t bytes) const {
    double gbps = kind == GTSIM_COPY_DTOH ? cfg_.d2h_gbps : kind == GTSIM_COPY_DTOD ? cfg_.d2d_gbps : cfg_.h2d_gbps;
    // 1 GB/s == 1 byte/ns, so bytes / GBps is already in ns.
    return cfg_.copy_base_ns + static_cast<uint64_t>(static_cast<double>(bytes) / gbps);
}

uint64_t Model::memset_ns(uint64_t bytes) const {
    return cfg_.copy_base_ns + static_cast<uint64_t>(static_cast<double>(bytes) / cfg_.d2d_gbps);
}

Stream* Model::resolve_locked(CUstream h, bool per_thread, int cur_dev) {
    if (h == nullptr) h = per_thread ? kPerThread : kLegacy;
    if (h == kLegacy) return legacy_[cur_dev];
    if (h == kPerThread) {
        // Thread-local, not keyed by tid: a new thread reusing a tid gets a stream of its own.
        thread_local std::vector<Stream*> mine;
        if (mine.size() <= size_t(cur_dev)) mine.resize(cur_dev + 1, nullptr);
        Stream*& s = mine[cur_dev];
        if (!s) {
            s = &streams_.emplace_back();
            s->id = next_stream_id_++;
            s->device = cur_dev;
            s->kind = StreamKind::PerThread;
        }
        return s;
    }
    if (!live_.count(h)) return nullptr;
    auto* s = reinterpret_cast<Stream*>(h);
    return s->live ? s : nullptr;
}

// Earliest time work on s may start because of implicit synchronization: the legacy stream
// waits for every blocking stream of its device, and blocking streams wait for it.
uint64_t Model::barrier_locked(const Stream& s) const {
    uint64_t t = s.free_at;
    if (s.nonblocking) return t;
    if (s.kind == StreamKind::Legacy) {
        t = std::max(t, retired_free_at_[s.device]);
        for (const Stream& o : streams_)
            if (&o != &s && o.device == s.device && !o.nonblocking) t = std::max(t, o.free_at);
        return t;
    }
    return std::max(t, legacy_[s.device]->free_at);
}

uint64_t Model::duration(const gtsim_gpu_op& op) const {
    switch (op.kind) {
    case GTSIM_OP_KERNEL: return kernel_ns(uint64_t{op.grid[0]} * op.grid[1] * op.grid[2]);
    case GTSIM_OP_MEMCPY: return copy_ns(op.copy_kind, op.bytes);
    case GTSIM_OP_MEMSET: return memset_ns(op.bytes);
    }
    return 0;
}

CUresult Model::enqueue(CUstream h, bool per_thread, int cur_dev, gtsim_gpu_op& op, uint64_t now, bool* captured) {
    uint64_t dur = duration(op);
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    op.device = s->device;
    op.stream_id = s->id;
    *captured = s->capture != nullptr;
    if (s->capture) { // recorded, not run: the graph's launches run it
        s->capture->nodes.push_back(Node{op, dur});
        return CUDA_SUCCESS;
    }
    op.queued_ns = now;
    op.start_ns = std::max(now + cfg_.launch_latency_ns, barrier_locked(*s));
    op.end_ns = op.start_ns + dur;
    s->free_at = op.end_ns;
    return CUDA_SUCCESS;
}

CUresult Model::stream_id(CUstream h, bool per_thread, int cur_dev, uint32_t* id) {
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *id = s->id;
    return CUDA_SUCCESS;
}

CUresult Model::stream_done(CUstream h, bool per_thread, int cur_dev, uint32_t* id, uint64_t* t) {
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *id = s->id;
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    *t = s->free_at; // legacy ops already waited for the other streams when they were enqueued
    return CUDA_SUCCESS;
}

uint64_t Model::device_done(int dev) {
    std::lock_guard lk(mu_);
    uint64_t t = retired_free_at_[dev];
    for (const Stream& s : streams_)
        if (s.device == dev) t = std::max(t, s.free_at);
    return t;
}

CUresult Model::stream_create(int dev, unsigned flags, CUstream* out, uint32_t* id) {
    std::lock_guard lk(mu_);
    Stream& s = streams_.emplace_back();
    s.id = next_stream_id_++;
    s.device = dev;
    s.nonblocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    live_.insert(&s);
    *out = reinterpret_cast<CUstream>(&s);
    *id = s.id;
    return CUDA_SUCCESS;
}

CUresult Model::stream_destroy(CUstream h, uint32_t* id) {
    std::lock_guard lk(mu_);
    if (h == nullptr || h == kLegacy || h == kPerThread || !live_.count(h)) return CUDA_ERROR_INVALID_HANDLE;
    auto* s = reinterpret_cast<Stream*>(h);
    if (!s->live) return CUDA_ERROR_INVALID_HANDLE;
    // Like CUDA, work already queued still runs; the legacy stream keeps waiting for it.
    if (!s->nonblocking) retired_free_at_[s->device] = std::max(retired_free_at_[s->device], s->free_at);
    s->live = false;
    s->capture = nullptr; // an unfinished capture is abandoned
    live_.erase(h);
    *id = s->id;
    return CUDA_SUCCESS;
}

CUresult Model::event_create(int dev, CUevent* out, uint32_t* id) {
    std::lock_guard lk(mu_);
    Event& e = events_.emplace_back();
    e.id = next_event_id_++;
    e.device = dev;
    live_.insert(&e);
    *out = reinterpret_cast<CUevent>(&e);
    *id = e.id;
    return CUDA_SUCCESS;
}

CUresult Model::event_record(CUevent ev, CUstream h, bool per_thread, int cur_dev, uint64_t now,
                                uint32_t* event_id, uint32_t* stream_id) {
    std::lock_guard lk(mu_);
    if (!ev || !live_.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // event nodes are not modelled
    auto* e = reinterpret_cast<Event*>(ev);
    e->recorded = true;
    e->done_at = std::max(now, barrier_locked(*s));
    *event_id = e->id;
    *stream_id = s->id;
    return CUDA_SUCCESS;
}

CUresult Model::event_done(CUevent ev, uint32_t* id, uint64_t* t) {
    std::lock_guard lk(mu_);
    if (!ev || !live_.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
    auto* e = reinterpret_cast<Event*>(ev);
    *id = e->id;
    *t = e->recorded ? e->done_at : 0; // never recorded: completes at once, as in CUDA
    return CUDA_SUCCESS;
}

CUresult Model::event_destroy(CUevent ev, uint32_t* id) {
    std::lock_guard lk(mu_);
    if (!ev || !live_.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
    auto* e = reinterpret_cast<Event*>(ev);
    e->live = false;
    live_.erase(ev);
    *id = e->id;
    return CUDA_SUCCESS;
}

uint64_t Model::device_alloc(int dev, size_t bytes) {
    std::lock_guard lk(mu_);
    uint64_t addr = next_addr_;
    next_addr_ += (std::max<uint64_t>(bytes, 1) + 511) & ~uint64_t{511};
    device_mem_[addr] = Alloc{bytes, dev};
    return addr;
}

uint64_t Model::device_used(int dev) {
    std::lock_guard lk(mu_);
    uint64_t used = 0;
    for (const auto& [addr, a] : device_mem_)
        if (a.device == dev) used += a.bytes;
    return used;
}

bool Model::device_free(uint64_t addr, uint64_t* bytes) {
    std::lock_guard lk(mu_);
    auto it = device_mem_.find(addr);
    if (it == device_mem_.end()) return false;
    *bytes = it->second.bytes;
    device_mem_.erase(it);
    return true;
}

void Model::pinned_add(void* p, size_t bytes) {
    std::lock_guard lk(mu_);
    pinned_mem_[reinterpret_cast<uint64_t>(p)] = bytes;
}

bool Model::pinned_remove(void* p, uint64_t* bytes) {
    std::lock_guard lk(mu_);
    auto it = pinned_mem_.find(reinterpret_cast<uint64_t>(p));
    if (it == pinned_mem_.end()) return false;
    *bytes = it->second;
    pinned_mem_.erase(it);
    return true;
}

gtsim_mem_kind Model::classify(const void* p) {
    auto a = reinterpret_cast<uint64_t>(p);
    std::lock_guard lk(mu_);
    // A pointer inside [base, base + max(bytes, 1)) of the nearest allocation at or below it.
    auto inside = [a](const auto& m, auto size_of) {
        auto it = m.upper_bound(a);
        if (it == m.begin()) return false;
        --it;
        return a < it->first + std::max<uint64_t>(size_of(it->second), 1);
    };
    if (inside(device_mem_, [](const Alloc& x) { return x.bytes; })) return GTSIM_MEM_DEVICE;
    if (inside(pinned_mem_, [](uint64_t b) { return b; })) return GTSIM_MEM_PINNED;
    return GTSIM_MEM_PAGEABLE;
}

void Model::device_reset(int dev) {
    std::lock_guard lk(mu_);
    std::erase_if(device_mem_, [dev](const auto& kv) { return kv.second.device == dev; });
    for (Stream& s : streams_) {
        if (s.device != dev || s.kind != StreamKind::Created || !s.live) continue;
        s.live = false;
        live_.erase(&s);
    }
    for (Event& e : events_) {
        if (e.device != dev || !e.live) continue;
        e.live = false;
        live_.erase(&e);
    }
}

} // namespace gtsim
