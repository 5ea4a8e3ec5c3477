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
BUILD=${GTRACE_BUILD_DIR:-build}

sanitized=1
if (($#)); then
  sanitized=0 why="ctest arguments given"
elif [[ ${GTRACE_SANITIZED:-1} == 0 ]]; then
  sanitized=0 why="GTRACE_SANITIZED=0"
elif [[ $(id -u) -ne 0 ]]; then
  sanitized=0 why="it needs root (GTRACE_ALLOW_SKIP=1)"
fi

# The sanitized build is compiled beside the release suite at the lowest priority: the cases
# mostly wait, so it takes only the CPU they leave idle.
if ((sanitized)); then
  sanitized_log=$BUILD/sanitized-build.log
  setsid nice -n 19 bash scripts/build_sanitized.sh >"$sanitized_log" 2>&1 &
  sanitized_build=$!
  trap 'kill -- -$sanitized_build 2>/dev/null || true' EXIT
fi

# Three at a time: a runtime case mostly waits (its job's pace, gtrace's duration, the kernel
# taking probes off), about a quarter of a core each; cases that must run alone say so
# (`serial = "why"`), and so do the other suites. GTRACE_TEST_JOBS=1 runs one at a time.
# Every process the suite starts carries GTRACE_SUITE_ID: one still running afterwards is a
# test's leftover (tests/runtime/leftovers.py), which would have taken the CPU from the tests
# after it; it is named, killed, and fails the run.
export GTRACE_SUITE_ID="$$-$(date +%s%N)"
status=0
(cd "$BUILD" && ctest --output-on-failure -j "${GTRACE_TEST_JOBS:-3}" "$@") || status=$?
# CI keeps a long run's last lines: each failed test's reason is repeated there.
((status == 0)) || /usr/bin/python3 tests/runtime/failure_digest.py "$BUILD"
/usr/bin/python3 tests/runtime/leftovers.py check "$GTRACE_SUITE_ID" ${sanitized_build:+--spare "$sanitized_build"} || status=1
((status == 0)) || exit "$status"

if ((sanitized)); then
  if ! wait "$sanitized_build"; then
    tail -n 40 "$sanitized_log"
    echo "test: the sanitized build failed ($sanitized_log)" >&2
    exit 1
  fi
  trap - EXIT
  bash scripts/test_sanitized.sh
else
  echo "test: the ASan+UBSan stage left out ($why); scripts/test_sanitized.sh runs it"
fi
