#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/), each for N seconds from its seed corpus
# (tests/fuzz/corpus/TARGET/) and what earlier runs found (build-sanitized/fuzz/corpus/TARGET/).
# Fails on any crash, sanitizer report, leak, timeout (a hang) or out-of-memory, and prints the
# input that reproduces it. CI runs the short default; tests/fuzz/README.md has the long run.
#
#   scripts/fuzz.sh [--seconds N | --runs N] [TARGET...]     (default: 10 s each, every target)
#
# --runs N: N inputs per target from a fixed seed (-seed=1) instead of a time: the same inputs on
# every machine, so that a CI run is reproducible (scripts/test_sanitized.sh uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=10
RUNS=
while (($#)) && [[ $1 == --* ]]; do
  case "$1" in
    --seconds) SECONDS_EACH=${2:?--seconds needs a number}; shift 2 ;;
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    *) echo "fuzz: unknown option $1; use scripts/fuzz.sh [--seconds N] [TARGET...]" >&2; exit 2 ;;
  esac
done
[[ $SECONDS_EACH =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --seconds $SECONDS_EACH: give a whole number of seconds" >&2; exit 2; }
[[ -z $RUNS || $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --runs $RUNS: give a whole number of inputs" >&2; exit 2; }
if [[ -n $RUNS ]]; then BUDGET=(-runs="$RUNS" -seed=1); SAID="$RUNS inputs (seed 1)"; else BUDGET=(-max_total_time="$SECONDS_EACH"); SAID="${SECONDS_EACH} s"; fi
BUILD=${GTRACE_SANITIZED_BUILD_DIR:-build-sanitized}
if (($#)); then TARGETS=("$@"); else
  TARGETS=()
  for f in tests/fuzz/fuzz_*.cpp; do TARGETS+=("$(basename "$f" .cpp)"); done
fi
for t in "${TARGETS[@]}"; do
  [[ -f tests/fuzz/$t.cpp ]] || { echo "fuzz: no target $t (tests/fuzz/$t.cpp)" >&2; exit 2; }
done
bash scripts/build_sanitized.sh "${TARGETS[@]}" >/dev/null

# A sanitizer report ends the run with the input kept; leaks count (libFuzzer checks them).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

failed=()
for t in "${TARGETS[@]}"; do
  case "$t" in # the largest input worth trying: traces of a few steps, short command lines
    fuzz_command_line) max_len=4096 ;;
    fuzz_agent_ring) max_len=8192 ;; # a 4 KiB ring and its positions
    *) max_len=65536 ;;
  esac
  work="$BUILD/fuzz/corpus/$t" crashes="$BUILD/fuzz/crashes/$t"
  mkdir -p "$work" "$crashes"
  before=$(find "$crashes" -type f | wc -l)
  echo "fuzz: $t for $SAID (max_len $max_len)"
  log="$BUILD/fuzz/$t.log"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a runaway allocation.
  if "$BUILD/fuzz/$t" "${BUDGET[@]}" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$log" | tail -2 | sed 's/^/  /'
  else
    tail -40 "$log"
    found=$(find "$crashes" -type f -newer "$log" -o -type f -cnewer "$log" | head -1)
    (($(find "$crashes" -type f | wc -l) > before)) && found=${found:-$(ls -t "$crashes"/* | head -1)}
    echo "fuzz: $t FAILED; log $log${found:+; reproduce with: $BUILD/fuzz/$t $found}" >&2
    failed+=("$t")
  fi
  rm -rf /dev/shm/fuzz-gtrace-* "${TMPDIR:-/tmp}"/fuzz-gtrace-* # the scratch of a target that aborted (no exit handler ran)
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, $SAID each: no crash, leak or hang"
