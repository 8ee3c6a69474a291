#!/bin/sh
# bench/mpi4py_compare.sh [BUILD] [MAX_BYTES] [SECONDS] - the same mpi4py
# program (bench/mpi4py_compare.py) on collie (`from collie import MPI`,
# under collierun), on Open MPI (Debian's python3-mpi4py, under its mpirun)
# and, where MPICH_PYTHON names a Python whose mpi4py runs on MPICH
# (bench/mpich_venv.sh makes one), on MPICH (under mpiexec.mpich), at 2 and
# 4 ranks, one after the other in one run; then the table of each time per
# test and size, and collie's over the faster MPI's (issue 37, point 4).
# Needs /usr/bin/python3 with numpy and mpi4py (apt-get install
# python3-mpi4py python3-numpy). Benchmarks, not tests: run it on a quiet
# machine.
#
#   MPICH_PYTHON=$(sh bench/mpich_venv.sh build-mpich/venv) sh bench/mpi4py_compare.sh build
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
max=${2:-4194304}
secs=${3:-0.25}
py=/usr/bin/python3
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
for n in 2 4; do
  COLLIE_LIBRARY="$build/libcollie.so" PYTHONPATH=python \
    "$build/collierun" -n "$n" "$py" bench/mpi4py_compare.py collie "$max" "$secs" >>"$out"
  mpirun --allow-run-as-root --oversubscribe -n "$n" \
    "$py" bench/mpi4py_compare.py openmpi "$max" "$secs" >>"$out"
  if [ -n "${MPICH_PYTHON:-}" ]; then
    mpiexec.mpich -n "$n" "$MPICH_PYTHON" bench/mpi4py_compare.py mpich "$max" "$secs" >>"$out"
  fi
done
cat "$out"
"$py" - "$out" <<'PY'
import collections, sys
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5:
        t[(p[1], int(p[2]), int(p[3]))][p[0]] = float(p[4])
print("\n%-15s %6s %9s %11s %11s %11s %12s" % ("test", "ranks", "bytes", "collie us", "openmpi us", "mpich us",
                                             "collie/best"))
for k in sorted(t):
    c = t[k].get("collie")
    others = [t[k][m] for m in ("openmpi", "mpich") if m in t[k]]
    if c and others:
        cell = lambda m: "%11.2f" % t[k][m] if m in t[k] else "%11s" % "-"
        print("%-15s %6d %9d %s %s %s %12.2f" % (k[0], k[1], k[2], cell("collie"), cell("openmpi"), cell("mpich"),
                                                c / min(others)))
PY
