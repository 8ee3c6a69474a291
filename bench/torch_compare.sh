#!/bin/sh
# torch_compare.sh - bench/torch_compare.py (gloo and collie side by side
# through torch.distributed) under collierun, at 2 and then 4 ranks.
#
#   sh bench/torch_compare.sh [BUILD_DIR] [torch_compare.py options]
#   sh bench/torch_compare.sh build                          # the sweep, 8 B .. 64 MiB
#   sh bench/torch_compare.sh build --backends gloo --max 64K
#   sh bench/torch_compare.sh build --latency
#   sh bench/torch_compare.sh build --ddp --csv ddp_np{n}.csv
#   TORCH_COMPARE_PYTHON=build-torch2/venv/bin/python sh bench/torch_compare.sh build-torch2 --fsdp
#                                   (torch 2.13 from pip: scripts/torch_venv.sh)
#
# BUILD_DIR (default build) holds collierun and libcollie.so (COLLIE_LIBRARY
# unless set). Every other argument goes to
# torch_compare.py (its --help lists them). A --csv FILE would be written
# twice, so {n} in FILE becomes the rank count; without {n} the wrapper
# makes FILE.csv into FILE_np{n}.csv.
#
# Environment: TORCH_COMPARE_NRANKS (rank counts, default "2 4"),
# TORCH_COMPARE_PYTHON (default /usr/bin/python3: Debian's, with torch),
# TORCH_COMPARE_TIMEOUT (seconds per launch, collierun --timeout; default
# 1800), OMP_NUM_THREADS (default 1: one torch thread per rank).
#
# Exit status: 0; otherwise the last failed launch's (2: bad usage or a
# backend that cannot be set up, 3: a wrong result, 124: timed out).

set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ME=torch_compare.sh

# shellcheck source=bench/sh_lib.sh
. "$ROOT/bench/sh_lib.sh"

case ${1:-} in
-h | --help)
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
esac

BUILD=$ROOT/build
if [ $# -gt 0 ]; then
  case $1 in
  -*) ;;
  *) BUILD=$1; shift ;;
  esac
fi
NRANKS=${TORCH_COMPARE_NRANKS:-2 4}
PY=${TORCH_COMPARE_PYTHON:-/usr/bin/python3}
TMO=${TORCH_COMPARE_TIMEOUT:-1800}
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMP_NUM_THREADS

[ -x "$BUILD/collierun" ] || bad_usage "$BUILD/collierun not found: give the build directory first (e.g. build)"
# The build's own library (and the C++ fast path built beside it, for the
# torch it was configured with), unless the caller names one.
[ -n "${COLLIE_LIBRARY:-}" ] || export COLLIE_LIBRARY="$BUILD/libcollie.so"
"$PY" -c 'import torch' >/dev/null 2>&1 || die "$PY cannot import torch (set TORCH_COMPARE_PYTHON)"
for n in $NRANKS; do
  if ! is_uint "$n" || [ "$n" -lt 1 ]; then
    bad_usage "TORCH_COMPARE_NRANKS: '$n' is not a rank count"
  fi
done

# A --csv FILE without {n} gets _np{n} before its .csv (or at its end).
csvname() {
  case $1 in
  *'{n}'*) printf '%s' "$1" ;;
  *.csv) printf '%s_np{n}.csv' "${1%.csv}" ;;
  *) printf '%s_np{n}' "$1" ;;
  esac
}
nargs=$#
next_is_csv=0
for a do
  if [ "$next_is_csv" = 1 ]; then
    a=$(csvname "$a")
    next_is_csv=0
  else
    case $a in
    --csv) next_is_csv=1 ;;
    --csv=*) a=--csv=$(csvname "${a#--csv=}") ;;
    esac
  fi
  set -- "$@" "$a"
done
shift "$nargs"

rc=0
for n in $NRANKS; do
  echo "== $n ranks: $BUILD/collierun -n $n $PY bench/torch_compare.py $*  (OMP_NUM_THREADS=$OMP_NUM_THREADS)"
  "$BUILD/collierun" --timeout "$TMO" -n "$n" "$PY" "$ROOT/bench/torch_compare.py" "$@"
  st=$?
  if [ "$st" != 0 ]; then
    echo "$ME: the $n-rank launch exited with status $st" >&2
    rc=$st
  fi
  echo
done
exit "$rc"
