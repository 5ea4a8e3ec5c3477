// Streams a Chrome trace event JSON file (Perfetto UI, chrome://tracing). Events go to a hidden
// temporary file beside the output as they arrive; finish() appends the process/thread metadata
// and the capture's facts, closes the JSON and renames it into place, so the output path only
// ever holds a complete trace.
#pragma once
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "foundation/result.h"
#include "decode/api_call.h"
#include "model/trace_model.h"

namespace gtrace {

class ChromeTraceWriter {
public:
    // Checks the output path (directory writable, file absent unless `force`) and opens the
    // temporary file. Errors carry ExitCode::OutputUnwritable or ExitCode::OutputExists.
    static Result<ChromeTraceWriter> create(const std::string& path, bool force);
    ChromeTraceWriter(ChromeTraceWriter&& o) noexcept;
    ChromeTraceWriter(const ChromeTraceWriter&) = delete;
    ~ChromeTraceWriter(); // an unfinished writer removes its temporary file

    void write_call(const ApiCall& call);
    void write_event(std::string_view json); // one complete event object
    // `args_json`: the event's args object, already JSON (empty: none).
    void write_slice(const std::string& name, const char* category, uint32_t pid, uint32_t tid, uint64_t start_ns,
                     uint64_t dur_ns, std::string_view args_json = {});
    // A counter sample ("ph":"C"); Perfetto draws one track per process and name.
    void write_counter(const std::string& name, const char* category, uint32_t pid, uint64_t ts_ns, std::string_view args_json);
    // `extra_threads` names tracks that are not threads of their own (sample tracks).
    Result<void> finish(const TraceModel& model, const nlohmann::json& other_data,
                        const std::map<std::pair<uint32_t, uint32_t>, std::string>& extra_threads = {});

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

    const std::string& path() const { return path_; }
    uint64_t events_written() const { return events_; }

private:
    ChromeTraceWriter() = default;
    void begin_event();
    void write_metadata(const TraceModel& model, const std::map<std::pair<uint32_t, uint32_t>, std::string>& extra_threads);

    std::string path_, temp_path_;
    bool force_ = false;
    FILE* out_ = nullptr;
    uint64_t events_ = 0;
    uint64_t window_open_ns_ = 0, window_close_ns_ = UINT64_MAX, max_events_ = UINT64_MAX;
    uint64_t outside_window_ = 0, over_limit_ = 0;
    std::string buf_;
};

// Appends s to out as the contents of a JSON string (without quotes).
void append_json_escaped(std::string& out, std::string_view s);

} // namespace gtrace
