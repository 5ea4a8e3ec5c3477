#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: Catch2 unit tests and the runtime cases,
# which run gtrace with real BPF against real processes (needs root and a BTF kernel; a case
# that cannot run says why and fails, unless GTRACE_ALLOW_SKIP=1). Arguments go to ctest
# (e.g. -R runtime/ps_jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=need_root.sh
source scripts/need_root.sh
[[ ${GTRACE_ALLOW_SKIP:-} == 1 ]] || need_root test "its runtime cases load BPF programs; GTRACE_ALLOW_SKIP=1 skips them" "$0" "$@"
bash scripts/build.sh
cd "${GTRACE_BUILD_DIR:-build}"
ctest --output-on-failure "$@"
