// gtrace --version / -V: the version, the git commit it was built from, and what the running
// kernel offers (attach/kernel_features.h).
#pragma once

namespace gtrace {

int run_version();

} // namespace gtrace
