// A killed capture's FILE.partial, JSON or .pftrace: `gtrace report` reads it up to its last whole
// event (partial_trace.cpp, find_pftrace_end), and `gtrace recover` closes it; a trace recover
// wrote must then read back.
#include "cli/recover_command.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    std::string partial = fuzz::write_scratch("trace.partial", data, size);
    fuzz::report({partial});
    std::string recovered = fuzz::scratch_dir() + "/recovered";
    if (run_recover({.partial = partial, .output = recovered, .force = true})) {
        auto t = load_trace(recovered);
        if (!t) fuzz::broken("recover wrote a trace that does not read back", t.error().message);
    }
    return 0;
}
