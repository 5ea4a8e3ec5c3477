# Sourced by gpu-check.sh and gpu-bench.sh: sets GTRACE to the gtrace that goes with the script
# in $1's directory — PREFIX/bin/gtrace when it runs from an unpacked package or an install
# (PREFIX/share/gtrace/scripts), build/gtrace in a checkout (built first if missing). A GTRACE
# set by the caller wins.
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
