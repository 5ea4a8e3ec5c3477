// Drains the BPF ring buffer and hands each record, by class, to a sink.
#pragma once
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <memory>

#include "foundation/result.h"
#include "gtrace/events.h"
#include "gtrace/pystack.h"
#include "gtrace/sampling.h"
#include "gtrace/offcpu.h"
#include "gtrace/comm.h"
#include "gtrace/torch_ranges.h"

struct ring_buffer;

namespace gtrace {

class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void on_api(const gt_api_event& e) = 0;
    virtual void on_func_name(const gt_func_name_event& e) = 0;
    virtual void on_proc(const gt_proc_event& e) = 0;
    virtual void on_mmap(const gt_mmap_event& e) = 0;
    virtual void on_pystack(const gt_py_stack_event& e) = 0;
    virtual void on_sample(const gt_sample_event& e) = 0;
    virtual void on_torch_range(const gt_torch_range_event& e) = 0;
    virtual void on_collective(const gt_collective_event& e) = 0;
    virtual void on_off_cpu(const gt_offcpu_event& e) = 0;
};

class RingReader {
public:
    static Result<RingReader> open(int ring_fd, EventSink& sink);
    RingReader(RingReader&& o) noexcept : rb_(o.rb_), context_(std::move(o.context_)), behind_(o.behind_) { o.rb_ = nullptr; }
    RingReader(const RingReader&) = delete;
    ~RingReader();

    // Wait up to timeout_ms for data, then consume what is there, at most kRecordsPerPoll records:
    // a producer faster than the sink (a busy job, a slow build of gtrace) must not keep the
    // capture loop from its stop conditions and its other sources. Returns records consumed.
    int poll(int timeout_ms);
    // The last poll stopped at its bound: records were left in the ring.
    bool behind() const { return behind_; }
    // Consume without waiting, in bounded batches, until the ring is empty or a record emitted
    // at or after `past_ns` (CLOCK_MONOTONIC; the stop) was read — every record emitted before
    // it is then read, however far behind the reader was — for at most `limit`: the probes are
    // still on at a capture's stop. Returns false when the limit cut it short.
    bool drain(std::chrono::milliseconds limit, uint64_t past_ns);

    // For a reader that waits apart from reading (another thread's wait, a lock around reads):
    // the fd to wait on, readable when records were submitted with a wakeup; and a read of all
    // that is there now, without waiting. Returns records consumed.
    int wait_fd() const;
    int consume();

    static constexpr int kRecordsPerPoll = 1 << 16;

private:
    // What dispatch() sees: heap-stable, so that a moved reader's ring keeps a valid context.
    struct Context {
        EventSink* sink = nullptr;
        int budget = -1; // records left in this poll; -1: no bound
        uint64_t newest_ns = 0; // the latest emission time among the records read (their end, exit or timestamp)
    };
    explicit RingReader(EventSink& sink) : context_(std::make_unique<Context>(Context{&sink})) {}
    static int dispatch(void* context, void* data, size_t size);
    template <typename Event>
    static void deliver(Context* c, const void* data, size_t size, unsigned long long Event::*emitted,
                        void (EventSink::*on)(const Event&));
    ring_buffer* rb_ = nullptr;
    std::unique_ptr<Context> context_;
    bool behind_ = false; // the last poll stopped at its bound with records left
};

} // namespace gtrace
