#include "collect/ring_reader.h"

#include <bpf/libbpf.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

namespace gtrace {

Result<RingReader> RingReader::open(int ring_fd, EventSink& sink) {
    RingReader reader(sink);
    reader.rb_ = ring_buffer__new(ring_fd, &RingReader::dispatch, reader.context_.get(), nullptr);
    if (!reader.rb_)
        return make_error(ExitCode::Internal, std::string("cannot open the BPF ring buffer: ") + strerror(errno));
    return reader;
}

RingReader::~RingReader() {
    if (rb_) ring_buffer__free(rb_);
}

namespace {
constexpr int kBudgetSpent = -ECANCELED; // libbpf stops at a negative return, this record consumed
}

// A record's time as its probe emitted it (the ring holds records in the order they were reserved).
void RingReader::seen(Context* c, uint64_t emitted_ns) { c->newest_ns = std::max(c->newest_ns, emitted_ns); }

int RingReader::dispatch(void* context, void* data, size_t size) {
    auto* c = static_cast<Context*>(context);
    EventSink* sink = c->sink;
    const bool last = c->budget > 0 && --c->budget == 0;
    if (size < 1) return last ? kBudgetSpent : 0;
    switch (*static_cast<const unsigned char*>(data)) {
    case GT_EV_API:
        if (size >= sizeof(gt_api_event)) {
            const auto& e = *static_cast<const gt_api_event*>(data);
            seen(c, e.exit_ns);
            sink->on_api(e);
        }
        break;
    case GT_EV_FUNC_NAME:
        if (size >= sizeof(gt_func_name_event)) sink->on_func_name(*static_cast<const gt_func_name_event*>(data));
        break;
    case GT_EV_PROC:
        if (size >= sizeof(gt_proc_event)) {
            const auto& e = *static_cast<const gt_proc_event*>(data);
            seen(c, e.ts_ns);
            sink->on_proc(e);
        }
        break;
    case GT_EV_MMAP:
        if (size >= sizeof(gt_mmap_event)) {
            const auto& e = *static_cast<const gt_mmap_event*>(data);
            seen(c, e.ts_ns);
            sink->on_mmap(e);
        }
        break;
    case GT_EV_PYSTACK: { // variable size: only the frames the stack has were sent
        if (size < GT_PY_STACK_HEADER || size > sizeof(gt_py_stack_event)) break;
        static thread_local gt_py_stack_event stack;
        std::memcpy(&stack, data, size);
        if (GT_PY_STACK_HEADER + stack.nframes * sizeof(gt_py_frame) > size) break;
        sink->on_pystack(stack);
        break;
    }
    case GT_EV_SAMPLE:
        if (size >= sizeof(gt_sample_event)) {
            const auto& e = *static_cast<const gt_sample_event*>(data);
            seen(c, e.ts_ns);
            sink->on_sample(e);
        }
        break;
    case GT_EV_TORCH_RANGE:
        if (size >= sizeof(gt_torch_range_event)) {
            const auto& e = *static_cast<const gt_torch_range_event*>(data);
            seen(c, e.end_ns);
            sink->on_torch_range(e);
        }
        break;
    case GT_EV_COLLECTIVE:
    case GT_EV_NCCL:
        if (size >= sizeof(gt_collective_event)) {
            const auto& e = *static_cast<const gt_collective_event*>(data);
            seen(c, e.end_ns);
            sink->on_collective(e);
        }
        break;
    case GT_EV_OFFCPU:
        if (size >= sizeof(gt_offcpu_event)) {
            const auto& e = *static_cast<const gt_offcpu_event*>(data);
            seen(c, e.on_ns);
            sink->on_off_cpu(e);
        }
        break;
    default:
        break;
    }
    return last ? kBudgetSpent : 0;
}

int RingReader::poll(int timeout_ms) {
    // Most records are submitted without a wakeup (see gt_submit_flags): after the wait, consume
    // whatever is there even when epoll saw no notification.
    context_->budget = kRecordsPerPoll;
    ring_buffer__poll(rb_, behind_ ? 0 : timeout_ms); // more was waiting last time: no wait
    if (context_->budget > 0) ring_buffer__consume(rb_);
    behind_ = context_->budget == 0; // stopped at the bound, by the wait's reading or the consume's
    int consumed = kRecordsPerPoll - context_->budget;
    context_->budget = -1;
    return consumed;
}

int RingReader::wait_fd() const { return ring_buffer__epoll_fd(rb_); }

int RingReader::consume() {
    context_->budget = -1;
    int n = static_cast<int>(ring_buffer__consume(rb_));
    return n < 0 ? 0 : n;
}

bool RingReader::drain(std::chrono::milliseconds limit, uint64_t past_ns) {
    const auto until = std::chrono::steady_clock::now() + limit;
    bool done = false;
    while (!done) {
        context_->budget = kRecordsPerPoll / 16; // a batch, then a look at the clock and at how far it read
        ring_buffer__consume(rb_);
        done = context_->budget > 0 || context_->newest_ns >= past_ns;
        if (std::chrono::steady_clock::now() >= until) break;
    }
    context_->budget = -1;
    return done;
}

} // namespace gtrace
