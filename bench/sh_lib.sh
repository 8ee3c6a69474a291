# sh_lib.sh - what bench/compare.sh and bench/footprint.sh share: their
# messages, exits and option checks. Sourced (POSIX sh); expects ME, the
# sourcing script's file name.
# shellcheck shell=sh

# die MSG...: the run cannot go on (exit 1).
die() {
  echo "$ME: $*" >&2
  exit 1
}
# bad_usage MSG...: the command line is wrong (exit 2).
bad_usage() {
  echo "$ME: $*" >&2
  echo "$ME: see sh bench/$ME --help" >&2
  exit 2
}
# need_arg OPTION ARGC: OPTION must be followed by a value.
need_arg() { [ "$2" -ge 2 ] || bad_usage "option $1 needs a value"; }
# is_uint S: S is a whole number (digits only).
is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }
# build OUT SRC CMD...: compiles SRC into OUT with CMD (e.g. mpicc.mpich
# -O2) when OUT is missing or older than SRC; the compiler's output goes to
# WORK/cc.log, shown when it fails.
build() {
  out=$1 src=$2
  shift 2
  if [ ! -x "$out" ] || [ -n "$(find "$src" -newer "$out")" ]; then
    "$@" -o "$out" "$src" >"$WORK/cc.log" 2>&1 || {
      cat "$WORK/cc.log" >&2
      die "building $out failed: $*"
    }
  fi
}
