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

// A whole record to its sink, its time as its probe emitted it (`emitted`; null: it has none)
// noted first: the ring holds records in the order they were reserved.
template <typename Event>
void RingReader::deliver(Context* c, const void* data, size_t size, unsigned long long Event::*emitted,
                         void (EventSink::*on)(const Event&)) {
    if (size < sizeof(Event)) return;
    const auto& e = *static_cast<const Event*>(data);
    if (emitted) c->newest_ns = std::max<uint64_t>(c->newest_ns, e.*emitted);
    (c->sink->*on)(e);
}

int RingReader::dispatch(void* context, void* data, size_t size) {
    auto* c = static_cast<Context*>(context);
    EventSink* sink = c->sink;
    const bool last = c->budget > 0 && --c->budget == 0;
    if (size < 1) return last ? kBudgetSpent : 0;
    switch (*static_cast<const unsigned char*>(data)) {
    case GT_EV_API:
        deliver(c, data, size, &gt_api_event::exit_ns, &EventSink::on_api);
        break;
    case GT_EV_FUNC_NAME:
        deliver<gt_func_name_event>(c, data, size, nullptr, &EventSink::on_func_name);
        break;
    case GT_EV_PROC:
        deliver(c, data, size, &gt_proc_event::ts_ns, &EventSink::on_proc);
        break;
    case GT_EV_MMAP:
        deliver(c, data, size, &gt_mmap_event::ts_ns, &EventSink::on_mmap);
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
        deliver(c, data, size, &gt_sample_event::ts_ns, &EventSink::on_sample);
        break;
    case GT_EV_TORCH_RANGE:
        deliver(c, data, size, &gt_torch_range_event::end_ns, &EventSink::on_torch_range);
        break;
    case GT_EV_COLLECTIVE:
    case GT_EV_NCCL:
        deliver(c, data, size, &gt_collective_event::end_ns, &EventSink::on_collective);
        break;
    case GT_EV_OFFCPU:
        deliver(c, data, size, &gt_offcpu_event::on_ns, &EventSink::on_off_cpu);
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
