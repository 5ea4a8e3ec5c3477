// `gtrace report` on a Perfetto .pftrace: the wire-format reader (pftrace_reader.cpp,
// pftrace_sequence.cpp, proto_wire.h), then the analysis and the report's text and JSON.
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    gtrace::fuzz::report({gtrace::fuzz::write_scratch("trace.pftrace", data, size)});
    return 0;
}
