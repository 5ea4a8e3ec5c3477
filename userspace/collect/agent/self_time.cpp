#include "collect/agent/self_time.h"

#include <atomic>

#include "collect/agent/call_capture.h" // monotonic_ns

namespace gtrace::agent {
namespace {

struct SelfTotals {
    std::atomic<bool> on{false};
    std::atomic<uint64_t> count[2]{}, ns[2]{};
};
SelfTotals g_self;

} // namespace

SelfTimer::SelfTimer(SelfCost what) : what_(what) {
    if (g_self.on.load(std::memory_order_relaxed)) start_ns_ = monotonic_ns();
}

SelfTimer::~SelfTimer() {
    if (!start_ns_) return;
    const auto i = static_cast<size_t>(what_);
    g_self.ns[i].fetch_add(monotonic_ns() - start_ns_, std::memory_order_relaxed);
    g_self.count[i].fetch_add(1, std::memory_order_relaxed);
}

void reset_self_time() {
    for (size_t i = 0; i < 2; ++i) g_self.count[i] = 0, g_self.ns[i] = 0;
}

void publish_self_time(gt_agent_ring* ring) {
    g_self.on.store(__atomic_load_n(&ring->time_self, __ATOMIC_ACQUIRE) != 0, std::memory_order_relaxed);
    constexpr auto kCallback = static_cast<size_t>(SelfCost::Callback), kWalk = static_cast<size_t>(SelfCost::PyWalk);
    __atomic_store_n(&ring->self_callbacks, g_self.count[kCallback].load(std::memory_order_relaxed), __ATOMIC_RELAXED);
    __atomic_store_n(&ring->self_callback_ns, g_self.ns[kCallback].load(std::memory_order_relaxed), __ATOMIC_RELAXED);
    __atomic_store_n(&ring->self_py_walks, g_self.count[kWalk].load(std::memory_order_relaxed), __ATOMIC_RELAXED);
    __atomic_store_n(&ring->self_py_walk_ns, g_self.ns[kWalk].load(std::memory_order_relaxed), __ATOMIC_RELAXED);
}

} // namespace gtrace::agent
