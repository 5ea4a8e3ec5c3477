#!/usr/bin/env bash
# Boots Debian kernels under qemu and runs gtrace's BPF runtime cases in each (vmtests/README.md).
#   vmtests/run.sh            the CI kernel (6.1)
#   vmtests/run.sh --all      every kernel in vmtests/kernels.toml
#   vmtests/run.sh --help     options (--kernel, --gtrace, --package, --cases, --accel, ...)
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$(readlink -f "$0")")/vm.py" "$@"
