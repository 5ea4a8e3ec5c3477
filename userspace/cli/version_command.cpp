#include "foundation/printable.h"
#include "cli/version_command.h"

#include <fmt/format.h>

#include "attach/kernel_features.h"
#include "gtrace_version.h"

namespace gtrace {

int run_version() {
    print_safe(stdout, "gtrace {} (commit {})\n", kGtraceVersion, kGtraceGitCommit);
    KernelFeatures k = probe_kernel_features();
    print_safe(stdout, "kernel {}:\n", k.release.empty() ? "(unknown release)" : k.release);
    for (const KernelFeature* f : k.all()) {
        const char* answer = f->support == Support::Yes ? "yes" : f->support == Support::No ? "no" : "unknown";
        print_safe(stdout, "  {:<36} {}{}\n", f->name + ":", answer, f->detail.empty() ? "" : " (" + f->detail + ")");
    }
    return 0;
}

} // namespace gtrace
