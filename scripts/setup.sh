#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent; needs root.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang llvm
  libbpf-dev bpftool bpftrace linux-perf
  libelf-dev libdw-dev zlib1g-dev libzstd-dev libbz2-dev liblzma-dev
  libboost-program-options-dev libcapstone-dev
  catch2 nlohmann-json3-dev libfmt-dev
  python3 python3-torch austin time
  protobuf-compiler python3-protobuf # tests decode .pftrace with the protobuf runtime, not gtrace's reader
  chromium
  qemu-system-x86 busybox-static kmod cpio xz-utils
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages (${missing[*]}); run as root or install them with apt-get" >&2
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
