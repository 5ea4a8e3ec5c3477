#!/usr/bin/env bash
# Refreshes the pinned vmlinux.h of this machine's architecture (bpf/vmlinux/<arch>/vmlinux.h)
# from a kernel's BTF (default: the running kernel's). The BPF objects need the kernel types they
# use to be in it; CO-RE relocates their fields on whatever kernel loads them.
set -euo pipefail
cd "$(dirname "$0")/.."
btf=${1:-/sys/kernel/btf/vmlinux}
out=bpf/vmlinux/$(uname -m)/vmlinux.h
mkdir -p "$(dirname "$out")"
bpftool btf dump file "$btf" format c > "$out.tmp"
mv "$out.tmp" "$out"
echo "update-vmlinux: $out from $btf ($(wc -c < "$out") bytes)"
