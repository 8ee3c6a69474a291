#!/bin/sh
# tests/python/run.sh - the Python binding's test suite: pytest under collierun
# at 1, 2 and 4 ranks, against an existing build (it builds nothing).
#
#   sh tests/python/run.sh BUILD_DIR [pytest args...]
#   e.g. sh tests/python/run.sh build
#        sh tests/python/run.sh build -k objcol      (a subset)
#
# Every rank runs the same pytest session (the tests call collectives); the
# output of each line is tagged with its rank. COLLIE_TIMEOUT_MS is short so a
# hung collective fails its test within 20 s, and collierun's --timeout stops a
# session that hangs anyway after 60 s (exit 124; a session normally takes
# 5-10 s). Exits non-zero if any session failed.
# Python: $PYTHON, default Debian's /usr/bin/python3 (with numpy, pytest, torch).
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: sh tests/python/run.sh BUILD_DIR [pytest args...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
for f in "$build/libcollie.so" "$build/collierun"; do
  if [ ! -e "$f" ]; then
    echo "run.sh: $f is missing: build first (cmake --build $build)" >&2
    exit 2
  fi
done
if ! "$py" -c 'import pytest, numpy' 2>/dev/null; then
  echo "run.sh: $py lacks pytest or numpy (apt-get install python3-pytest python3-numpy)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collie-pytest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

export COLLIE_LIBRARY="$build/libcollie.so"
export COLLIE_TEST_BUILD_DIR="$build"
export COLLIE_TIMEOUT_MS=${COLLIE_TIMEOUT_MS:-20000}
export COLLIE_LOG_DIR="$tmp/logs"
export TMPDIR="$tmp/tmp" # the tests' scratch directories go away with $tmp
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=1 # torch's thread pool would oversubscribe the cores the ranks share
mkdir -p "$COLLIE_LOG_DIR" "$TMPDIR"

failed=""
for n in 1 2 4; do
  echo "=== tests/python at $n rank(s) ==="
  start=$(date +%s)
  # Each rank gets its own --basetemp (pytest's tmp_path) so ranks never share one.
  "$build/collierun" -n "$n" --tag-output --timeout 240 \
    sh -c 't=$1 n=$2; shift 2; exec "$0" -m pytest -p no:cacheprovider -q -rfE --basetemp="$t/n$n-rank$COLLIE_RANK" "$@"' \
    "$py" "$tmp" "$n" "$here" "$@"
  rc=$?
  echo "=== $n rank(s): exit $rc in $(($(date +%s) - start)) s ==="
  [ $rc -eq 0 ] || failed="$failed $n"
done
if [ -n "$failed" ]; then
  echo "tests/python: FAILED at rank count(s):$failed" >&2
  exit 1
fi
echo "tests/python: passed at 1, 2 and 4 ranks"
