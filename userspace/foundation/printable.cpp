#include "foundation/printable.h"

#include <fmt/format.h>

namespace gtrace {
namespace {

// The length of the valid UTF-8 sequence at text[i] and its code point, or 0 when invalid
// (overlong forms, surrogates and values past U+10FFFF included).
size_t utf8_sequence(std::string_view text, size_t i, char32_t& cp) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char b = byte(i);
    size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > text.size()) return 0;
    cp = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
    for (size_t k = 1; k < len; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

bool must_escape(char32_t cp) {
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// `layout`: newlines and tabs kept, backslashes as they are (whole lines of text, not a value).
std::string escaped(std::string_view text, bool layout) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        size_t len = utf8_sequence(text, i, cp);
        if (len == 0) len = 1; // an invalid byte: escaped alone
        else if (cp == '\\' && !layout) {
            out += "\\\\";
            i += 1;
            continue;
        } else if (!must_escape(cp) || (layout && (cp == '\n' || cp == '\t'))) {
            out.append(text.substr(i, len));
            i += len;
            continue;
        }
        for (size_t k = 0; k < len; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
        i += len;
    }
    return out;
}

} // namespace

std::string printable(std::string_view text) { return escaped(text, false); }
std::string printable_text(std::string_view text) { return escaped(text, true); }

void print_text(FILE* to, std::string_view text) {
    std::string safe = printable_text(text);
    std::fwrite(safe.data(), 1, safe.size(), to);
}

std::string truncate_chars(std::string_view text, size_t max_chars) {
    size_t chars = 0, cut = 0;
    for (size_t i = 0; i < text.size(); ++chars) {
        if (chars + 1 == max_chars) cut = i; // where "…" goes if the text is longer
        char32_t cp = 0;
        size_t len = utf8_sequence(text, i, cp);
        i += len ? len : 1;
    }
    if (chars <= max_chars) return std::string(text);
    if (max_chars == 0) return {};
    return std::string(text.substr(0, cut)) + "…";
}

} // namespace gtrace
