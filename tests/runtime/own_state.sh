#!/bin/sh
# Runs one test in a mount namespace of its own whose /run/gtrace (the list of running captures a
# root gtrace keeps) is an empty tmpfs: no test reads an entry that another capture left on this
# machine — a kill -9 elsewhere, any time — nor leaves one behind, even killed itself (the
# namespace, its tmpfs and any FUSE mount a test made in it go with its last process). The gtrace
# under test is the real binary on the real path; only what it finds there is the test's own.
set -eu
mkdir -p -m 0700 /run/gtrace
exec unshare --mount --propagation private -- \
  sh -c 'mount -t tmpfs -o mode=0700,size=16m gtrace-test-state /run/gtrace && exec "$@"' own_state "$@"
