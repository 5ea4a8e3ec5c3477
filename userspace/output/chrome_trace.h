// Streams a Chrome trace event JSON file (Perfetto UI, chrome://tracing) through a TraceSink:
// events go to `<output>.partial` as they arrive, one a line, with the process and thread names
// as soon as they are known (write_metadata), so a capture killed with -9 leaves a partial that
// `gtrace report` reads and `gtrace recover` completes. finish() appends what metadata changed and
// the capture's facts, closes the JSON and renames it into place. After a write error (disk
// full) nothing more is written, and finish() cuts the trace back to an event boundary with room
// for its end: a complete, shorter trace whose otherData.cut says what was lost.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "foundation/result.h"
#include "decode/api_call.h"
#include "model/trace_model.h"
#include "output/trace_sink.h"

namespace gtrace {

// The bytes every trace gtrace writes starts with; then one event a line, separated by ",\n".
constexpr std::string_view kChromeTraceHeader = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
// And ends with this, otherData's object on one line, then "}\n".
constexpr std::string_view kChromeTraceClosing = "\n],\n\"otherData\":";

// Names of tracks that are not threads of their own (sample tracks, GPU tracks), by (pid, tid).
using TrackNames = std::map<std::pair<uint32_t, uint32_t>, std::string>;

// What a write error cost the trace (finish() after a failed write).
struct TraceCut {
    std::string error;
    uint64_t events_kept = 0, events_dropped = 0;
};

class ChromeTraceWriter {
public:
    // Checks the output path (check_outputs) and creates the partial file. Errors carry
    // ExitCode::OutputUnwritable, OutputExists or WriteFailed.
    static Result<ChromeTraceWriter> create(const std::string& path, bool force);
    ChromeTraceWriter(ChromeTraceWriter&&) noexcept = default;
    ChromeTraceWriter(const ChromeTraceWriter&) = delete;
    // An unfinished writer removes its partial file (the sink's OutputFile does).

    void write_call(const ApiCall& call);
    void write_event(std::string_view json); // one complete event object
    // `args_json`: the event's args object, already JSON (empty: none).
    void write_slice(const std::string& name, const char* category, uint32_t pid, uint32_t tid, uint64_t start_ns,
                     uint64_t dur_ns, std::string_view args_json = {});
    // A counter sample ("ph":"C"); Perfetto draws one track per process and name.
    void write_counter(const std::string& name, const char* category, uint32_t pid, uint64_t ts_ns, std::string_view args_json);
    // Process and thread names, as far as known: what is new or changed since the last call.
    void write_metadata(const TraceModel& model, const TrackNames& extra_threads = {});
    // The events so far to the partial file (a killed capture leaves them readable).
    void flush() { sink_.flush(); }
    // A write failed (disk full, quota, I/O error): nothing more is written.
    bool write_failed() const { return sink_.failed(); }
    std::string write_error() const;
    // Ends the trace: the metadata not yet written, then `other_data` (plus `cut` after a
    // write error), and renames it into place. Returns the cut, if a write error made one.
    Result<std::optional<TraceCut>> finish(const TraceModel& model, const nlohmann::json& other_data,
                                           const TrackNames& extra_threads = {});

    // Scripted captures: only events that start inside [open, close) are written, and no more
    // than max_events of them; the rest are counted.
    void set_window(uint64_t open_ns, uint64_t close_ns) {
        window_open_ns_ = open_ns;
        window_close_ns_ = close_ns;
    }
    void set_max_events(uint64_t n) { max_events_ = n; }
    bool in_window(uint64_t ts_ns) const { return ts_ns >= window_open_ns_ && ts_ns < window_close_ns_; }
    // In the window and under the limit; counts the event as left out otherwise.
    bool admit(uint64_t ts_ns);
    bool full() const { return events_ >= max_events_; }
    uint64_t events_outside_window() const { return outside_window_; }
    uint64_t events_over_limit() const { return over_limit_; }

    const std::string& path() const { return sink_.path(); }
    const std::string& partial_path() const { return sink_.partial_path(); }
    uint64_t events_written() const { return events_; }

private:
    explicit ChromeTraceWriter(TraceSink sink) : sink_(std::move(sink)) {}
    void emit(std::string_view event); // one event object into the stream
    // Metadata events not written yet (all of them: `all`), as JSON objects.
    std::vector<std::string> pending_metadata(const TraceModel& model, const TrackNames& extra_threads, bool all);

    TraceSink sink_;
    uint64_t events_ = 0;        // events admitted (the limit of --max-events counts these)
    uint64_t stream_events_ = 0; // every event handed to the sink, metadata included
    std::map<uint32_t, std::string> process_meta_;                      // as last written
    std::map<std::pair<uint32_t, uint32_t>, std::string> thread_meta_; // as last written
    uint64_t window_open_ns_ = 0, window_close_ns_ = UINT64_MAX, max_events_ = UINT64_MAX;
    uint64_t outside_window_ = 0, over_limit_ = 0;
    std::string buf_;
};

// Appends s to out as the contents of a JSON string (without quotes).
void append_json_escaped(std::string& out, std::string_view s);

} // namespace gtrace
