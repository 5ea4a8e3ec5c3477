#!/usr/bin/env bash
# Builds the gtrace package: dist/gtrace-<version>-linux-<arch>.tar.gz, holding gtrace-<version>/
# with bin/gtrace, lib/gtrace/libgtrace_agent.so, share/gtrace/scripts/ (gpu-check.sh,
# gpu-bench.sh and their Python files) and share/doc/gtrace/ (README.md, docs/) — the layout of
# `cmake --install` — and from the same files the wheel
# dist/gtrace-<version>-py3-none-manylinux_2_34_<arch>.whl (`pip install` it; its `gtrace`
# command runs the binary: scripts/make_wheel.py). Both binaries need only glibc 2.34+ and libgcc_s (every other library is
# linked in), so the package runs from any directory on a GPU host that has none of the build
# dependencies. A release build of its own (build-release/: no test hooks, GTRACE_TEST_HOOKS=OFF),
# reused, and configured and built when needed.
#
#   scripts/package.sh [--build DIR] [--out DIR]      (defaults: build-release/, dist/)
# Prints the tarball's path, then the wheel's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-release
OUT=$ROOT/dist
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$(realpath -m "${2:?}"); shift 2 ;;
    --out) OUT=$(realpath -m "${2:?}"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $1; see scripts/package.sh --help" >&2; exit 2 ;;
  esac
done

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  bash "$ROOT/scripts/setup.sh" --build
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGTRACE_TEST_HOOKS=OFF >/dev/null
fi
! grep -q '^GTRACE_TEST_HOOKS:BOOL=ON' "$BUILD/CMakeCache.txt" ||
  { echo "package: $BUILD is a test build (GTRACE_TEST_HOOKS=ON); the package is built without the test hooks" >&2; exit 1; }
grep -q '^GTRACE_STATIC:BOOL=ON' "$BUILD/CMakeCache.txt" ||
  { echo "package: $BUILD is configured with GTRACE_STATIC=OFF; the package needs the static build" >&2; exit 1; }
cmake --build "$BUILD" --target gtrace gtrace_agent -j"$(nproc)" >/dev/null

VERSION=$("$BUILD/gtrace" --version | sed -n '1s/^gtrace \([^ ]*\) .*/\1/p')
[[ -n $VERSION ]] || { echo "package: $BUILD/gtrace --version printed no version" >&2; exit 1; }
NAME=gtrace-$VERSION
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cmake --install "$BUILD" --prefix "$STAGE/$NAME" --strip >/dev/null
mkdir -p "$OUT"
TARBALL=$OUT/$NAME-linux-$(uname -m).tar.gz
tar -C "$STAGE" --owner=0 --group=0 -czf "$TARBALL.new" "$NAME"
mv "$TARBALL.new" "$TARBALL"
echo "$TARBALL"
# The glibc floor the binaries are held to (userspace/foundation/glibc_compat.c; package_check.py
# checks it): RHEL 9's 2.34.
python3 "$ROOT/scripts/make_wheel.py" "$STAGE/$NAME" "$VERSION" "$OUT" 2.34
