# Sourced by gpu-check.sh and gpu-bench.sh.

# locate_gtrace DIR NAME: sets GTRACE to the gtrace that goes with the script in DIR —
# PREFIX/bin/gtrace when it runs from an unpacked package or an install (PREFIX/share/gtrace/scripts),
# build/gtrace in a checkout (built first if missing). A GTRACE set by the caller wins.
locate_gtrace() {
  local here=$1 name=$2
  [[ -n ${GTRACE:-} ]] && return 0
  if [[ -x $here/../../../bin/gtrace ]]; then
    GTRACE=$(cd "$here/../../../bin" && pwd)/gtrace
  elif [[ -f $here/../CMakeLists.txt ]]; then
    [[ -x $here/../build/gtrace ]] || bash "$here/build.sh"
    GTRACE=$(cd "$here/../build" && pwd)/gtrace
  else
    echo "$name: FAIL: no gtrace beside this script ($here/../../../bin/gtrace); set GTRACE=/path/to/gtrace" >&2
    exit 1
  fi
}

# require_torch PYTHON DEVICE NAME: exits unless PYTHON has torch, with CUDA and a GPU for cuda.
require_torch() {
  local py=$1 device=$2 name=$3
  case "$device" in
    cuda)
      "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
        echo "$name: FAIL: $py has no CUDA-enabled torch, or it sees no GPU (--device cpu for a smoke run)" >&2
        exit 1
      } ;;
    cpu) "$py" -c "import torch" || { echo "$name: FAIL: $py cannot import torch" >&2; exit 1; } ;;
    *) echo "$name: --device must be cuda or cpu" >&2; exit 2 ;;
  esac
}

# preflight_gtrace NAME: a one-second attach to a sleeping process, so that a machine where gtrace
# cannot attach at all (no BPF or uprobes, say) fails in seconds, before any job is started.
preflight_gtrace() {
  local name=$1 tmp out
  tmp=$(mktemp -d)
  sleep 30 &
  local sleeper=$!
  if ! out=$("$GTRACE" attach --pid $sleeper --duration 1 --no-gpu --sample-hz 0 -q --force -o "$tmp/preflight.pftrace" 2>&1); then
    kill $sleeper 2>/dev/null || true
    rm -rf "$tmp"
    echo "$name: FAIL: gtrace cannot attach on this machine ($(uname -r)): $out" >&2
    exit 1
  fi
  kill $sleeper 2>/dev/null || true
  rm -rf "$tmp"
}
