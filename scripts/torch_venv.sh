#!/bin/sh
# scripts/torch_venv.sh - a virtual environment with a torch 2.x from pip, for
# collie.torch's suite on the torch people run (issue 36; Debian's own torch
# is 1.13). Prints the environment's python on stdout; everything else goes
# to stderr.
#
#   sh scripts/torch_venv.sh DIR [TORCH_VERSION]     (default 2.13.0)
#   e.g. py=$(sh scripts/torch_venv.sh build-torch2/venv)
#        cmake -S . -B build-torch2 -DCOLLIE_TORCH_EXT=ON -DCOLLIE_PYTHON="$py"
#        PYTHON=$py sh tests/torch/run.sh build-torch2
#
# Made once and reused while it holds that torch (a CPU build: pip takes it
# from the index and wheel directories this machine's pip configuration
# names, e.g. a local file; nothing is written here about where that is),
# with numpy and pytest beside it. The interpreter: $TORCH_VENV_PYTHON, else
# python3.11 (the CPU wheel's), else python3. Exit status 2 when the
# environment cannot be made, saying why.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: sh scripts/torch_venv.sh DIR [TORCH_VERSION]" >&2
  exit 2
fi
dir=$1 version=${2:-2.13.0}
fail() { echo "torch_venv.sh: $*" >&2; exit 2; }

mkdir -p "$dir" || fail "cannot make $dir"
dir=$(cd "$dir" && pwd) # (the python printed works from any directory)
py="$dir/bin/python"
if [ -x "$py" ] && "$py" -c "import sys, torch, numpy, pytest
sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
  echo "$py"
  exit 0
fi
base=${TORCH_VENV_PYTHON:-}
if [ -z "$base" ]; then
  for c in python3.11 python3; do
    if command -v $c >/dev/null 2>&1; then base=$c; break; fi
  done
fi
[ -n "$base" ] || fail "no python3 to make the environment with"
"$base" -m venv --help >/dev/null 2>&1 || fail "$base has no venv module (Debian: apt-get install python3-venv)"
echo "torch_venv.sh: making $dir with $($base --version 2>&1) and torch $version (once)" >&2
rm -rf "$dir"
"$base" -m venv "$dir" || fail "$base -m venv $dir failed"
# (--quiet: pip's index warnings would bury the CI log; a failure still prints)
"$py" -m pip install --quiet --disable-pip-version-check "torch==$version" numpy pytest >&2 ||
  fail "pip could not install torch==$version (it needs a CPU wheel for $($base --version 2>&1) on this machine's pip index)"
"$py" -c "import torch; print('torch_venv.sh: torch', torch.__version__, 'in $dir')" >&2 ||
  fail "torch does not import in $dir"
echo "$py"
