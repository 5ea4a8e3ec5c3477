// Reading protocol buffer wire format from a buffer, strictly and within bounds: a varint of
// more than ten bytes, a length past the end of its message, a group or an unknown wire type
// is an error (sticky, as in JsonCursor), never a read outside the buffer. Traces are hostile
// input to `gtrace report`.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gtrace::proto {

class WireReader {
public:
    WireReader(const char* begin, const char* end) : p_(reinterpret_cast<const uint8_t*>(begin)), end_(reinterpret_cast<const uint8_t*>(end)) {}
    explicit WireReader(std::string_view s) : WireReader(s.data(), s.data() + s.size()) {}

    bool failed() const { return failed_; }
    bool done() const { return failed_ || p_ >= end_; }
    const char* position() const { return reinterpret_cast<const char*>(p_); }

    // The next field's number and wire type; false at the end or after an error.
    bool next(uint32_t& field, uint32_t& type) {
        if (done()) return false;
        uint64_t tag = varint();
        if (failed_ || tag >> 3 == 0 || tag >> 3 > 0x1FFFFFFF) return fail();
        field = static_cast<uint32_t>(tag >> 3), type = static_cast<uint32_t>(tag & 7);
        if (type != 0 && type != 1 && type != 2 && type != 5) return fail(); // groups are not in this schema
        return true;
    }

    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (p_ >= end_) return fail(), 0;
            uint8_t b = *p_++;
            v |= uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80)) return v;
        }
        return fail(), 0;
    }
    uint64_t fixed64() {
        if (end_ - p_ < 8) return fail(), 0;
        uint64_t v;
        memcpy(&v, p_, 8);
        p_ += 8;
        return v;
    }
    std::string_view bytes() {
        uint64_t n = varint();
        if (failed_ || n > static_cast<uint64_t>(end_ - p_)) return fail(), std::string_view();
        std::string_view s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        return s;
    }
    // The value of a field of `type` that the caller does not want.
    void skip(uint32_t type) {
        switch (type) {
        case 0: varint(); break;
        case 1: fixed64(); break;
        case 2: bytes(); break;
        case 5:
            if (end_ - p_ < 4) fail();
            else p_ += 4;
            break;
        default: fail();
        }
    }
    // A varint field's value, when the field has that type (else skipped, and 0).
    uint64_t varint_of(uint32_t type) {
        if (type == 0) return varint();
        skip(type);
        return 0;
    }
    std::string_view bytes_of(uint32_t type) {
        if (type == 2) return bytes();
        skip(type);
        return {};
    }
    uint64_t fixed64_of(uint32_t type) {
        if (type == 1) return fixed64();
        skip(type);
        return 0;
    }

    bool fail() {
        failed_ = true;
        p_ = end_;
        return false;
    }

private:
    const uint8_t* p_;
    const uint8_t* end_;
    bool failed_ = false;
};

} // namespace gtrace::proto
