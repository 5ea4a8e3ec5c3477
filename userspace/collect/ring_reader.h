// Drains the BPF ring buffer and hands each record, by class, to a sink.
#pragma once
#include <cstddef>
#include <cstdint>

#include "foundation/result.h"
#include "gtrace/events.h"
#include "gtrace/pystack.h"
#include "gtrace/sampling.h"
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
};

class RingReader {
public:
    static Result<RingReader> open(int ring_fd, EventSink& sink);
    RingReader(RingReader&& o) noexcept : rb_(o.rb_), sink_(o.sink_) { o.rb_ = nullptr; }
    RingReader(const RingReader&) = delete;
    ~RingReader();

    // Wait up to timeout_ms for data, then consume all of it. Returns records consumed.
    int poll(int timeout_ms);
    // Consume whatever is there without waiting.
    int drain();

private:
    RingReader(EventSink& sink) : sink_(&sink) {}
    static int dispatch(void* self, void* data, size_t size);
    ring_buffer* rb_ = nullptr;
    EventSink* sink_;
};

} // namespace gtrace
