#!/bin/sh
# scripts/torch2_check.sh - collie.torch on a torch 2.x without a GPU machine
# (root): a Debian release's python3-torch in a root made by debootstrap
# (Debian 13 "trixie": torch 2.6, Python 3.13; "sid": a newer 2.x), where the
# repository is built (build-SUITE/, the C++ fast path with
# -DCOLLIE_TORCH_EXT=ON) and tests/torch runs through it, in its four
# sessions. Debian 12, where CI runs, has only torch 1.13.
#
#   sh scripts/torch2_check.sh [--suite S] [--root DIR] [--bench] [--shell] [-- PYTEST ARGS...]
#
#   --suite S   the Debian suite (default trixie; sid for the newest torch)
#   --root DIR  where its root lives (default /opt/collie-SUITE); made on the
#               first run (about 2 minutes and 1.5 GB from Debian's archive),
#               reused after.
#   --bench     also bench/torch_dispatch_cost.py (a world of 1) and, at 2
#               ranks, bench/torch_fast_path.py and torch_compare.py --latency.
#   --shell     a shell in the root, in the repository, instead of the tests.
#
# Environment passed to the tests: COLLIE_TORCH_FAST (default 1: the fast
# path must load; 0 tests the Python backend), COLLIE_TORCH_TEST_SESSIONS.
# Debian's torch 2.6 is built without libuv, so its TCPStore needs
# USE_LIBUV=0 (any backend, gloo too): set here.
#
# The root's mounts (proc, sys, dev, the repository) are undone on every
# exit. Exit status: the tests' (0 passed), 2 for usage or a root that
# cannot be made.
set -u
suite=trixie root="" bench=0 shell=0
while [ $# -gt 0 ]; do
  case $1 in
    --suite) suite=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --shell) shell=1; shift ;;
    --) shift; break ;;
    *) echo "torch2_check.sh: unknown argument $1 (usage: see the script's header)" >&2; exit 2 ;;
  esac
done
fail() { echo "torch2_check.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, mounts)"
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${root:-/opt/collie-$suite} build=build-$suite

if [ ! -x "$root/usr/bin/python3" ] || ! [ -f "$root/.collie-ready" ]; then
  command -v debootstrap >/dev/null 2>&1 || apt-get install -y debootstrap >/dev/null 2>&1 ||
    fail "no debootstrap, and apt-get install debootstrap failed"
  # The mirror this machine's apt uses (never one written here).
  mirror=$(grep -rhoE 'https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
    grep -v security | head -n 1)
  [ -n "$mirror" ] || fail "no Debian mirror in this machine's apt configuration (/etc/apt/sources.list*)"
  echo "torch2_check.sh: making a Debian $suite root in $root from $mirror (once)" >&2
  [ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase "$suite" "$root" "$mirror" \
    >"${TMPDIR:-/tmp}/torch2_debootstrap.log" 2>&1 ||
    fail "debootstrap failed: see ${TMPDIR:-/tmp}/torch2_debootstrap.log"
fi

mounted=""
cleanup() {
  for m in $mounted; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() { # source target
  mkdir -p "$2"
  # (always a mount of our own, even over one left by another run: a lazy
  # unmount of that one may still take it away under us)
  mount --bind "$1" "$2" || fail "cannot bind $1 at $2"
  mounted="$2 $mounted"
}
for d in proc sys dev dev/pts dev/shm; do bind "/$d" "$root/$d"; done
bind "$repo" "$root$repo"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  USE_LIBUV=0 OMP_NUM_THREADS=1 "COLLIE_TORCH_FAST=${COLLIE_TORCH_FAST:-1}" "build=$build" \
  ${COLLIE_TORCH_TEST_SESSIONS:+"COLLIE_TORCH_TEST_SESSIONS=$COLLIE_TORCH_TEST_SESSIONS"} \
  sh -c "cd '$repo' && $1"; }

if ! [ -f "$root/.collie-ready" ]; then
  # (-o Check-Valid-Until: a mirror's sid Release can be older than its validity)
  in_root 'apt-get -o Acquire::Check-Valid-Until=false update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3-torch libtorch-dev pybind11-dev python3-dev python3-setuptools python3-pytest python3-numpy \
      cmake make gcc g++ procps git' >"${TMPDIR:-/tmp}/torch2_apt.log" 2>&1 ||
    fail "installing torch in the root failed: see ${TMPDIR:-/tmp}/torch2_apt.log"
  touch "$root/.collie-ready"
fi

if [ $shell = 1 ]; then
  chroot "$root" /usr/bin/env USE_LIBUV=0 sh -c "cd '$repo' && exec sh -i"
  exit $?
fi

in_root 'python3 -c "import sys, torch; print(\"torch2_check.sh: torch\", torch.__version__, \"Python\", sys.version.split()[0])"'
in_root 'cmake -S . -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_TORCH_EXT=ON \
    -DCOLLIE_PYTHON=/usr/bin/python3 >/dev/null && cmake --build $build -j2 >$build/build.log 2>&1' ||
  { tail -30 "$repo/$build/build.log" >&2; fail "the build in the root failed ($build/build.log)"; }
rc=0
args="" # pytest's arguments, quoted for the root's shell
for a in "$@"; do args="$args '$(printf %s "$a" | sed "s/'/'\\\\''/g")'"; done
in_root "sh tests/torch/run.sh $build$args" || rc=$?
if [ $bench = 1 ]; then
  in_root 'export COLLIE_LIBRARY=$PWD/$build/libcollie.so; python3 bench/torch_dispatch_cost.py 2>&1 | grep -v Warning'
  [ "${COLLIE_TORCH_FAST:-1}" = 0 ] ||
    in_root 'export COLLIE_LIBRARY=$PWD/$build/libcollie.so; $build/collierun -n 2 python3 bench/torch_fast_path.py 2>&1 | grep -v Warning'
  in_root 'export COLLIE_LIBRARY=$PWD/$build/libcollie.so; $build/collierun -n 2 python3 bench/torch_compare.py --latency 2>&1 | grep -v Warning'
fi
exit $rc
