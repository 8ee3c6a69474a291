#!/bin/sh
# Type-checks the Python binding: mypy --strict over python/collie (its inline
# annotations; python/collie/py.typed marks the package typed), with
# python/pyproject.toml's [tool.mypy] settings. Fails on any error.
# Usage: scripts/check_types.sh [path ...]   (more files or directories to
#        check the same way, e.g. example scripts that use collie)
# PYTHON: the interpreter whose mypy, torch and numpy the check uses (default
# /usr/bin/python3: Debian's python3-mypy and python3-torch; collie.torch is
# checked against that torch's annotations). The cache goes under $TMPDIR,
# never into the working tree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-/usr/bin/python3}
if ! "$python" -m mypy --version >/dev/null 2>&1; then
  echo "check_types: $python has no mypy (Debian: apt-get install python3-mypy)" >&2
  exit 1
fi
cache="${TMPDIR:-/tmp}/collie-mypy-cache-$(id -u)"
echo "check_types: $("$python" -m mypy --version) --strict on python/collie${*:+ and $*}"
# MYPYPATH: the extra paths import collie from this tree.
if MYPYPATH="$root/python" "$python" -m mypy --strict --config-file "$root/python/pyproject.toml" \
  --cache-dir "$cache" "$root/python/collie" "$@"; then
  echo "check_types: no errors"
else
  rc=$?
  echo "check_types: mypy --strict found errors (above)" >&2
  exit "$rc"
fi
