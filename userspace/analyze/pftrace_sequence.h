// One packet sequence's state while reading a .pftrace (analyze/pftrace_reader.h): its clocks
// (format/pftrace_clocks.h) and the interned ids the analysis needs (event names, categories,
// annotation names and string values, source locations, callstacks' innermost frames).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "analyze/trace_data.h"
#include "format/pftrace_clocks.h"

namespace gtrace::pftrace_in {

enum class Cat : uint8_t { Other, Call, Range, Kernel, Memcpy, Memset, Sample, Collective, OffCpu };
enum class Ann : uint8_t { Other, Bytes, Kind, Correlation, Phase, IssuedNs, AtAttach, Comm, NRanks, GroupDepth, Result };

template <typename T>
T get(const std::vector<T>& table, uint64_t iid) {
    return iid < table.size() ? table[iid] : T{};
}

// Its clocks (format/pftrace_clocks.h) and the interned ids the analysis reads.
struct FrameIds {
    uint64_t function = 0, path = 0, line = 0;
};

struct Sequence : SequenceClocks {
    std::vector<std::string_view> names, strings, sources;
    std::vector<std::string_view> function_names, source_paths, stack_sources; // stack_sources: its innermost frame, as text
    std::vector<FrameIds> frames;
    std::vector<Cat> categories;
    std::vector<Ann> annotations;
    void clear() { *this = Sequence(); }
    // InternedData; false: malformed. Strings kept go into `pool` (the trace data's).
    bool read_interned(std::string_view bytes, StringPool& pool);
};

} // namespace gtrace::pftrace_in
