// A file gtrace reads through a mapping (a trace for `report`, a partial for `recover`) can be
// truncated by its owner while gtrace reads it: the kernel then answers a read past the new end
// with SIGBUS. Within a guarded range that is the file's fault, not gtrace's: one line naming
// the file on stderr and exit 11 (a bad trace), rather than a crash. Outside every guarded range
// SIGBUS is what it always was.
#pragma once
#include <cstddef>
#include <string>

namespace gtrace {

class SigbusGuard {
public:
    SigbusGuard() = default;
    // Guards [start, start + length) of a mapping of `path`.
    SigbusGuard(const void* start, size_t length, const std::string& path);
    SigbusGuard(SigbusGuard&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
    SigbusGuard& operator=(SigbusGuard&& o) noexcept;
    SigbusGuard(const SigbusGuard&) = delete;
    SigbusGuard& operator=(const SigbusGuard&) = delete;
    ~SigbusGuard();

private:
    int slot_ = -1; // -1: nothing guarded (all slots taken: the range stays unguarded)
};

} // namespace gtrace
