// Text that other users control (their processes' command lines, library paths, a trace's
// labels), made safe to print on a terminal and to put in JSON: nothing in it can move the
// cursor, recolour, retitle or reorder what gtrace prints around it. One path for every line
// gtrace prints (print_safe): live lines, the capture's summary, reports, errors.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace gtrace {

// Valid UTF-8 with every control character (C0, DEL, C1), every bidirectional override or
// isolate (U+202A-U+202E, U+2066-U+2069) and every byte that is not part of valid UTF-8 written
// as \xNN (one per byte); a backslash is written as \\, so the escaping is unambiguous.
std::string printable(std::string_view text);

// The same for whole lines of text (a summary, a report, an error message with a path in it):
// newlines and tabs kept, backslashes left as they are; every other control character escaped.
std::string printable_text(std::string_view text);

// Writes printable_text(text): every line gtrace prints that may hold text from a target or a
// trace (paths, command lines, process labels, an agent's message) goes out through here.
void print_text(FILE* to, std::string_view text);

// fmt::print through print_text.
template <typename... Args>
void print_safe(FILE* to, fmt::format_string<Args...> format, Args&&... args) {
    print_text(to, fmt::format(format, std::forward<Args>(args)...));
}

// At most `max_chars` code points of printable text (whole code points only), the last one "…"
// when it was cut.
std::string truncate_chars(std::string_view text, size_t max_chars);

} // namespace gtrace
