#include "discover/loader_cache.h"

#include <cstdint>
#include <cstring>

namespace gtrace {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr size_t kNewHeader = 48; // magic+version 20, nlibs 4, len_strings 4, flags 1, pad 3, extension 4, unused 12
constexpr size_t kNewEntry = 24;  // flags 4, key 4, value 4, osversion 4, hwcap 8
constexpr size_t kOldHeader = 16; // magic 11, padding 1, nlibs 4
constexpr size_t kOldEntry = 12;  // flags, key, value
constexpr size_t kMaxEntries = 1 << 20;

uint32_t u32(std::string_view b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}

// The NUL-terminated string at `offset` of `base`, if it lies wholly inside.
bool string_at(std::string_view base, uint32_t offset, std::string& out) {
    if (offset >= base.size()) return false;
    size_t end = base.find('\0', offset);
    if (end == std::string_view::npos || end == offset) return false;
    out.assign(base.substr(offset, end - offset));
    return true;
}

} // namespace

std::vector<LoaderCacheEntry> parse_loader_cache(std::string_view bytes) {
    std::vector<LoaderCacheEntry> out;
    size_t at = 0;
    if (bytes.starts_with(kOldMagic)) { // the old table first; the new one follows, 8-byte aligned
        if (bytes.size() < kOldHeader) return out;
        uint64_t nlibs = u32(bytes, 12);
        if (nlibs > kMaxEntries) return out;
        at = (kOldHeader + nlibs * kOldEntry + 7) & ~size_t{7};
    }
    if (at > bytes.size() || bytes.size() - at < kNewHeader || bytes.substr(at, kNewMagic.size()) != kNewMagic) return out;
    std::string_view cache = bytes.substr(at); // the new format's offsets count from its header
    uint64_t nlibs = u32(cache, 20);
    if (nlibs > kMaxEntries || (cache.size() - kNewHeader) / kNewEntry < nlibs) return out;
    out.reserve(static_cast<size_t>(nlibs));
    for (uint64_t i = 0; i < nlibs; ++i) {
        size_t e = kNewHeader + static_cast<size_t>(i) * kNewEntry;
        LoaderCacheEntry entry;
        if (string_at(cache, u32(cache, e + 4), entry.name) && string_at(cache, u32(cache, e + 8), entry.path))
            out.push_back(std::move(entry));
    }
    return out;
}

} // namespace gtrace
