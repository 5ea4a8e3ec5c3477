// Device model of the cudart simulator: configuration, clocks, streams, events, memory and the
// scheduler. One mutex guards all of it; nothing here calls out to user code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpusim.h"

namespace gtsim {

struct Config {
    int devices = 1;
    uint64_t launch_latency_ns = 3000;
    uint64_t kernel_base_ns = 2000;
    uint64_t kernel_ns_per_block = 10;
    double slow_factor = 1.0;
    bool slow = false; // RANK == GTSIM_SLOW_RANK
    uint64_t copy_base_ns = 1500;
    double h2d_gbps = 12, d2h_gbps = 12, d2d_gbps = 500;
    std::string log_path;
};

uint64_t realtime_ns();
// CLOCK_MONOTONIC instant of a CLOCK_REALTIME one (offset measured once at init).
uint64_t to_mono(uint64_t realtime);
// Blocks the calling thread until CLOCK_REALTIME reaches t (absolute sleeps, no spinning).
void sleep_until_realtime(uint64_t t);
uint32_t kernel_tid();

enum class StreamKind { Legacy, PerThread, Created };

struct Stream {
    uint32_t id = 0;
    int device = 0;
    StreamKind kind = StreamKind::Created;
    bool nonblocking = false;
    bool live = true;
    uint64_t free_at = 0; // end of the last op enqueued
};

struct Event {
    uint32_t id = 0;
    int device = 0;
    bool live = true;
    bool recorded = false;
    uint64_t done_at = 0; // when all work before the record has finished
};

class Model {
public:
    static Model& get();
    const Config& cfg() const { return cfg_; }

    // Durations, deterministic in the inputs (see README).
    uint64_t kernel_ns(uint64_t blocks) const;
    uint64_t copy_ns(gtsim_copy_kind kind, uint64_t bytes) const;
    uint64_t memset_ns(uint64_t bytes) const;

    // Resolves the handle and schedules op on it at host time now; fills device, stream_id,
    // queued/start/end. per_thread picks what handle 0 means (_ptsz/_ptds variants).
    cudaError_t enqueue(cudaStream_t h, bool per_thread, int cur_dev, gtsim_gpu_op& op, uint64_t now);
    cudaError_t stream_id(cudaStream_t h, bool per_thread, int cur_dev, uint32_t* id);
    // Realtime instant at which the work to wait for has finished.
    cudaError_t stream_done(cudaStream_t h, bool per_thread, int cur_dev, uint32_t* id, uint64_t* t);
    uint64_t device_done(int dev);

    cudaError_t stream_create(int dev, unsigned flags, cudaStream_t* out, uint32_t* id);
    cudaError_t stream_destroy(cudaStream_t h, uint32_t* id);
    cudaError_t event_create(int dev, cudaEvent_t* out, uint32_t* id);
    cudaError_t event_record(cudaEvent_t e, cudaStream_t h, bool per_thread, int cur_dev, uint64_t now,
                             uint32_t* event_id, uint32_t* stream_id);
    cudaError_t event_done(cudaEvent_t e, uint32_t* id, uint64_t* t);
    cudaError_t event_destroy(cudaEvent_t e, uint32_t* id);

    uint64_t device_alloc(int dev, size_t bytes);
    // Removes a device allocation; returns false for an unknown pointer.
    bool device_free(uint64_t addr, uint64_t* bytes);
    void pinned_add(void* p, size_t bytes);
    bool pinned_remove(void* p, uint64_t* bytes);
    gtsim_mem_kind classify(const void* p);
    void device_reset(int dev);

    // Kernel host function -> interned name (dladdr symbol, else kernel_0x<addr>).
    const char* kernel_name(const void* func);

private:
    Model();
    Stream* resolve_locked(cudaStream_t h, bool per_thread, int cur_dev);
    uint64_t barrier_locked(const Stream& s) const;

    Config cfg_;
    std::mutex mu_;
    std::deque<Stream> streams_; // never shrinks: handles stay unique and pointers stable
    std::deque<Event> events_;
    std::vector<Stream*> legacy_; // per device
    std::vector<uint64_t> retired_free_at_; // per device: latest end on destroyed streams
    std::unordered_set<const void*> live_; // created streams and events; handle == object address
    uint32_t next_stream_id_ = 13;
    uint32_t next_event_id_ = 1;
    uint64_t next_addr_ = 0x7e0000000000ULL;
    struct Alloc { uint64_t bytes; int device; };
    std::map<uint64_t, Alloc> device_mem_;
    std::map<uint64_t, uint64_t> pinned_mem_;
    std::unordered_map<const void*, const char*> names_;
};

// Appends one JSON line per GPU op to GTSIM_LOG (no-op when unset).
void log_op(const gtsim_gpu_op& op);

} // namespace gtsim
