#!/bin/sh
# bench/mpich_venv.sh DIR - a virtual environment whose mpi4py runs on MPICH,
# for bench/mpi4py_compare.sh's third column (Debian's python3-mpi4py is
# built for Open MPI only). Prints the environment's python on stdout;
# everything else goes to stderr.
#
#   py=$(sh bench/mpich_venv.sh build-mpich/venv)
#
# Needs MPICH (apt-get install mpich libmpich-dev: mpicc.mpich and
# mpiexec.mpich) and Debian's /usr/bin/python3 with numpy and its headers
# (python3-numpy python3-dev python3-venv). mpi4py is built from source by pip against
# mpicc.mpich (from the index this machine's pip configuration names);
# the environment sees the system's packages (numpy). Made once and
# reused. Exit status 2 when it cannot be made, saying why.
set -eu
[ $# -eq 1 ] || { echo "usage: sh bench/mpich_venv.sh DIR" >&2; exit 2; }
fail() { echo "mpich_venv.sh: $*" >&2; exit 2; }
command -v mpicc.mpich >/dev/null 2>&1 || fail "no mpicc.mpich (apt-get install mpich libmpich-dev)"
mkdir -p "$1" || fail "cannot make $1"
dir=$(cd "$1" && pwd)
py="$dir/bin/python"
check='import mpi4py, mpi4py.MPI as M, sys; sys.exit("MPICH" not in M.Get_library_version())'
if [ -x "$py" ] && "$py" -c "$check" 2>/dev/null; then
  echo "$py"
  exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$dir" >&2 || fail "python3 -m venv failed (apt-get install python3-venv)"
MPICC=mpicc.mpich "$py" -m pip install -q --no-cache-dir --ignore-installed --no-binary mpi4py "mpi4py==4.1.2" >&2 ||
  fail "pip could not build mpi4py against MPICH"
"$py" -c "$check" || fail "the mpi4py built does not run on MPICH"
echo "$py"
