// Text that other users control (their processes' command lines), made safe to print on a
// terminal and to put in JSON: nothing in it can move the cursor, recolour, retitle or reorder
// what gtrace prints around it.
#pragma once
#include <string>
#include <string_view>

namespace gtrace {

// Valid UTF-8 with every control character (C0, DEL, C1), every bidirectional override or
// isolate (U+202A-U+202E, U+2066-U+2069) and every byte that is not part of valid UTF-8 written
// as \xNN (one per byte); a backslash is written as \\, so the escaping is unambiguous.
std::string printable(std::string_view text);

// At most `max_chars` code points of printable text (whole code points only), the last one "…"
// when it was cut.
std::string truncate_chars(std::string_view text, size_t max_chars);

} // namespace gtrace
