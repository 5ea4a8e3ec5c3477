// The GPU side of torch and NVTX ranges, as Kineto writes it (`gpu_user_annotation` rows): for
// each range, per device and stream, the span from the first to the last GPU op launched by a
// call the range's thread made inside it. Ranges arrive when they end, GPU ops when the agent
// delivers them (mostly later, sometimes before a long range ends), so both wait a little: the
// recent ops of each thread (a few seconds, at most kMaxOps), and each ended range until its
// thread's launches are kSettleNs past its end (or the capture ends, or its process goes).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "decode/gpu_activity.h"
#include "model/gpu_join.h"
#include "output/trace_writer.h"

namespace gtrace {

struct GpuRangeSpan {
    std::string name;
    uint32_t pid = 0, device = 0, stream = 0;
    uint64_t start_ns = 0, end_ns = 0;
};

class GpuRangeSpans {
public:
    using Sink = std::function<void(const GpuRangeSpan&)>;
    static constexpr uint64_t kSettleNs = 2'000'000'000, kKeepOpsNs = 4'000'000'000;
    static constexpr size_t kMaxOps = 1 << 16, kMaxRanges = 4096;

    explicit GpuRangeSpans(Sink sink) : sink_(std::move(sink)) {}

    void range(const TorchRange& r);
    void op(const CallRef& call, const GpuOp& op);
    // Every range held, with what it has: at the end of the capture, or its process's end.
    void flush_all();
    void forget_process(uint32_t pid);

private:
    struct RecentOp {
        uint64_t call_start_ns;
        uint32_t device, stream;
        uint64_t start_ns, end_ns;
    };
    struct Pending {
        std::string name;
        uint32_t pid;
        uint64_t start_ns, end_ns;
        std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> spans; // (device, stream) -> GPU span
        void add(const RecentOp& o);
        bool covers(uint64_t call_start_ns) const { return call_start_ns >= start_ns && call_start_ns <= end_ns; }
    };
    struct Thread {
        std::deque<RecentOp> ops;
        std::deque<Pending> ranges;
        uint64_t latest_call_ns = 0;
    };
    void emit(const Pending& p);
    void emit_settled(Thread& t);

    Sink sink_;
    std::map<std::pair<uint32_t, uint32_t>, Thread> threads_; // by (pid, tid)
};

} // namespace gtrace
