// A partial trace: what `<output>.partial` holds while a capture runs, and after the capture was
// killed (kill -9, a crash): gtrace's header, then whole events one a line, each but the last
// followed by ",", then perhaps the start of one more that the capture was writing when it died.
// Everything up to the last whole event is kept; `gtrace report` reads that, `gtrace recover`
// closes it into a trace.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gtrace {

struct PartialEnd {
    bool complete = false; // already a whole trace (the capture died between closing it and renaming it)
    size_t cut = 0;        // bytes kept: the header and the whole events
    uint64_t events = 0;   // whole events kept
};

// Null: the bytes do not start like a trace gtrace writes.
std::optional<PartialEnd> find_partial_end(std::string_view bytes);

// A file name that says it is a partial trace.
bool is_partial_name(const std::string& path);

// What closes the kept events into a trace whose otherData is `other_data_json`.
std::string partial_closing(std::string_view other_data_json);

} // namespace gtrace
