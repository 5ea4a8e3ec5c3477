#!/usr/bin/env bash
# Installs the dependencies (scripts/setup.sh) and builds gtrace, its BPF skeletons, the test
# programs and the benchmarks into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
