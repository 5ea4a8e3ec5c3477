// Device model of the simulated driver: configuration, clocks, streams, events, memory, stream
// capture and graphs, and the scheduler. One mutex guards all of it; nothing here calls out to
// user code.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "gpusim.h"

namespace gtsim {

struct Config {
    int devices = 1;
    uint64_t device_memory = 80ull << 30; // each device's, as cuMemGetInfo's total
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

struct Graph;

struct Stream {
    uint32_t id = 0;
    int device = 0;
    StreamKind kind = StreamKind::Created;
    bool nonblocking = false;
    bool live = true;
    uint64_t free_at = 0;     // end of the last op enqueued
    Graph* capture = nullptr; // the graph being captured: ops go there instead of running
};

struct Event {
    uint32_t id = 0;
    int device = 0;
    bool live = true;
    bool recorded = false;
    uint64_t done_at = 0; // when all work before the record has finished
};

// A captured op: its template (correlation and times are set at each launch) and duration.
struct Node {
    gtsim_gpu_op op;
    uint64_t duration;
};

// A captured graph (CUgraph) or an instantiated one (CUgraphExec): nodes in stream order.
struct Graph {
    uint32_t id = 0;
    int device = 0;
    bool live = true;
    bool exec = false;
    std::vector<Node> nodes;
};

class Model {
public:
    static Model& get();
    const Config& cfg() const { return cfg_; }

    // Durations, deterministic in the inputs (see README).
    uint64_t kernel_ns(uint64_t blocks) const;
    uint64_t copy_ns(gtsim_copy_kind kind, uint64_t bytes) const;
    uint64_t memset_ns(uint64_t bytes) const;
    uint64_t duration(const gtsim_gpu_op& op) const;

    // Resolves the handle and schedules op on it at host time now; fills device, stream_id,
    // queued/start/end. per_thread picks what handle 0 means (_ptsz/_ptds variants). On a
    // capturing stream the op is added to the graph instead and *captured is set.
    CUresult enqueue(CUstream h, bool per_thread, int cur_dev, gtsim_gpu_op& op, uint64_t now, bool* captured);
    CUresult stream_id(CUstream h, bool per_thread, int cur_dev, uint32_t* id);
    // Realtime instant at which the work to wait for has finished.
    CUresult stream_done(CUstream h, bool per_thread, int cur_dev, uint32_t* id, uint64_t* t);
    uint64_t device_done(int dev);

    CUresult stream_create(int dev, unsigned flags, CUstream* out, uint32_t* id);
    CUresult stream_destroy(CUstream h, uint32_t* id);
    CUresult event_create(int dev, CUevent* out, uint32_t* id);
    CUresult event_record(CUevent e, CUstream h, bool per_thread, int cur_dev, uint64_t now, uint32_t* event_id,
                          uint32_t* stream_id);
    CUresult event_done(CUevent e, uint32_t* id, uint64_t* t);
    CUresult event_destroy(CUevent e, uint32_t* id);

    uint64_t device_alloc(int dev, size_t bytes);
    uint64_t device_used(int dev); // bytes allocated on the device
    // Removes a device allocation; returns false for an unknown pointer.
    bool device_free(uint64_t addr, uint64_t* bytes);
    void pinned_add(void* p, size_t bytes);
    bool pinned_remove(void* p, uint64_t* bytes);
    gtsim_mem_kind classify(const void* p);
    void device_reset(int dev);

    // Stream capture and graphs (graph.cpp).
    CUresult begin_capture(CUstream h, bool per_thread, int cur_dev);
    CUresult end_capture(CUstream h, bool per_thread, int cur_dev, CUgraph* out);
    CUresult capture_status(CUstream h, bool per_thread, int cur_dev, CUstreamCaptureStatus* status);
    CUresult instantiate(CUgraph g, CUgraphExec* out);
    CUresult graph_destroy(CUgraph g);
    CUresult exec_destroy(CUgraphExec e);
    // Schedules every node of e on the stream, back to back; ops get the launch's correlation.
    CUresult graph_launch(CUgraphExec e, CUstream h, bool per_thread, int cur_dev, const gtsim_gpu_op& base,
                          uint64_t now, std::vector<gtsim_gpu_op>* ops, uint32_t* stream_id);

private:
    Model();
    Stream* resolve_locked(CUstream h, bool per_thread, int cur_dev);
    uint64_t barrier_locked(const Stream& s) const;
    Graph* graph_locked(const void* handle, bool exec);
    CUresult destroy_locked(const void* handle, bool exec);

    Config cfg_;
    std::mutex mu_;
    std::deque<Stream> streams_; // never shrinks: handles stay unique and pointers stable
    std::deque<Event> events_;
    std::deque<Graph> graphs_;
    std::vector<Stream*> legacy_; // per device
    std::vector<uint64_t> retired_free_at_; // per device: latest end on destroyed streams
    std::unordered_set<const void*> live_; // created streams, events, graphs; handle == object address
    uint32_t next_stream_id_ = 13;
    uint32_t next_event_id_ = 1;
    uint32_t next_graph_id_ = 1;
    uint64_t next_node_id_ = 1;
    uint64_t next_addr_ = 0x7e0000000000ULL;
    struct Alloc { uint64_t bytes; int device; };
    std::map<uint64_t, Alloc> device_mem_;
    std::map<uint64_t, uint64_t> pinned_mem_;
};

// Appends one JSON line per GPU op to GTSIM_LOG (no-op when unset); several with one write().
void log_ops(const gtsim_gpu_op* ops, size_t count);

} // namespace gtsim
