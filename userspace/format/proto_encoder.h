// Protocol buffer wire encoding for the few messages gtrace writes (format/pftrace.proto):
// varints, fixed64, length-delimited fields, nested messages. Appends to a string. A nested
// message reserves one byte for its length and moves its body when the length needs more, so
// every length is in its shortest form (a trace of small events is mostly headers).
// What it writes is read back by protoc's classes in the tests (tests/runtime/trace_formats.py
// check_pftrace, formats/outside_readers), not only by gtrace's own reader.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gtrace::proto {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, ++n;
    return n;
}

// Writes v's varint at p (room for 10 bytes); returns the end.
inline char* put_varint(char* p, uint64_t v) {
    while (v >= 0x80) *p++ = static_cast<char>(v | 0x80), v >>= 7;
    *p++ = static_cast<char>(v);
    return p;
}

inline void append_varint(std::string& out, uint64_t v) {
    char buf[10];
    out.append(buf, put_varint(buf, v) - buf);
}

class Encoder {
public:
    explicit Encoder(std::string& out) : out_(out) {}

    void tag(uint32_t field, WireType type) { append_varint(out_, (uint64_t{field} << 3) | type); }
    void varint(uint32_t field, uint64_t v) { // one append: most of a small event's fields are these
        char buf[20];
        char* end = put_varint(put_varint(buf, (uint64_t{field} << 3) | kVarint), v);
        out_.append(buf, end - buf);
    }
    // int32/int64 fields: negative values as ten-byte two's complement, as protobuf does.
    void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
    void boolean(uint32_t field, bool v) { varint(field, v ? 1 : 0); }
    void fixed64(uint32_t field, uint64_t v) {
        char buf[18];
        char* p = put_varint(buf, (uint64_t{field} << 3) | kFixed64);
        memcpy(p, &v, 8); // little-endian hosts only (x86_64, aarch64)
        out_.append(buf, p + 8 - buf);
    }
    void float64(uint32_t field, double v) {
        uint64_t bits;
        memcpy(&bits, &v, 8);
        fixed64(field, bits);
    }
    void bytes(uint32_t field, std::string_view s) {
        tag(field, kLengthDelimited);
        append_varint(out_, s.size());
        out_.append(s);
    }
    // A message already encoded (its body).
    void message(uint32_t field, std::string_view body) { bytes(field, body); }

    // A nested message: begin(field), its fields, end().
    void begin(uint32_t field) {
        tag(field, kLengthDelimited);
        open_.push_back(out_.size());
        out_.push_back(0);
    }
    void end() {
        size_t at = open_.back();
        open_.pop_back();
        size_t len = out_.size() - at - 1;
        size_t n = varint_size(len);
        if (n > 1) {
            out_.insert(at + 1, n - 1, '\0');
        }
        char* p = out_.data() + at;
        for (uint64_t v = len; v >= 0x80; v >>= 7) *p++ = static_cast<char>(v | 0x80);
        *p = static_cast<char>(len >> (7 * (n - 1)));
    }
    size_t depth() const { return open_.size(); }

private:
    std::string& out_;
    std::vector<size_t> open_;
};

} // namespace gtrace::proto
