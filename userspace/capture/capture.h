// One capture, from attach to the finished trace: wires discover → attach → collect → decode →
// model → output, hands each event class to its handler, and runs the loop until the duration,
// a signal, the script's end, or the tree's end.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "capture/call_events.h"
#include "capture/capture_options.h"
#include "capture/capture_script.h"
#include "capture/capture_state.h"
#include "capture/flight_dumps.h"
#include "capture/gpu_events.h"
#include "capture/process_events.h"
#include "capture/range_events.h"
#include "capture/sample_events.h"
#include "analyze/live_trace.h"
#include "collect/ring_reader.h"
#include "foundation/result.h"
#include "output/capture_registry.h"

namespace gtrace {

class Capture final : public EventSink {
public:
    ~Capture() override;
    static Result<std::unique_ptr<Capture>> attach(const CaptureOptions& options);
    Result<CaptureResult> run();
    // The config launched processes pass to their agent (GTRACE_AGENT_CONFIG).
    std::string agent_config() const { return gpu_.agent_config(); }
    const std::string& agent_library_path() const { return gpu_.agent_library_path(); }

    // The ring buffer's events, each to the handler of its class.
    void on_api(const gt_api_event& e) override { calls_.on_api(e); }
    void on_func_name(const gt_func_name_event& e) override { calls_.on_func_name(e); }
    void on_proc(const gt_proc_event& e) override { processes_.on_proc(e); }
    void on_mmap(const gt_mmap_event& e) override { processes_.on_mmap(e); }
    void on_pystack(const gt_py_stack_event& e) override { samples_.on_pystack(e); }
    void on_sample(const gt_sample_event& e) override { samples_.on_sample(e); }
    void on_torch_range(const gt_torch_range_event& e) override { ranges_.on_torch_range(e); }
    void on_collective(const gt_collective_event& e) override { ranges_.on_collective(e); }
    void on_off_cpu(const gt_offcpu_event& e) override { samples_.on_off_cpu(e); }

private:
    explicit Capture(const CaptureOptions& o);
    Result<void> open_writer();
    std::string stop_reason() const; // empty: go on
    void print_status(double elapsed_s);
    Result<CaptureResult> finish(const std::string& reason, double elapsed_s);
    // capture_summary.cpp
    nlohmann::json other_data(const std::string& stop_reason, double elapsed_s) const;
    nlohmann::json bpf_stats_facts() const;
    void print_summary(const CaptureResult& r, double elapsed_s) const;

    CaptureState s_;
    CallEvents calls_{s_};
    CaptureScript script_{s_};
    NvtxEvents nvtx_{s_, script_};
    GpuEvents gpu_{s_, calls_, nvtx_};
    ProcessObservers lifecycle_; // every component above with per-process state (registered in the constructor)
    ProcessEvents processes_{s_, calls_, gpu_, lifecycle_};
    SampleEvents samples_{s_};
    RangeEvents ranges_{s_, script_};
    std::unique_ptr<LiveTrace> analysis_;  // the report's spans, built as the events go to the writer
    std::unique_ptr<FlightDumps> flight_; // --flight-recorder
    std::optional<RingReader> reader_;
    RegisteredCapture registration_; // lists the partial trace if this gtrace is killed
    std::optional<uint64_t> cpu_pressure_at_start_us_; // discover/cpu_pressure.h; nullopt without PSI
    uint64_t calls_at_last_status_ = 0;
};

} // namespace gtrace
