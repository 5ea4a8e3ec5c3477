// Timer samples (py-spy-like): each sample's Python stack, or its native stack named from the
// process's mappings, as per-thread sample tracks; the Python stacks BPF interns by id; and the
// main threads' off-CPU intervals, each named from the stacks it went to sleep with.
#pragma once
#include <string>

#include "capture/capture_options.h"
#include "decode/address_symbols.h"
#include "decode/python_stacks.h"
#include "model/event_stream.h"
#include "model/trace_model.h"
#include "gtrace/pystack.h"
#include "gtrace/offcpu.h"
#include "gtrace/sampling.h"
#include "output/sample_tracks.h"
#include "foundation/process_observer.h"

namespace gtrace {

class SampleEvents final : public ProcessObserver {
public:
    SampleEvents(const CaptureOptions& options, const TraceModel& model, PythonStacks& stacks, AddressSymbols& addresses,
                 EventConsumer& out)
        : options_(options), model_(model), stacks_(stacks), addresses_(addresses), out_(out),
          tracks_(out, options.sample_hz, !options.folded.empty()) {}

    void on_sample(const gt_sample_event& e);
    // A main thread's time asleep: an off-CPU slice named by what it waits in.
    void on_off_cpu(const gt_offcpu_event& e);
    uint64_t off_cpu_slices() const { return off_cpu_slices_; }
    uint64_t off_cpu_left_out() const { return off_cpu_left_out_; } // of processes no breakdown covers
    void finish() { tracks_.finish(); }
    void forget_process(uint32_t pid) { tracks_.forget_process(pid); }
    void process_gone(uint32_t pid) override { forget_process(pid); }
    uint64_t samples() const { return tracks_.samples(); }
    Result<void> write_folded() const { return tracks_.write_folded(options_.folded, model_, options_.force); }

private:
    const CaptureOptions& options_;
    const TraceModel& model_;
    PythonStacks& stacks_;
    AddressSymbols& addresses_;
    EventConsumer& out_;
    SampleTracks tracks_;
    uint64_t off_cpu_slices_ = 0, off_cpu_left_out_ = 0;
    // Native frames named from the process's mappings, innermost first.
    std::vector<std::string> native_names(uint32_t pid, const unsigned long long* ips, int bytes, size_t max_frames);
};

} // namespace gtrace
