#include "capture/stack_definitions.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gtrace {

// The ring holds definitions only; any other record there is ignored.
class StackDefinitions::Sink final : public EventSink {
public:
    explicit Sink(PythonStacks& stacks) : stacks_(stacks) {}
    void on_pystack(const gt_py_stack_event& e) override { stacks_.define(e); }
    void on_api(const gt_api_event&) override {}
    void on_func_name(const gt_func_name_event&) override {}
    void on_proc(const gt_proc_event&) override {}
    void on_mmap(const gt_mmap_event&) override {}
    void on_sample(const gt_sample_event&) override {}
    void on_torch_range(const gt_torch_range_event&) override {}
    void on_collective(const gt_collective_event&) override {}
    void on_off_cpu(const gt_offcpu_event&) override {}

private:
    PythonStacks& stacks_;
};

StackDefinitions::StackDefinitions(PythonStacks& stacks)
    : stacks_(stacks), sink_(std::make_unique<Sink>(stacks)), stop_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Result<std::unique_ptr<StackDefinitions>> StackDefinitions::start(int ring_fd, PythonStacks& stacks) {
    std::unique_ptr<StackDefinitions> d(new StackDefinitions(stacks));
    auto reader = RingReader::open(ring_fd, *d->sink_);
    if (!reader) return reader.error();
    d->reader_.emplace(std::move(*reader));
    if (d->stop_.get() < 0)
        return make_error(ExitCode::Internal, std::string("cannot make an eventfd for the stack reader: ") + strerror(errno));
    d->thread_ = std::thread([p = d.get()] { p->run(); });
    stacks.set_pending([p = d.get()] { p->catch_up(); });
    return d;
}

StackDefinitions::~StackDefinitions() {
    stacks_.set_pending(nullptr);
    if (thread_.joinable()) {
        uint64_t one = 1;
        if (write(stop_.get(), &one, sizeof one) < 0) { /* full counter: the thread wakes anyway */ }
        thread_.join();
    }
}

void StackDefinitions::catch_up() {
    std::lock_guard lock(read_mutex_);
    reader_->consume();
}

void StackDefinitions::run() {
    pollfd fds[2] = {{reader_->wait_fd(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    for (;;) {
        // Woken by each definition; the timeout only bounds a wakeup missed.
        int n = poll(fds, 2, 100);
        if (n < 0 && errno != EINTR) return;
        if (n > 0 && (fds[1].revents & POLLIN)) return;
        catch_up();
    }
}

} // namespace gtrace
