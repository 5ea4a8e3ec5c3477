#!/usr/bin/env bash
# Installs the build and test dependencies from Debian's packages, and the project's Python
# environment .venv/ from PyPI (pip torch 2.x with the nvidia-* CUDA libraries, Holistic Trace
# Analysis, py-spy, viztracer: scripts/venv-requirements.txt, pinned and hash-checked).
# Idempotent: a machine that has everything spends seconds; needs root only when a package is
# missing.
#
#   scripts/setup.sh           everything: build, tests, benchmarks, vmtests, the venv
#   scripts/setup.sh --build   only what building gtrace and running the demo need
#   scripts/setup.sh --venv    only the venv
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake pkg-config clang llvm
  libbpf-dev bpftool
  libelf-dev libdw-dev zlib1g-dev libzstd-dev libbz2-dev liblzma-dev
  libboost-program-options-dev libcapstone-dev
  catch2 nlohmann-json3-dev libfmt-dev
  python3 python3-torch python3-venv
)
TEST_PACKAGES=(
  bpftrace linux-perf austin time util-linux
  libcap2-bin # setcap: tests/runtime/security_attacks.py plays gtrace with file capabilities
  libclang-rt-dev # ASan, UBSan and libFuzzer runtimes: scripts/build_sanitized.sh, scripts/fuzz.sh
  protobuf-compiler python3-protobuf # tests decode .pftrace with the protobuf runtime, not gtrace's reader
  chromium
  qemu-system-x86 busybox-static kmod cpio xz-utils
)
VENV=0
case "${1:-}" in
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  --venv) PACKAGES=(python3 python3-venv); VENV=1 ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"); VENV=1 ;;
  *) echo "setup: unknown argument $1; use scripts/setup.sh [--build|--venv]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages (${missing[*]}); run as root (or with sudo), or install them with apt-get" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# tracefs is needed by bpftrace and for uprobe introspection in tests.
if [[ ! -d /sys/kernel/tracing/events ]] && [[ $(id -u) -eq 0 ]]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
if [[ ! -d /sys/kernel/debug/tracing ]] && [[ $(id -u) -eq 0 ]]; then
  mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true
fi

# The project's venv: rebuilt only when the requirements (or the interpreter) changed since it
# was made. pip checks every file against its pinned hash (--require-hashes); --no-deps: the
# lock file names every package, so nothing unpinned comes in.
if ((VENV)); then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  REQUIREMENTS=$ROOT/scripts/venv-requirements.txt
  STAMP=$ROOT/.venv/.gtrace-requirements
  WANT="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1) $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
  if [[ ! -f $STAMP || $(cat "$STAMP") != "$WANT" ]]; then
    echo "setup: creating .venv (pip torch, HolisticTraceAnalysis, py-spy, viztracer; a few GB the first time)" >&2
    rm -rf "$ROOT/.venv"
    /usr/bin/python3 -m venv "$ROOT/.venv"
    "$ROOT/.venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes --no-deps -r "$REQUIREMENTS"
    echo "$WANT" >"$STAMP"
  fi
fi
