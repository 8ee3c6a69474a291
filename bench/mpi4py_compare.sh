#!/bin/sh
# bench/mpi4py_compare.sh [BUILD] [MAX_BYTES] [SECONDS] - the same mpi4py
# program (bench/mpi4py_compare.py) on collie (`from collie import MPI`,
# under collierun) and on Open MPI (Debian's python3-mpi4py, under its
# mpirun), at 2 and 4 ranks, one after the other in one run; then the
# table of collie's time over Open MPI's per test and size (issue 37,
# point 4). Needs /usr/bin/python3 with numpy and mpi4py (apt-get install
# python3-mpi4py python3-numpy). Benchmarks, not tests: run it on a quiet
# machine.
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
done
cat "$out"
"$py" - "$out" <<'PY'
import collections, sys
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.strip().split(",")
    if len(p) == 5:
        t[(p[1], int(p[2]), int(p[3]))][p[0]] = float(p[4])
print("\n%-15s %6s %9s %12s %12s %9s" % ("test", "ranks", "bytes", "collie us", "openmpi us", "ratio"))
for k in sorted(t):
    c, o = t[k].get("collie"), t[k].get("openmpi")
    if c and o:
        print("%-15s %6d %9d %12.2f %12.2f %9.2f" % (k[0], k[1], k[2], c, o, c / o))
PY
