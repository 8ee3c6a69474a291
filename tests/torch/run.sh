#!/bin/sh
# tests/torch/run.sh - the torch.distributed backend's test suite: pytest under
# collierun, in four sessions, against an existing build (it builds nothing).
#
#   sh tests/torch/run.sh BUILD_DIR [pytest args...]
#   e.g. sh tests/torch/run.sh build
#        COLLIE_TORCH_TEST_BACKEND=gloo sh tests/torch/run.sh build   (PyTorch's own backend)
#        sh tests/torch/run.sh build -k p2p                           (a subset)
#
# Sessions (each rank runs the same pytest session; output lines are tagged
# with the rank):
#   env2   init_process_group() with env:// (RANK, WORLD_SIZE, MASTER_*) at 2 ranks
#   env4   the same at 4 ranks
#   tcp2   init_method=tcp://127.0.0.1:PORT at 2 ranks
#   file2  init_method=file:///... (a fresh file) at 2 ranks
# COLLIE_TORCH_TEST_SESSIONS="env2 tcp2" runs only those. The tests that start
# separate jobs run in env2 only, and not at all with COLLIE_TORCH_TEST_ONCE=0.
#
# collierun sets COLLIE_RANK etc.; torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT are taken from collierun when
# it sets them, else filled in here (MASTER_PORT: a free port picked per
# session). COLLIE_TIMEOUT_MS=20000 and a 30 s default-group timeout make a
# hung collective fail its test; collierun --timeout stops a session that
# hangs anyway (exit 124): COLLIE_TORCH_SESSION_TIMEOUT seconds, default 360
# (env2 runs the whole suite in 110 s on a quiet 2-core machine, and ran past
# 120 under load once). Exits non-zero if any session failed.
# Python: $PYTHON, default Debian's /usr/bin/python3 (torch, numpy, pytest).
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: sh tests/torch/run.sh BUILD_DIR [pytest args...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
backend=${COLLIE_TORCH_TEST_BACKEND:-collie}
sessions=${COLLIE_TORCH_TEST_SESSIONS:-env2 env4 tcp2 file2}
for f in "$build/libcollie.so" "$build/collierun"; do
  if [ ! -e "$f" ]; then
    echo "run.sh: $f is missing: build first (cmake --build $build)" >&2
    exit 2
  fi
done
if ! "$py" -c 'import pytest, torch.distributed' 2>/dev/null; then
  echo "run.sh: $py lacks pytest or torch (apt-get install python3-pytest python3-torch)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collie-torch-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Launcher variables from the caller's shell must not leak into the ranks:
# only collierun's (when it sets them) or this script's apply.
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT COLLIE_JOB_TOKEN
export COLLIE_LIBRARY="$build/libcollie.so"
export COLLIE_TEST_BUILD_DIR="$build"
export COLLIE_TORCH_TEST_BACKEND="$backend"
export COLLIE_TORCH_TEST_PG_TIMEOUT=${COLLIE_TORCH_TEST_PG_TIMEOUT:-30}
export COLLIE_TIMEOUT_MS=${COLLIE_TIMEOUT_MS:-20000}
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=1 # torch's thread pool would oversubscribe the cores the ranks share
export TMPDIR="$tmp/tmp" # the tests' scratch directories go away with $tmp
mkdir -p "$TMPDIR"

# The program each rank runs: torchrun's variables from collierun's where
# collierun did not set them, then pytest with a per-rank --basetemp.
rank_sh='
: "${RANK:=$COLLIE_RANK}" "${WORLD_SIZE:=$COLLIE_WORLD_SIZE}"
: "${LOCAL_RANK:=${COLLIE_LOCAL_RANK:-$COLLIE_RANK}}" "${LOCAL_WORLD_SIZE:=${COLLIE_LOCAL_SIZE:-$COLLIE_WORLD_SIZE}}"
: "${MASTER_ADDR:=127.0.0.1}" "${MASTER_PORT:=$COLLIE_TORCH_TEST_MASTER_PORT}"
export RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
py=$1 dir=$2 suite=$3; shift 3
[ "$suite" = "-" ] || set -- "$suite" "$@"
exec "$py" -m pytest -p no:cacheprovider -q -rfEs --tb=short --basetemp="$dir/rank$RANK" "$@"'

# The suite's directory, unless the arguments name test files or directories
# (pytest would collect them twice).
suite="$here"
for a in "$@"; do
  case $a in -*) ;; *) [ -e "$a" ] && suite="-" ;; esac
done

summary=""
failed=0
t_all=$(date +%s)
for s in $sessions; do
  case $s in
    env2) n=2 init=env ;;
    env4) n=4 init=env ;;
    tcp2) n=2 init="tcp://127.0.0.1:$(free_port)" ;;
    file2) n=2 init="file://$tmp/$s/filestore" ;;
    *) echo "run.sh: unknown session $s (env2, env4, tcp2, file2)" >&2; exit 2 ;;
  esac
  dir="$tmp/$s"
  mkdir -p "$dir/logs" "$dir/timing"
  echo "=== tests/torch [$backend] $s: $n ranks, init $init ==="
  start=$(date +%s)
  COLLIE_TORCH_TEST_SESSION=$s COLLIE_TORCH_TEST_INIT="$init" COLLIE_TORCH_TEST_MASTER_PORT=$(free_port) \
    COLLIE_LOG_DIR="$dir/logs" COLLIE_TIMING_LOG="$dir/timing" \
    "$build/collierun" -n "$n" --tag-output --timeout "${COLLIE_TORCH_SESSION_TIMEOUT:-360}" \
    sh -c "$rank_sh" sh "$py" "$dir" "$suite" "$@"
  rc=$?
  secs=$(($(date +%s) - start))
  echo "=== $s: exit $rc in $secs s ==="
  if [ $rc -eq 0 ]; then
    summary="$summary
  $s: passed ($secs s)"
  else
    failed=1
    why="failed"
    [ $rc -eq 124 ] && why="timed out"
    summary="$summary
  $s: $why, exit $rc ($secs s)"
  fi
done
echo "tests/torch [$backend] summary ($(($(date +%s) - t_all)) s):$summary"
if [ $failed -ne 0 ]; then
  echo "tests/torch: FAILED" >&2
  exit 1
fi
echo "tests/torch: passed"
