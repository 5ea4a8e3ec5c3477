// A strict, streaming JSON reader over one contiguous buffer (a mapped trace file), pulled value
// by value by its caller. It exists because a trace is gigabytes: nlohmann's SAX parser reads
// about 40 MB/s and RapidJSON's about 150–300 MB/s on the machines gtrace runs on, too slow for
// `gtrace report`. This one hands strings out as views into the buffer (copying only the rare
// string with escapes), scans them 16 bytes at a time, and never checks for the buffer's end:
// the buffer must be followed by kPadding zero bytes, and a zero byte is never valid JSON text,
// so every loop stops there. It checks all of JSON's grammar, UTF-8 and surrogate pairs
// included, so a truncated or corrupt file is an error, never a partial read. An error is
// sticky: the cursor jumps to the end and every later call is a no-op.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace gtrace {

class JsonCursor {
public:
    static constexpr size_t kPadding = 64;

    // [begin, end) is the document; end[0, kPadding) must be readable and zero.
    JsonCursor(const char* begin, const char* end) : begin_(begin), p_(begin), end_(end) {}

    bool failed() const { return failed_; }
    size_t offset() const { return failed_ ? error_at_ : static_cast<size_t>(p_ - begin_); }
    const char* position() const { return p_; }

    // For readers that split a document: go on at p, where a value or a separator starts.
    void seek(const char* p) {
        if (!failed_) p_ = p;
    }
    // An error at p.
    std::string_view fail_at(const char* p) {
        if (!failed_) error_at_ = static_cast<size_t>(p - begin_);
        failed_ = true;
        p_ = end_;
        return {};
    }

    // The next value's first character ('\0' at the end or after an error).
    char peek() {
        p_ = skip_ws(p_);
        return *p_;
    }

    // Objects: `bool first = true; while (c.next_key(first, key)) { ...read or skip the value... }`
    // after `begin_object()`. next_key consumes the separators and the ':'; false at the '}'.
    bool begin_object() { return expect('{'); }
    bool next_key(bool& first, std::string_view& key) {
        const char* p = skip_ws(p_);
        if (*p == '}') return p_ = p + 1, false;
        if (!first) {
            if (*p != ',') return fail_at(p), false;
            p = skip_ws(p + 1);
        }
        first = false;
        if (*p != '"') return fail_at(p), false;
        p_ = p + 1;
        key = string_body(key_);
        return expect(':');
    }
    // Arrays, the same way: next_element leaves the cursor on the element; false at the ']'.
    bool begin_array() { return expect('['); }
    bool next_element(bool& first) {
        const char* p = skip_ws(p_);
        if (*p == ']') return p_ = p + 1, false;
        if (!first) {
            if (*p != ',') return fail_at(p), false;
            p = skip_ws(p + 1);
        }
        first = false;
        p_ = p;
        return !failed_;
    }

    // A string value, unescaped: a view into the buffer, or into `scratch` when it had escapes.
    std::string_view string(std::string& scratch) { return expect('"') ? string_body(scratch) : std::string_view(); }

    // A number's text, checked against JSON's grammar.
    [[gnu::always_inline]] std::string_view number() {
        const char* p = skip_ws(p_);
        const char* s = p;
        p += *p == '-';
        if (*p == '0') ++p;
        else if (!digits(p)) return fail_at(p);
        if (*p == '.' && !digits(++p)) return fail_at(p);
        bool exponent = *p == 'e' || *p == 'E';
        if (exponent) {
            ++p;
            p += *p == '+' || *p == '-';
            if (!digits(p)) return fail_at(p);
        }
        p_ = p;
        std::string_view text(s, static_cast<size_t>(p - s));
        if (exponent || text.size() > 300) [[unlikely]]
            return in_range(text);
        return text;
    }

    // true, false or null; returns whether it was true.
    bool literal() {
        const char* p = skip_ws(p_);
        for (std::string_view word : {"true", "false", "null"})
            if (memcmp(p, word.data(), word.size()) == 0) { // the padding makes 5 bytes readable
                p_ = p + word.size();
                return word[0] == 't';
            }
        return fail_at(p), false;
    }

    // Any value, checked and dropped.
    void skip() {
        switch (peek()) {
        case '"': string(skipped_); break;
        case '{': {
            if (++depth_ > kMaxDepth) return void(fail_at(p_));
            begin_object();
            std::string_view key;
            for (bool first = true; next_key(first, key);) skip();
            --depth_;
            break;
        }
        case '[': {
            if (++depth_ > kMaxDepth) return void(fail_at(p_));
            begin_array();
            for (bool first = true; next_element(first);) skip();
            --depth_;
            break;
        }
        case 't': case 'f': case 'n': literal(); break;
        default: number();
        }
    }

    // After the top-level value: only whitespace may follow.
    void finish() {
        const char* p = skip_ws(p_);
        if (p != end_ && !failed_) fail_at(p);
    }

private:
    static constexpr int kMaxDepth = 4096;

    // Beyond a double's range, like nlohmann (the reader gtrace used before): an error.
    [[gnu::noinline]] std::string_view in_range(std::string_view number) {
        return std::isinf(std::strtod(std::string(number).c_str(), nullptr)) ? fail_at(number.data()) : number;
    }

    static const char* skip_ws(const char* p) {
        while (static_cast<unsigned char>(*p) <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
        return p;
    }

    bool expect(char c) {
        const char* p = skip_ws(p_);
        if (*p != c) return fail_at(p), false;
        p_ = p + 1;
        return true;
    }

    // Skips a run of digits, 8 bytes at a time; whether there was one.
    static bool digits(const char*& p) {
        const char* s = p;
        if constexpr (std::endian::native == std::endian::little) {
            constexpr uint64_t high_nibbles = 0xF0F0F0F0F0F0F0F0ull, low7 = 0x7F7F7F7F7F7F7F7Full;
            for (;; p += 8) {
                uint64_t w;
                memcpy(&w, p, 8); // the padding keeps this in bounds
                // Per byte, non-zero unless a digit: high nibble not 3, or low nibble above 9.
                uint64_t bad = ((w & high_nibbles) ^ 0x3030303030303030ull) | (((w & ~high_nibbles) + 0x0606060606060606ull) & high_nibbles);
                uint64_t flags = (((bad & low7) + low7) | bad) & ~low7;
                if (flags) {
                    p += std::countr_zero(flags) / 8;
                    break;
                }
            }
        } else {
            while (static_cast<unsigned char>(*p - '0') < 10) ++p;
        }
        return p > s;
    }

    // The string after its opening quote, up to and past its closing one. Inline for the usual
    // string, plain ASCII (all keys); the rest out of line.
    [[gnu::always_inline]] std::string_view string_body(std::string& scratch) {
        const char* end = scan_plain(p_);
        if (*end == '"') {
            std::string_view out(p_, static_cast<size_t>(end - p_));
            p_ = end + 1;
            return out;
        }
        return string_slow(scratch);
    }

    [[gnu::noinline]] std::string_view string_slow(std::string& scratch) {
        const char *p = p_, *start = p;
        bool copied = false;
        for (;;) {
            p = scan_plain(p);
            unsigned char c = static_cast<unsigned char>(*p);
            if (c == '"') {
                p_ = p + 1;
                return copied ? std::string_view(scratch.append(start, p)) : std::string_view(start, static_cast<size_t>(p - start));
            }
            if (c >= 0x80) {
                const char* next = utf8_sequence(p);
                if (!next) return fail_at(p);
                p = next;
                continue;
            }
            if (c != '\\') return fail_at(p); // a raw control character, or the end
            if (!copied) scratch.clear(), copied = true;
            scratch.append(start, p);
            const char* next = unescape(p, scratch);
            if (!next) return fail_at(p);
            p = start = next;
        }
    }

    // The first byte at or after p that ends a plain run of a string: '"', '\\', a control
    // character (the padding's zeros included) or a non-ASCII byte.
    [[gnu::always_inline]] static const char* scan_plain(const char* p) {
#ifdef __SSE2__
        // 16 at a time: a signed compare with 0x20 catches control and non-ASCII bytes at once.
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        for (;; p += 16) {
            __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), _mm_cmplt_epi8(v, space));
            if (int mask = _mm_movemask_epi8(hit)) return p + std::countr_zero(static_cast<unsigned>(mask));
        }
#else
        for (;; ++p) {
            unsigned char c = static_cast<unsigned char>(*p);
            if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
        }
#endif
    }

    // One UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF);
    // the byte after it, or null.
    static const char* utf8_sequence(const char* p) {
        auto byte = [&](int i) { return static_cast<unsigned char>(p[i]); };
        unsigned char c = byte(0);
        int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!n) return nullptr;
        unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (byte(1) < lo || byte(1) > hi) return nullptr; // a zero (the end) stops here too
        for (int i = 2; i < n; ++i)
            if (byte(i) < 0x80 || byte(i) > 0xBF) return nullptr;
        return p + n;
    }

    static bool hex4(const char*& p, uint32_t& out) {
        out = 0;
        for (int i = 0; i < 4; ++i) {
            char c = *p++;
            uint32_t v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 16;
            if (v == 16) return false;
            out = out << 4 | v;
        }
        return true;
    }

    // The escape at p ('\\'), appended to out as UTF-8; the byte after it, or null.
    static const char* unescape(const char* p, std::string& out) {
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': case '\\': case '/': out += e; return p;
        case 'b': out += '\b'; return p;
        case 'f': out += '\f'; return p;
        case 'n': out += '\n'; return p;
        case 'r': out += '\r'; return p;
        case 't': out += '\t'; return p;
        case 'u': break;
        default: return nullptr; // a zero (the end) too
        }
        uint32_t cp;
        if (!hex4(p, cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return nullptr;
        if (cp >= 0xD800 && cp <= 0xDBFF) { // a high surrogate: its low half must follow
            uint32_t low;
            if (p[0] != '\\' || p[1] != 'u' || (p += 2, !hex4(p, low)) || low < 0xDC00 || low > 0xDFFF) return nullptr;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | cp >> 6), out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | cp >> 12), out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | cp >> 18), out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
            out += static_cast<char>(0x80 | (cp >> 6 & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return p;
    }

    const char* begin_;
    const char* p_;
    const char* end_;
    bool failed_ = false;
    size_t error_at_ = 0;
    int depth_ = 0;
    std::string key_, skipped_;
};

} // namespace gtrace
