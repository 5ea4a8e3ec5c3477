#include "analyze/pftrace_sequence.h"

#include <fmt/format.h>

#include "format/proto_wire.h"
#include "pftrace_field_numbers.h"

namespace gtrace::pftrace_in {
namespace {

using proto::WireReader;
using ID = pftrace::InternedData;

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
    if (s == "comm") return Ann::Comm;
    if (s == "nranks") return Ann::NRanks;
    if (s == "group_depth") return Ann::GroupDepth;
    if (s == "result") return Ann::Result;
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

// {iid = 1, name or str = 2} entries; SourceLocation {iid 1, file 2, function 3, line 4};
// Frame {iid 1, function name id 2, source path 5, line 6}; Callstack {iid 1, frame ids 2}.
bool Sequence::read_interned(std::string_view bytes, StringPool& pool) {
    WireReader r(bytes);
    uint32_t field, type;
    while (r.next(field, type)) {
        const bool wanted = field == ID::kEventCategories || field == ID::kEventNames || field == ID::kDebugAnnotationNames ||
                            field == ID::kSourceLocations || field == ID::kDebugAnnotationStringValues ||
                            field == ID::kFunctionNames || field == ID::kSourcePaths || field == ID::kFrames ||
                            field == ID::kCallstacks;
        if (type != 2 || !wanted) {
            r.skip(type);
            continue;
        }
        WireReader e(r.bytes());
        uint64_t iid = 0, line = 0, innermost = 0;
        std::string_view name, function; // a SourceLocation's file is its name (field 2)
        FrameIds frame;
        uint32_t f, t;
        while (e.next(f, t)) {
            if (f == 1) iid = e.varint_of(t);
            else if (field == ID::kFrames) {
                if (f == pftrace::Frame::kFunctionNameId) frame.function = e.varint_of(t);
                else if (f == pftrace::Frame::kSourcePathIid) frame.path = e.varint_of(t);
                else if (f == pftrace::Frame::kLineNumber) frame.line = e.varint_of(t);
                else e.skip(t);
            } else if (field == ID::kCallstacks) {
                if (f == pftrace::Callstack::kFrameIds && t == 0) innermost = e.varint_of(t); // outermost first
                else if (f == pftrace::Callstack::kFrameIds && t == 2) {
                    WireReader packed(e.bytes());
                    while (!packed.done()) innermost = packed.varint();
                    if (packed.failed()) return false;
                } else e.skip(t);
            } else if (f == pftrace::SourceLocation::kFileName) name = e.bytes_of(t);
            else if (f == pftrace::SourceLocation::kFunctionName && field == ID::kSourceLocations) function = e.bytes_of(t);
            else if (f == pftrace::SourceLocation::kLineNumber && field == ID::kSourceLocations) line = e.varint_of(t);
            else e.skip(t);
        }
        if (e.failed()) return false;
        bool ok = true;
        switch (field) {
        case ID::kEventCategories: ok = put(categories, iid, category_of(name)); break;
        case ID::kEventNames: ok = put(names, iid, pool.intern(name)); break;
        case ID::kDebugAnnotationNames: ok = put(annotations, iid, annotation_of(name)); break;
        case ID::kDebugAnnotationStringValues: ok = put(strings, iid, pool.intern(name)); break;
        case ID::kSourceLocations: ok = put(sources, iid, pool.intern(fmt::format("{} ({}:{})", function, name, line))); break;
        case ID::kFunctionNames: ok = put(function_names, iid, pool.intern(name)); break;
        case ID::kSourcePaths: ok = put(source_paths, iid, pool.intern(name)); break;
        case ID::kFrames: ok = put(frames, iid, frame); break;
        case ID::kCallstacks: {
            // Where a call has no source location, its user line is its callstack's innermost frame.
            const FrameIds top = get(frames, innermost);
            std::string_view text;
            if (top.function) text = pool.intern(fmt::format("{} ({}:{})", get(function_names, top.function), get(source_paths, top.path), top.line));
            ok = put(stack_sources, iid, text);
            break;
        }
        }
        if (!ok) return false;
    }
    return !r.failed();
}

} // namespace gtrace::pftrace_in
