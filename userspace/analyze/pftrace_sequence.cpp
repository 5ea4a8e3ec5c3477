#include "analyze/pftrace_sequence.h"

#include <fmt/format.h>

#include "analyze/proto_wire.h"

namespace gtrace::pftrace_in {
namespace {

using proto::WireReader;

constexpr uint64_t kMaxIid = 1 << 22; // interned ids gtrace hands out count from 1; more is not gtrace's

Cat category_of(std::string_view s) {
    if (s == "cuda_api" || s == "cuda_api,agent") return Cat::Call; // ",agent": the agent recorded it
    if (s == "torch_range" || s == "nvtx") return Cat::Range; // NVTX ranges are ranges like torch's
    if (s == "kernel") return Cat::Kernel;
    if (s == "gpu_memcpy") return Cat::Memcpy;
    if (s == "gpu_memset") return Cat::Memset;
    if (s == "sample") return Cat::Sample;
    if (s == "collective") return Cat::Collective;
    if (s == "off_cpu") return Cat::OffCpu;
    return Cat::Other;
}

Ann annotation_of(std::string_view s) {
    if (s == "bytes") return Ann::Bytes;
    if (s == "kind") return Ann::Kind;
    if (s == "correlation") return Ann::Correlation;
    if (s == "phase") return Ann::Phase;
    if (s == "issued_ns") return Ann::IssuedNs;
    if (s == "at_attach") return Ann::AtAttach;
    return Ann::Other;
}

template <typename T>
bool put(std::vector<T>& table, uint64_t iid, T value) {
    if (iid == 0 || iid > kMaxIid) return false;
    if (table.size() <= iid) table.resize(iid + 1);
    table[iid] = value;
    return true;
}

} // namespace

bool Sequence::read_defaults(std::string_view bytes) {
    WireReader r(bytes);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field == 58) clock = static_cast<uint32_t>(r.varint_of(type));
        else if (field == 11 && type == 2) {
            WireReader d(r.bytes());
            while (d.next(field, type)) {
                if (field == 11) track = d.varint_of(type);
                else d.skip(type);
            }
            if (d.failed()) return false;
        } else r.skip(type);
    }
    return !r.failed();
}

bool for_each_clock(std::string_view snapshot, const std::function<void(uint32_t id, uint64_t ts)>& on_clock) {
    WireReader r(snapshot);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (field != 1 || type != 2) {
            r.skip(type);
            continue;
        }
        WireReader c(r.bytes());
        uint32_t id = 0;
        uint64_t ts = 0;
        while (c.next(field, type)) {
            if (field == 1) id = static_cast<uint32_t>(c.varint_of(type));
            else if (field == 2) ts = c.varint_of(type);
            else c.skip(type);
        }
        if (c.failed()) return false;
        on_clock(id, ts);
    }
    return !r.failed();
}

std::optional<int64_t> realtime_offset(std::string_view snapshot) {
    std::optional<uint64_t> mono, real;
    bool ok = for_each_clock(snapshot, [&](uint32_t id, uint64_t ts) {
        if (id == kClockMonotonic) mono = ts;
        if (id == kClockRealtime) real = ts;
    });
    if (!ok || !mono || !real) return std::nullopt;
    return static_cast<int64_t>(*real - *mono);
}

bool Sequence::read_clock_snapshot(std::string_view bytes) {
    std::optional<uint64_t> mono, inc[kMaxIncrementalClocks];
    bool ok = for_each_clock(bytes, [&](uint32_t id, uint64_t ts) {
        if (id == kClockMonotonic) mono = ts;
        if (id >= kClockIncremental && id < kClockIncremental + kMaxIncrementalClocks) inc[id - kClockIncremental] = ts;
    });
    for (uint32_t i = 0; i < kMaxIncrementalClocks; ++i)
        if (ok && mono && inc[i]) incremental[i] = {true, *inc[i], static_cast<int64_t>(*mono - *inc[i])};
    return ok;
}

std::optional<uint64_t> Sequence::time_of(uint32_t clock, uint64_t timestamp) {
    if (clock == kClockMonotonic) return timestamp;
    if (clock < kClockIncremental || clock >= kClockIncremental + kMaxIncrementalClocks) return std::nullopt; // gtrace writes no other
    Incremental& inc = incremental[clock - kClockIncremental];
    if (!inc.known) return std::nullopt; // no snapshot defines it: the event cannot be placed
    inc.value += timestamp;
    return inc.value + static_cast<uint64_t>(inc.offset);
}

// {iid = 1, name or str = 2} entries; SourceLocation {iid 1, file 2, function 3, line 4}.
bool Sequence::read_interned(std::string_view bytes, StringPool& pool) {
    WireReader r(bytes);
    uint32_t field, type;
    while (r.next(field, type)) {
        if (type != 2 || (field != 1 && field != 2 && field != 3 && field != 4 && field != 29)) {
            r.skip(type);
            continue;
        }
        WireReader e(r.bytes());
        uint64_t iid = 0, line = 0;
        std::string_view name, function; // a SourceLocation's file is its name (field 2)
        uint32_t f, t;
        while (e.next(f, t)) {
            if (f == 1) iid = e.varint_of(t);
            else if (f == 2) name = e.bytes_of(t);
            else if (f == 3 && field == 4) function = e.bytes_of(t);
            else if (f == 4 && field == 4) line = e.varint_of(t);
            else e.skip(t);
        }
        if (e.failed()) return false;
        bool ok = true;
        switch (field) {
        case 1: ok = put(categories, iid, category_of(name)); break;
        case 2: ok = put(names, iid, pool.intern(name)); break;
        case 3: ok = put(annotations, iid, annotation_of(name)); break;
        case 29: ok = put(strings, iid, pool.intern(name)); break;
        case 4: ok = put(sources, iid, pool.intern(fmt::format("{} ({}:{})", function, name, line))); break;
        }
        if (!ok) return false;
    }
    return !r.failed();
}

} // namespace gtrace::pftrace_in
