#!/bin/sh
# scripts/check_wheel.sh - pip wheel . from the repository root, installed in
# a fresh virtual environment, works there with nothing of this tree: no
# PYTHONPATH, no COLLIE_LIBRARY, no build directory (issue 36; docs/python.md,
# "Setup").
#
#   sh scripts/check_wheel.sh PYTHON [--no-torch-too] [--build-dir DIR]
#   e.g. sh scripts/check_wheel.sh "$(sh scripts/torch_venv.sh build-torch2/venv)"
#
# PYTHON: the interpreter of an environment with torch (2.13 from pip, say),
# numpy and pytest. It builds the wheel (pip wheel --no-build-isolation, so
# the torch fast path is built for its torch; scikit-build-core from the pip
# index, into a directory of this script's, when that environment has none).
# A fresh environment made from the same Python sees that torch and numpy
# (a .pth line), gets the wheel, and from a directory outside the tree:
# collie.__version__ and the wheel's version are CMakeLists.txt's project
# version, collie-bench --version prints it, collierun, collie-bench and
# collie-report are the environment's, the library in use and the fast path
# are the package's, and collierun -n 2 runs a numpy all_reduce on a collie
# communicator and a torch.distributed all_reduce with backend "collie".
#
# --no-torch-too: then also a wheel built where torch is not installed (a
# fresh environment with scikit-build-core only): it installs and runs the
# numpy job in an environment without torch, and in the torch environment
# above collie.torch runs on its Python backend and COLLIE_TORCH_FAST=1's
# message says how to add the fast path.
#
# Everything goes in a temporary directory under $TMPDIR (default /tmp),
# removed at exit. Exit status: 0 passed, 1 a check failed, 2 unusable PYTHON.
set -eu
usage="usage: sh scripts/check_wheel.sh PYTHON [--no-torch-too] [--build-dir DIR]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
py=$1
shift
no_torch_too=0 build_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --no-torch-too) no_torch_too=1; shift ;;
    # The wheel's CMake build tree stays in DIR (scikit-build-core's
    # build-dir): a build of the library, the tools and the fast path for
    # PYTHON's torch, which CI's torch suite then runs against instead of
    # compiling it all a second time.
    --build-dir) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; build_dir=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case $build_dir in "" | /*) ;; *) build_dir=$(pwd)/$build_dir ;; esac
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/collie-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
export PIP_DISABLE_PIP_VERSION_CHECK=1
export COLLIE_LOG_DIR="$tmp" # comms.csv and any flight dump go there
start=$(date +%s)

say() { echo "check_wheel: $* ($(($(date +%s) - start)) s)"; }
fail() { echo "check_wheel: FAILED: $*" >&2; exit 1; }
# quietly LOG CMD...: runs CMD with its output in $tmp/LOG.log, shown if it fails.
quietly() {
  log="$tmp/$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "$* (the end of its output above)"
  fi
}

"$py" -c 'import torch, numpy' 2>/dev/null ||
  { echo "check_wheel: $py does not import torch and numpy" >&2; exit 2; }
torch_version=$("$py" -c 'import torch; print(torch.__version__)')
version=$(sed -n 's/^project(collie VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || fail "no project(collie VERSION ...) in CMakeLists.txt"

# build PYTHON NAME: pip wheel . into $tmp/NAME with PYTHON (no build isolation:
# its torch, or none), printing the wheel's path. scikit-build-core comes from
# PYTHON's environment, else from the pip index into $tmp/skbuild.
build() {
  if ! "$1" -c 'import scikit_build_core' 2>/dev/null; then
    [ -d "$tmp/skbuild" ] || quietly skbuild "$py" -m pip install --target "$tmp/skbuild" scikit-build-core
    set -- "$1" "$2" "$tmp/skbuild"
  else
    set -- "$1" "$2" ""
  fi
  (
    cd "$src"
    if [ -n "$3" ]; then export PYTHONPATH="$3"; else unset PYTHONPATH; fi
    # scikit-build-core's cmake --build runs one job unless told
    : "${CMAKE_BUILD_PARALLEL_LEVEL:=$(nproc 2>/dev/null || echo 2)}"
    export CMAKE_BUILD_PARALLEL_LEVEL
    if [ -n "$build_dir" ] && [ "$2" = wheel ]; then
      quietly "$2" "$1" -m pip wheel . --no-build-isolation --no-deps -w "$tmp/$2" \
        -C build-dir="$build_dir"
    else
      quietly "$2" "$1" -m pip wheel . --no-build-isolation --no-deps -w "$tmp/$2"
    fi
  )
  ls "$tmp/$2"/collie-"$version"-*.whl
}

# The jobs run from here, outside the tree, with the environment's bin/ first.
mkdir "$tmp/run"
cat >"$tmp/run/job.py" <<'EOF'
# python job.py numpy | torch FAST (FAST: 1 the fast path, 0 the Python backend)
import sys

import numpy as np

import collie

comm = collie.new_comm()
rank, size = comm.get_rank(), comm.get_size()
x = np.full(1000, rank + 1, dtype=np.float32)
comm.all_reduce(x)
assert (x == size * (size + 1) / 2).all(), x[:4]
comm.finalize()
# collie.MPI through its C fast path (COLLIE_MPI_FAST=1: required).
from collie import MPI

w = MPI.COMM_WORLD
y = np.full(8, w.Get_rank() + 1.0)
w.Allreduce(MPI.IN_PLACE, y, op=MPI.SUM)
w.Sendrecv(x[:4].copy(), (rank + 1) % size, 3, x[4:8], MPI.ANY_SOURCE, 3)
assert (y == size * (size + 1) / 2).all() and (x[4:8] == size * (size + 1) / 2).all(), (y, x[4:8])
if sys.argv[1] == "torch":
    import torch
    import torch.distributed as dist

    import collie.torch

    assert collie.torch.fast_path_loaded() == (sys.argv[2] == "1"), collie.torch.fast_path_loaded()
    dist.init_process_group("collie", init_method="env://")  # collierun's RANK, WORLD_SIZE, MASTER_*
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert bool((t == size * (size + 1) / 2).all()), t[:4]
    dist.destroy_process_group()
print("rank %d of %d: %s all_reduce ok" % (rank, size, sys.argv[1]))
EOF
# inside VENV CMD...: CMD in $tmp/run with VENV's bin/ first and nothing of the tree.
inside() {
  (
    bin=$1/bin
    shift
    cd "$tmp/run" && exec env -u PYTHONPATH -u COLLIE_LIBRARY -u COLLIE_TORCH_FAST COLLIE_MPI_FAST=1 PATH="$bin:$PATH" "$@"
  )
}

# ---- the wheel built with torch ---------------------------------------------
whl=$(build "$py" wheel)
say "built $(basename "$whl") with torch $torch_version"
unzip_list=$("$py" -m zipfile -l "$whl")
for f in collie/__init__.py collie/torch/__init__.py collie/py.typed collie/lib/libcollie.so.0 \
  collie/lib/libcollie-nccl.so \
  collie/lib/_collie_torch_fast.torch "collie-$version.data/scripts/collierun" \
  "collie-$version.data/scripts/collie-bench" "collie-$version.data/scripts/collie-report"; do
  echo "$unzip_list" | grep -q "^$f " || fail "$(basename "$whl") holds no $f"
done
echo "$unzip_list" | grep -q "^collie/lib/_collie_torch_fast\.cpython" ||
  fail "$(basename "$whl") holds no fast path module (built for torch $torch_version)"
echo "$unzip_list" | grep -q "^collie/lib/_collie_mpi_fast\.cpython" ||
  fail "$(basename "$whl") holds no collie.MPI fast path module"

# The fresh environment takes PYTHON's torch and numpy through a .pth line
# instead of installing them a second time (40 s of CI): they are not of this
# tree, and a .pth directory comes after the environment's own site-packages,
# so the collie imported is the wheel's (asserted below).
venv=$tmp/venv
quietly venv "$py" -m venv --without-pip "$venv" # (PYTHON's pip installs into it: 10 s less)
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for pkg in torch numpy; do
  "$py" -c "import os, $pkg; print(os.path.dirname(os.path.dirname($pkg.__file__)))"
done | sort -u >"$site/check-wheel-deps.pth"
grep -q . "$site/check-wheel-deps.pth" || fail "no site directory of torch and numpy in $py"
"$venv/bin/python" -c 'import torch, numpy' >/dev/null 2>&1 ||
  fail "the fresh environment does not import $py's torch and numpy"
say "made a fresh environment with torch $torch_version and numpy"
quietly install "$py" -m pip --python "$venv/bin/python" install --no-deps "$whl"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
inside "$venv" python - "$version" "$site" <<'EOF' || fail "the installed package (above)"
import importlib.metadata
import os
import sys

import collie
import collie.torch

version, site = sys.argv[1:]
assert collie.__version__ == version, (collie.__version__, version)
assert importlib.metadata.version("collie") == version, importlib.metadata.version("collie")
assert collie.__file__.startswith(site + os.sep), collie.__file__
assert collie.library_path() == os.path.join(site, "collie", "lib", "libcollie.so.0"), collie.library_path()
assert collie.torch.fast_path_loaded(), "the fast path is not loaded"
import collie.nccl
assert collie.nccl.library_path() == os.path.join(site, "collie", "lib", "libcollie-nccl.so"), \
    collie.nccl.library_path()
EOF
for t in collierun collie-bench collie-report; do
  [ "$(inside "$venv" sh -c "command -v $t")" = "$venv/bin/$t" ] || fail "$t is not $venv/bin/$t"
done
inside "$venv" collie-bench --version | grep -q "^collie-bench $version (collie $version)" ||
  fail "collie-bench --version: $(inside "$venv" collie-bench --version 2>&1)"
inside "$venv" collierun --help >/dev/null || fail "collierun --help"
inside "$venv" collie-report --help >/dev/null || fail "collie-report --help"
say "collie $version installed: __version__, metadata, library, fast path and tools are the package's"
inside "$venv" collierun -n 2 python job.py torch 1 || fail "the 2-rank job with the fast path"
say "collierun -n 2: numpy and torch.distributed all_reduce with the fast path"

if [ "$no_torch_too" = 1 ]; then
  # ---- the wheel built without torch ----------------------------------------
  quietly bvenv "$py" -m venv "$tmp/bvenv"
  whl0=$(build "$tmp/bvenv/bin/python" wheel0)
  say "built $(basename "$whl0") without torch"
  unzip_list=$("$py" -m zipfile -l "$whl0")
  echo "$unzip_list" | grep -q "^collie/lib/_collie_torch_fast\.missing " ||
    fail "$(basename "$whl0") holds no _collie_torch_fast.missing"
  ! echo "$unzip_list" | grep -q "^collie/lib/_collie_torch_fast\.cpython" ||
    fail "$(basename "$whl0") holds a fast path module, built without torch"
  quietly venv0 "$py" -m venv "$tmp/venv0"
  quietly numpy "$tmp/venv0/bin/pip" install numpy
  quietly install0 "$tmp/venv0/bin/pip" install --no-deps "$whl0"
  inside "$tmp/venv0" collierun -n 2 python job.py numpy || fail "the numpy job without torch"
  say "without torch: collierun -n 2 runs the numpy all_reduce"
  # The same wheel where torch is: the Python backend, and how to add the fast path.
  quietly reinstall "$py" -m pip --python "$venv/bin/python" install --no-deps --force-reinstall "$whl0"
  inside "$venv" collierun -n 2 python job.py torch 0 || fail "the 2-rank job on the Python backend"
  msg=$(inside "$venv" env COLLIE_TORCH_FAST=1 python -c 'import collie.torch' 2>&1) &&
    fail "COLLIE_TORCH_FAST=1 imported collie.torch with no fast path"
  echo "$msg" | grep -q "pip install --no-build-isolation --force-reinstall" ||
    fail "COLLIE_TORCH_FAST=1's message does not say how to add the fast path: $msg"
  say "with torch: the Python backend runs, and the message says how to add the fast path"
fi
say "passed"
