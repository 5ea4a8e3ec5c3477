#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: Catch2 unit tests and the runtime cases,
# which run gtrace with real BPF against real processes (needs root and a BTF kernel; a case
# that cannot run says why and fails, unless GTRACE_ALLOW_SKIP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure "$@"
