# Sourced by the scripts that run gtrace with BPF: `need_root NAME WHY "$0" "$@"` exits with one
# line saying how to run the script as root (with sudo where there is one) unless it runs as root.
need_root() {
  local name=$1 why=$2 script=$3
  shift 3
  [[ $(id -u) -eq 0 ]] && return 0
  local again
  again=$(printf ' %q' "$script" "$@")
  if command -v sudo >/dev/null 2>&1; then
    echo "$name: needs root ($why); run: sudo${again}" >&2
  else
    echo "$name: needs root ($why); run it as root (there is no sudo here): su -c '${again# }'" >&2
  fi
  exit 1
}
