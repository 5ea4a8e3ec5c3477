// fail() alone in its object file: the command-line fuzz target (tests/fuzz/) links its own fail(),
// one that throws instead of ending the process, in front of this one.
#include <cstdlib>

#include <fmt/format.h>

#include "foundation/printable.h"
#include "cli/command_line.h"

namespace gtrace {

void fail(const Error& e) {
    print_safe(stderr, "gtrace: error: {}\n", e.message);
    std::exit(to_int(e.code));
}

} // namespace gtrace
