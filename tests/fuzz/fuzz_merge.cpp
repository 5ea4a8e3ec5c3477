// `gtrace merge` of two .pftrace traces (the input: a 2-byte little-endian length, the first
// trace, then the second): the clock alignment's report over both, the packets rewritten
// (output/pftrace_merge.cpp); a merged trace must read back.
#include "analyze/trace_data.h"
#include "fuzz_support.h"
#include "output/pftrace_merge.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    if (size < 2) return 0;
    size_t first = std::min<size_t>(data[0] | data[1] << 8, size - 2);
    std::string a = fuzz::write_scratch("a.pftrace", data + 2, first);
    std::string b = fuzz::write_scratch("b.pftrace", data + 2 + first, size - 2 - first);
    if (!fuzz::report({a, b})) return 0; // gtrace merge reads the traces first and merges only those it read
    std::string merged = fuzz::scratch_dir() + "/merged.pftrace";
    if (merge_pftraces({{a, "node-a", 0}, {b, "node-b", -2'500'000}}, merged, true, "{\"nodes\":[]}")) {
        auto t = load_trace(merged);
        if (!t) fuzz::broken("merge wrote a trace that does not read back", t.error().message);
    }
    return 0;
}
