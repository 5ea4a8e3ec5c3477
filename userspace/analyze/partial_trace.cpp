#include "analyze/partial_trace.h"

#include <algorithm>

#include "format/json_cursor.h"
#include "format/json_traces.h"

namespace gtrace {
namespace {

// One line holds exactly one JSON object.
bool whole_object(std::string_view line) {
    std::string padded(line);
    padded.append(JsonCursor::kPadding, '\0');
    JsonCursor c(padded.data(), padded.data() + line.size());
    if (c.peek() != '{') return false;
    c.skip();
    c.finish();
    return !c.failed();
}

// Where the events begin: after gtrace's JSON header, or after a Kineto file's header (its
// distributedInfo and names, then "traceEvents": [). npos: not a trace gtrace writes.
size_t events_start(std::string_view bytes) {
    if (bytes.starts_with(kChromeTraceHeader)) return kChromeTraceHeader.size();
    if (!bytes.starts_with(kKinetoHeaderStart)) return std::string_view::npos;
    size_t at = bytes.find(kKinetoEventsStart);
    return at == std::string_view::npos || at > 4096 ? std::string_view::npos : at + kKinetoEventsStart.size();
}

} // namespace

std::optional<PartialEnd> find_partial_end(std::string_view bytes) {
    const size_t body = events_start(bytes);
    if (body == std::string_view::npos) return std::nullopt;
    PartialEnd end;
    // Raw newlines only ever separate events and the closing: one inside a string is written "\n".
    auto newlines = [&](size_t from, size_t to) {
        return static_cast<uint64_t>(std::count(bytes.begin() + static_cast<ptrdiff_t>(from), bytes.begin() + static_cast<ptrdiff_t>(to), '\n'));
    };
    // The closing starts with "\n],\n" (then otherData, or Kineto's deviceProperties).
    if (size_t closing = bytes.rfind("\n],\n"); closing != std::string_view::npos && closing >= body - 1) {
        // Closed, or killed while closing it: keep the events before the closing.
        end.events = closing > body ? newlines(body, closing) + 1 : 0;
        end.complete = bytes.ends_with("}\n");
        end.cut = end.complete ? bytes.size() : std::max(closing, body);
        return end;
    }
    uint64_t lines = newlines(body, bytes.size());
    size_t last_nl = bytes.rfind('\n'); // the header's own newline at least
    std::string_view last_line = bytes.substr(last_nl + 1);
    if (!last_line.empty() && whole_object(last_line)) {
        end.cut = bytes.size();
        end.events = lines + 1;
        return end;
    }
    if (lines == 0) {
        end.cut = body;
        return end;
    }
    // Every line ending in a newline is a whole event and its ",": drop the last ",".
    if (bytes[last_nl - 1] != ',') return std::nullopt;
    end.cut = last_nl - 1;
    end.events = lines;
    return end;
}

bool is_partial_name(const std::string& path) { return path.ends_with(".partial"); }

std::string partial_closing(std::string_view other_data_json) {
    std::string s(kChromeTraceClosing);
    s += other_data_json;
    s += "}\n";
    return s;
}

} // namespace gtrace
