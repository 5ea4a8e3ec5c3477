#!/usr/bin/env bash
# Builds gtrace, its unit tests and the libFuzzer targets (tests/fuzz/) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer into build-sanitized/ (GTRACE_SANITIZED_BUILD_DIR
# overrides). Only gtrace_core and what links it carry the sanitizers; the agent, the GPU
# simulator and the test programs come from the release build (scripts/build.sh), since they are
# loaded into processes without ASan's runtime. Given targets, builds only those.
#
#   scripts/build_sanitized.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GTRACE_SANITIZED_BUILD_DIR:-build-sanitized}
bash scripts/setup.sh
(($#)) || set -- gtrace unit_tests fuzz_targets
# -O1 and line tables only: faster to compile than -O2 -g, and all that sanitizer reports need.
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGTRACE_SANITIZE=ON -DGTRACE_TEST_HOOKS=ON \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target "$@"
