#!/usr/bin/env bash
# The ASan+UBSan run (issue "gtrace behaves on any machine", point 3): builds build-sanitized/
# (scripts/build_sanitized.sh: gtrace, its unit tests and the fuzz targets, clang with
# AddressSanitizer and UndefinedBehaviorSanitizer), runs the unit tests, then the runtime cases
# against the sanitized gtrace — with the release build's agent, GPU simulator and test programs
# (scripts/build.sh), which are loaded into traced processes that have no ASan runtime — and ends
# with a short fuzz run (scripts/fuzz.sh), reproducible: a fixed number of inputs from a fixed seed. Any sanitizer report fails it.
#
#   scripts/test_sanitized.sh [--all | CASE...] [--fuzz-runs N]
#
# Without cases it runs those in tests/runtime/sanitized_cases.txt (every stage of the pipeline,
# every output format, the readers, the command line); --all runs every case. scripts/test.sh
# runs it after the release suite, whose time it builds in (about 2 minutes to run on a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=need_root.sh
source scripts/need_root.sh
need_root test_sanitized "its runtime cases load BPF programs" "$0" "$@"

FUZZ_RUNS=4000
CASES=()
while (($#)); do
  case "$1" in
    --all) for f in tests/runtime/cases/*.toml; do CASES+=("$(basename "$f" .toml)"); done; shift ;;
    --fuzz-runs) FUZZ_RUNS=${2:?--fuzz-runs needs a number}; shift 2 ;;
    --*) echo "test_sanitized: unknown option $1; use scripts/test_sanitized.sh [--all | CASE...] [--fuzz-runs N]" >&2; exit 2 ;;
    *) CASES+=("$1"); shift ;;
  esac
done
if ((${#CASES[@]} == 0)); then
  mapfile -t CASES < <(grep -v '^\s*\(#\|$\)' tests/runtime/sanitized_cases.txt)
fi
for c in "${CASES[@]}"; do
  [[ -f tests/runtime/cases/$c.toml ]] || { echo "test_sanitized: no case $c (tests/runtime/cases/$c.toml)" >&2; exit 2; }
done

RELEASE=${GTRACE_BUILD_DIR:-build}
SANITIZED=${GTRACE_SANITIZED_BUILD_DIR:-build-sanitized}
bash scripts/build.sh >/dev/null
bash scripts/build_sanitized.sh >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export GTRACE_AGENT=$PWD/$RELEASE/libgtrace_agent.so # the sanitized build has no agent of its own

echo "== unit tests (sanitized)"
"$SANITIZED/tests/unit_tests"

failed=()
for c in "${CASES[@]}"; do
  echo "== runtime/$c (sanitized gtrace)"
  log=$(mktemp)
  # In a mount namespace of its own with an empty /run/gtrace, as ctest runs them (own_state.sh).
  if tests/runtime/own_state.sh /usr/bin/python3 tests/runtime/run_case.py "tests/runtime/cases/$c.toml" --gtrace "$PWD/$SANITIZED/gtrace" \
       --programs "$PWD/$RELEASE/programs" --stubs "$PWD/$RELEASE/tests/stubs" --source "$PWD" \
       --gpusim "$PWD/$RELEASE/gpusim" >"$log" 2>&1; then
    echo "PASS"
  else
    failed+=("$c")
    tail -n 40 "$log"
    echo "FAIL: runtime/$c"
  fi
  grep -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$log" && failed+=("$c (sanitizer report)")
  rm -f "$log"
done

echo "== fuzz, $FUZZ_RUNS inputs per target from a fixed seed (the same on every run)"
bash scripts/fuzz.sh --runs "$FUZZ_RUNS" || failed+=("fuzz")

if ((${#failed[@]})); then
  echo "test_sanitized: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test_sanitized: unit tests, ${#CASES[@]} runtime cases and the fuzz run passed under ASan+UBSan"
