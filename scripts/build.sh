#!/usr/bin/env bash
# Installs the dependencies (scripts/setup.sh) and builds into build/ (GTRACE_BUILD_DIR overrides):
# everything — gtrace, its BPF skeletons, the test programs, the GPU simulator and the
# benchmarks — or, given targets, only those (and only the packages building needs).
#
#   scripts/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GTRACE_BUILD_DIR:-build}
if (($#)); then
  bash scripts/setup.sh --build
  TARGETS=(--target "$@")
else
  bash scripts/setup.sh
  TARGETS=()
fi
# The test build: the runtime cases need its hooks (GTRACE_TEST_HOOKS); the package is built apart.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGTRACE_TEST_HOOKS=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" "${TARGETS[@]}"
