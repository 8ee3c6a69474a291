#!/bin/sh
# tests/mpi_programs/run.sh - a collective-communication course's mpi4py
# programs (and a data-parallel trainer with a timing log) on collie.MPI,
# each checked against the same program under Open MPI.
#
#   sh tests/mpi_programs/run.sh BUILD_DIR [PROG...]   (default: every program)
#
# Each PROG.py here is a plain mpi4py program (`from mpi4py import MPI`)
# that checks its own results (exit non-zero on a failed check) and prints
# them, one line per result with the rank first. For each program and each
# N of 2, 3 and 4 ranks this runs
#   - the program as written, under Open MPI: mpirun -n N (mpi4py 3.1.4 on
#     Debian's /usr/bin/python3);
#   - its collie version, the same file with only its import line changed to
#     `from collie import MPI` (made in a temporary directory), under
#     BUILD_DIR/collierun -n N, on shared memory (shm) and on TCP
#     (COLLIE_TRANSPORT=tcp);
# and prints one line per (program, N, transport): ok when both runs exited
# 0 and their sorted outputs are the same, else FAIL with both outputs and
# their diff. trainer.py also gets a fresh directory for its timing logs,
# which check_timing.py checks after each run (Open MPI's too). Every launch
# has a timeout (60 s); two run at a time. Nothing is written into the tree.
# Exits non-zero if anything failed, or if mpirun or mpi4py is missing.
# Python: $PYTHON, default Debian's /usr/bin/python3 (with numpy and mpi4py).
set -u
here=$(cd "$(dirname "$0")" && pwd)

# One launch, run by xargs below: KIND (mpi, shm or tcp) PROG N, into
# $MP_TMP/res/PROG.N.KIND.{out,err,rc} (out sorted).
if [ "${1:-}" = --job ]; then
  kind=$2 prog=$3 n=$4
  res="$MP_TMP/res/$prog.$n.$kind"
  set --
  if [ "$prog" = trainer ]; then
    set -- "$MP_TMP/logs/$prog.$n.$kind"
  fi
  cd "$MP_TMP/cwd" || exit 1
  start=$(date +%s%N)
  if [ "$kind" = mpi ]; then
    OMPI_MCA_plm_rsh_agent="" OMPI_MCA_btl_vader_single_copy_mechanism=none timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -n "$n" \
      "$MP_PY" "$here/$prog.py" "$@" </dev/null >"$res.raw" 2>"$res.err"
  else
    COLLIE_TRANSPORT=$kind "$MP_BUILD/collierun" -n "$n" --timeout 60 \
      "$MP_PY" "$MP_TMP/collie/$prog.py" "$@" </dev/null >"$res.raw" 2>"$res.err"
  fi
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "$((ms / 1000)).$((ms % 1000 / 100)) s" >"$res.time"
  sort "$res.raw" >"$res.out"
  echo $rc >"$res.rc"
  if [ $rc -eq 0 ] && [ "$prog" = trainer ]; then
    "$MP_PY" "$here/check_timing.py" "$1" "$n" "$res.out" 2>>"$res.err" || echo "$1" >"$res.badlog"
  fi
  exit 0
fi

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: sh tests/mpi_programs/run.sh BUILD_DIR [PROG...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
programs=${*:-hello tags rings p2p_collectives pickled trainer}
repo=$(cd "$here/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
for f in "$build/libcollie.so" "$build/collierun"; do
  if [ ! -e "$f" ]; then
    echo "mpi_programs: $f is missing: build first (cmake --build $build)" >&2
    exit 2
  fi
done
if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpi_programs: mpirun is missing: the programs are checked against Open MPI (apt-get install openmpi-bin)" >&2
  exit 1
fi
if ! "$py" -c 'import mpi4py, numpy' 2>/dev/null; then
  echo "mpi_programs: $py lacks mpi4py or numpy (apt-get install python3-mpi4py python3-numpy)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collie-mpi-programs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/collie" "$tmp/res" "$tmp/logs" "$tmp/cwd"

# The environment of every launch: no COLLIE_* of the caller's (a
# COLLIE_TRANSPORT there would change the shm runs), the library and the
# package of this tree (the trainer's collie.timing under Open MPI too), no
# bytecode written into the tree, collie's logs and dumps in $tmp.
for v in $(env | sed -n 's/^\(COLLIE_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export COLLIE_LIBRARY="$build/libcollie.so" COLLIE_LOG_DIR="$tmp/logs" COLLIE_TIMEOUT_MS=20000
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
export MP_TMP="$tmp" MP_BUILD="$build" MP_PY="$py"

# The collie version of each program: its import line changed, nothing else.
for p in $programs; do
  if [ ! -f "$here/$p.py" ]; then
    echo "mpi_programs: no program $p ($here/$p.py)" >&2
    exit 2
  fi
  if [ "$(grep -c '^from mpi4py import MPI$' "$here/$p.py")" != 1 ]; then
    echo "mpi_programs: $p.py has no single 'from mpi4py import MPI' line" >&2
    exit 1
  fi
  sed 's/^from mpi4py import MPI$/from collie import MPI/' "$here/$p.py" >"$tmp/collie/$p.py"
  if grep -Eq '^[[:space:]]*(import|from)[[:space:]]+mpi4py' "$tmp/collie/$p.py"; then
    echo "mpi_programs: $p.py uses mpi4py beyond its import line" >&2
    exit 1
  fi
done

start=$(date +%s)
for p in $programs; do
  for n in 2 3 4; do
    for kind in mpi shm tcp; do echo "$kind $p $n"; done
  done
done | xargs -P 2 -L 1 sh "$here/run.sh" --job

failed=0
show() { # res: a run's exit status, time, output and error output
  echo "--- $1: exit $(cat "$1.rc" 2>/dev/null || echo '?') after $(cat "$1.time" 2>/dev/null || echo '?'), stdout (sorted):"
  cat "$1.out" 2>/dev/null
  if [ -s "$1.err" ]; then
    echo "--- $1: stderr (last 30 lines):"
    tail -n 30 "$1.err"
  fi
}
for p in $programs; do
  for n in 2 3 4; do
    ref="$tmp/res/$p.$n.mpi"
    for kind in shm tcp; do
      res="$tmp/res/$p.$n.$kind"
      why=""
      if [ "$(cat "$ref.rc" 2>/dev/null)" != 0 ]; then
        why="the program failed under Open MPI"
      elif [ ! -s "$ref.out" ]; then
        why="the program printed nothing under Open MPI"
      elif [ -e "$ref.badlog" ]; then
        why="its timing logs under Open MPI are wrong (check_timing.py)"
      elif [ "$(cat "$res.rc" 2>/dev/null)" != 0 ]; then
        why="the program failed on collie.MPI"
      elif ! cmp -s "$ref.out" "$res.out"; then
        why="its output differs from Open MPI's"
      elif [ -e "$res.badlog" ]; then
        why="its timing logs on collie.MPI are wrong (check_timing.py)"
      fi
      if [ -z "$why" ]; then
        echo "mpi_programs: $p n=$n $kind ok ($(cat "$res.time"))"
      else
        failed=$((failed + 1))
        echo "mpi_programs: $p n=$n $kind FAIL: $why"
        show "$ref" | sed 's|'"$tmp"'/res/||'
        show "$res" | sed 's|'"$tmp"'/res/||'
        if [ -s "$ref.out" ] && [ -s "$res.out" ] && ! cmp -s "$ref.out" "$res.out"; then
          echo "--- diff (Open MPI's, collie's):"
          diff "$ref.out" "$res.out"
        fi
      fi
    done
  done
done
echo "mpi_programs: $(echo $programs | wc -w) programs at 2, 3 and 4 ranks, shm and tcp, against Open MPI: $failed failed ($(($(date +%s) - start)) s)"
[ $failed -eq 0 ]
