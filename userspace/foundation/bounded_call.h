// File-system work that a traced process can influence runs here, on a thread of its own, and
// is waited for at most a deadline: a directory on a FUSE file system whose server never answers
// (in the target's LD_LIBRARY_PATH, say) leaves that thread asleep in the kernel, not gtrace —
// whose loop goes on draining events and hears Ctrl-C. The thread is abandoned to the kernel
// (its wait is killable: it ends with gtrace, or when the server answers); a bounded number of
// them may be stuck at once, past which such work is refused outright.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace gtrace {

namespace bounded_detail {
// Starts `work` on a detached thread; false when too many are stuck already (nothing started).
bool start(std::function<void()> work);
// A stuck thread came back (its call's deadline had passed).
void returned_late();
// Counts a thread given up at its deadline.
void gave_up();
} // namespace bounded_detail

// The deadline gtrace gives one batch of a target's file-system work.
inline constexpr std::chrono::milliseconds kTargetFsDeadline{2000};

// `work`'s result, or nullopt when it did not end within `limit` (or could not start). `work`
// must own everything it touches (capture by value): after the deadline it may still run.
template <typename T>
std::optional<T> bounded_call(std::function<T()> work, std::chrono::milliseconds limit = kTargetFsDeadline) {
    struct State {
        std::mutex mutex;
        std::condition_variable done_cv;
        std::optional<T> result;
        bool done = false, abandoned = false;
    };
    auto state = std::make_shared<State>();
    bool started = bounded_detail::start([state, work = std::move(work)]() mutable {
        std::optional<T> r(work());
        std::lock_guard lock(state->mutex);
        state->result = std::move(r);
        state->done = true;
        if (state->abandoned) bounded_detail::returned_late();
        state->done_cv.notify_one();
    });
    if (!started) return std::nullopt;
    std::unique_lock lock(state->mutex);
    if (!state->done_cv.wait_for(lock, limit, [&] { return state->done; })) {
        state->abandoned = true;
        bounded_detail::gave_up();
        return std::nullopt;
    }
    return std::move(state->result);
}

} // namespace gtrace
