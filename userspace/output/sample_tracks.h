// Turns timer samples into a flame chart per thread: consecutive samples that share a stack
// prefix extend the same frames, so a viewer shows where each thread spent its time. Each
// frame goes to the writer when it opens and when it closes (sample_frame_begin/end). Also
// aggregates folded stacks ("rank 0;outer;inner count") for flamegraph.pl and speedscope.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "decode/python_frames.h"
#include "foundation/result.h"
#include "model/trace_model.h"
#include "output/trace_writer.h"

namespace gtrace {

class SampleTracks {
public:
    // `fold`: aggregate the folded stacks (only when they are written: a stack string per sample,
    // kept per process, costs CPU and memory that a long capture would not get back).
    SampleTracks(EventConsumer& writer, uint32_t hz, bool fold)
        : writer_(writer), period_ns_(hz ? 1'000'000'000ull / hz : 0), fold_(fold) {}

    // One sample of thread `thread` (its name); `stack` outermost first.
    void add(uint32_t pid, uint32_t tid, uint64_t ts_ns, const std::string& thread, const std::vector<PyFrame>& stack);
    void finish(); // closes every open frame
    void forget_process(uint32_t pid); // closes its threads' open frames and lets their tracks go
    uint64_t samples() const { return samples_; }

    // Folded stacks, one line per distinct stack, prefixed by each process's rank or label.
    Result<void> write_folded(const std::string& path, const TraceModel& model, bool force) const;

private:
    struct Track {
        std::vector<PyFrame> open;
        uint64_t last_ns = 0;
    };
    void close_to(uint32_t pid, uint32_t tid, Track& t, size_t keep, uint64_t end_ns);

    EventConsumer& writer_;
    uint64_t period_ns_;
    bool fold_;
    uint64_t samples_ = 0;
    std::map<std::pair<uint32_t, uint32_t>, Track> tracks_;
    std::map<uint32_t, std::map<std::string, uint64_t>> folded_; // pid -> "a;b;c" -> count
};

} // namespace gtrace
