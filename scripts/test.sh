#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: Catch2 unit tests and the runtime cases,
# which run gtrace with real BPF against real processes (needs root and a BTF kernel; a case
# that cannot run says why and fails, unless GTRACE_ALLOW_SKIP=1); then the ASan+UBSan stage
# (scripts/test_sanitized.sh: the unit tests, a set of runtime cases and a short fuzz run against
# a sanitized gtrace; GTRACE_SANITIZED=0 leaves it out). Arguments go to ctest (e.g.
# -R runtime/ps_jobs) and leave the sanitized stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=need_root.sh
source scripts/need_root.sh
[[ ${GTRACE_ALLOW_SKIP:-} == 1 ]] || need_root test "its runtime cases load BPF programs; GTRACE_ALLOW_SKIP=1 skips them" "$0" "$@"
bash scripts/build.sh
# Three at a time: a runtime case mostly waits (its job's pace, gtrace's duration, the kernel
# taking probes off), about a quarter of a core each; cases that must run alone say so
# (`serial = "why"`), and so do the other suites. GTRACE_TEST_JOBS=1 runs one at a time.
(cd "${GTRACE_BUILD_DIR:-build}" && ctest --output-on-failure -j "${GTRACE_TEST_JOBS:-3}" "$@")
if (($#)); then
  echo "test: the ASan+UBSan stage left out (ctest arguments given); scripts/test_sanitized.sh runs it"
elif [[ ${GTRACE_SANITIZED:-1} == 0 ]]; then
  echo "test: the ASan+UBSan stage left out (GTRACE_SANITIZED=0); scripts/test_sanitized.sh runs it"
elif [[ $(id -u) -ne 0 ]]; then
  echo "test: the ASan+UBSan stage skipped: it needs root (GTRACE_ALLOW_SKIP=1)"
else
  bash scripts/test_sanitized.sh
fi
