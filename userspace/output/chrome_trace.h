// Streams a Chrome trace event JSON file (Perfetto UI, chrome://tracing). Events go to a hidden
// temporary file beside the output as they arrive; finish() appends the process/thread metadata
// and the capture's facts, closes the JSON and renames it into place, so the output path only
// ever holds a complete trace.
#pragma once
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/result.h"
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
    void write_slice(const std::string& name, const char* category, uint32_t pid, uint32_t tid, uint64_t start_ns,
                     uint64_t dur_ns);
    // `extra_threads` names tracks that are not threads of their own (sample tracks).
    Result<void> finish(const TraceModel& model, const nlohmann::json& other_data,
                        const std::map<std::pair<uint32_t, uint32_t>, std::string>& extra_threads = {});

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
    std::string buf_;
};

// Appends s to out as the contents of a JSON string (without quotes).
void append_json_escaped(std::string& out, std::string_view s);

} // namespace gtrace
