// Backward passes and the launches they make. PyTorch runs a backward pass's GPU work on the
// autograd engine's device threads ("pt_autograd_<device>"), which have no Python frames of their
// own, while the thread that called loss.backward() waits in the engine: so half of a training
// step's launches would have no source. Each pass is seen begin and end (probes on
// THPEngine_run_backward, gtrace/torch_ranges.h); a call without a Python stack, from an
// autograd thread, made during exactly one pass of its process, gets that pass's stack — the
// `loss.backward()` line — and the thread it came from. A pass is matched by time, not by being
// open when the call arrives: the agent's call records come up to a poll later than the probes'
// events, by when a short pass has ended.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string_view>

#include <nlohmann/json.hpp>

#include "decode/python_stacks.h"
#include "foundation/process_observer.h"

namespace gtrace {

class BackwardPasses final : public ProcessObserver {
public:
    void begun(uint32_t pid, uint32_t tid, uint64_t start_ns, PyStackRef stack);
    void ended(uint32_t pid, uint32_t tid, uint64_t end_ns);
    void forget_process(uint32_t pid) { passes_of_.erase(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }

    struct Origin {
        PyStackRef stack;
        uint32_t tid = 0; // the thread that began the pass
    };
    // The pass a call without a stack belongs to: from an autograd thread, made while that pass
    // and no other of the process ran. Counts what it decides.
    Origin origin_of(uint32_t pid, std::string_view thread_name, uint64_t call_start_ns);

    nlohmann::json facts() const;

private:
    struct Pass {
        uint32_t tid = 0;
        uint64_t start_ns = 0, end_ns = 0; // 0: still open
        PyStackRef stack;
    };
    // Per process, the open passes and the last ended ones (calls arrive late, not this late).
    static constexpr size_t kEndedKept = 64;
    std::map<uint32_t, std::deque<Pass>> passes_of_;
    uint64_t passes_ = 0, attributed_ = 0, ambiguous_ = 0, without_stack_ = 0;
};

bool is_autograd_thread(std::string_view thread_name);

} // namespace gtrace
