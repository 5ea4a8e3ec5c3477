// `gtrace report` on a Chrome trace JSON or a Kineto (torch.profiler) file: analyze/trace_data.cpp's
// JSON reader (json_cursor.h), then the analysis and the report's text and JSON.
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    gtrace::fuzz::report({gtrace::fuzz::write_scratch("trace.json", data, size)});
    return 0;
}
