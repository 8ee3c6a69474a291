#!/bin/sh
# footprint.sh - what a job costs around its collectives, collie beside
# Open MPI and MPICH on this machine: the wall time of starting N ranks that
# init, run one barrier sweep and finalize (hyperfine, the anchors' start-up
# measurement), and the peak resident memory of a run of one large allreduce
# (GNU time's maximum RSS: the largest process of the launcher's tree, i.e.
# the fattest rank, its buffers included).
#
#   sh bench/footprint.sh [-n N] [-s SIZE] [--runs R] [--timeout S] [--build DIR] [--work DIR]
#
# The programs are the anchors' mpi_coll_perf (built with each mpicc into the
# work dir, as compare.sh does) and collie-bench under collierun, with the
# same arguments: `-c barrier -t 0.001` / `-o barrier -t 0.001` for start-up,
# one size of allreduce for memory. Every rank holds a send and a receive
# buffer of that size, so 2 x SIZE of the peak is the benchmark's own; the
# rest is the library's (and the process's). Prints one table and writes
# WORK/footprint.md and WORK/startup.csv (hyperfine's export). Exit status:
# 0; 1 when a run failed; 2 for bad usage.
# "A && B || bad_usage" is meant (bad_usage only exits).
# shellcheck disable=SC2015
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANCHORS=${COLLIE_ANCHORS:-$ROOT/../shared/anchors}
ME=footprint.sh
N=2
SIZE=64M
RUNS=10
RUN_TIMEOUT=600
BUILD=$ROOT/build
WORK=

usage() {
  cat <<EOF
usage: sh bench/footprint.sh [options]

Start-up wall time (init + one barrier sweep + finalize, hyperfine) and peak
resident memory of one allreduce, collie beside Open MPI and MPICH.

  -n N          ranks (default 2)
  -s SIZE       allreduce size for the memory run (default 64M; K/M/G binary)
  --runs R      hyperfine runs per library (default 10, after 2 warm-ups)
  --timeout S   limit for the start-up measurement and for each memory run
                (default 600 s): a hung job fails the script, not the machine
  --build DIR   collie's build dir with collie-bench and collierun (default build)
  --work DIR    where the anchors are built and results go (default BUILD/footprint)
  -h, --help    this text

Needs hyperfine, GNU time (/usr/bin/time), mpicc.openmpi and mpicc.mpich
(Debian: hyperfine time openmpi-bin libopenmpi-dev mpich libmpich-dev; as
root it installs what is missing).
EOF
}

# shellcheck source=bench/sh_lib.sh
. "$ROOT/bench/sh_lib.sh"

while [ $# -gt 0 ]; do
  case $1 in
  -n) need_arg "$1" $#; N=$2; shift 2 ;;
  -s) need_arg "$1" $#; SIZE=$2; shift 2 ;;
  --runs) need_arg "$1" $#; RUNS=$2; shift 2 ;;
  --timeout) need_arg "$1" $#; RUN_TIMEOUT=$2; shift 2 ;;
  --build) need_arg "$1" $#; BUILD=$2; shift 2 ;;
  --work) need_arg "$1" $#; WORK=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) bad_usage "unknown argument '$1'" ;;
  esac
done
is_uint "$N" || bad_usage "-n: '$N' is not a rank count"
[ "$N" -ge 1 ] && [ "$N" -le 64 ] || bad_usage "-n: $N is outside 1..64"
is_uint "$RUNS" || bad_usage "--runs: '$RUNS' is not a count"
is_uint "$RUN_TIMEOUT" && [ "$RUN_TIMEOUT" -ge 1 ] || bad_usage "--timeout: '$RUN_TIMEOUT' is not a whole number of seconds"
[ "$RUNS" -ge 2 ] || bad_usage "--runs: at least 2"
SIZE_B=$(echo "$SIZE" | awk '/^[0-9]+[KMG]?$/ { n = $0 + 0; u = substr($0, length($0));
  m = (u == "K") ? 1024 : (u == "M") ? 1048576 : (u == "G") ? 1073741824 : 1; printf "%.0f", n * m }')
[ -n "$SIZE_B" ] && [ "$SIZE_B" -ge 4 ] || bad_usage "-s: '$SIZE' is not a size (e.g. 64M)"

BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build dir $BUILD (cmake -S . -B build && cmake --build build)"
[ -x "$BUILD/collie-bench" ] && [ -x "$BUILD/collierun" ] || die "$BUILD has no collie-bench/collierun: build them first"
[ -n "$WORK" ] || WORK=$BUILD/footprint
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd) || die "cannot create $WORK"

# ---- what it needs ----
missing=
command -v hyperfine >/dev/null 2>&1 || missing="$missing hyperfine"
[ -x /usr/bin/time ] || missing="$missing time"
command -v mpicc.openmpi >/dev/null 2>&1 || missing="$missing openmpi-bin libopenmpi-dev"
command -v mpicc.mpich >/dev/null 2>&1 || missing="$missing mpich libmpich-dev"
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || die "missing packages:$missing (apt-get install them, or run as root)"
  echo "== installing:$missing"
  # shellcheck disable=SC2086 # a package list
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; } >"$WORK/install.log" 2>&1 ||
    die "apt-get failed (log: $WORK/install.log)"
fi
[ -f "$ANCHORS/mpi_coll_perf.c" ] || die "the MPI anchor is not in $ANCHORS; set COLLIE_ANCHORS=DIR"
OMPI_BIN=$WORK/mpi_coll_perf_ompi
MPICH_BIN=$WORK/mpi_coll_perf_mpich
build "$OMPI_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.openmpi -O2 -Wall
build "$MPICH_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.mpich -O2 -Wall
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OVER=
[ "$N" -gt "$(nproc)" ] && OVER="--oversubscribe"
OMPI_RUN="mpirun.openmpi -np $N --bind-to none $OVER"
MPICH_RUN="mpiexec.mpich -n $N"
COLLIE_RUN="$BUILD/collierun -n $N"
FAILED=0

# ---- start-up ----
echo "== start-up: $N ranks, init + barrier sweep + finalize (hyperfine, $RUNS runs each)"
timeout -k 10 "$RUN_TIMEOUT" hyperfine --style basic --warmup 2 --runs "$RUNS" --export-csv "$WORK/startup.csv" \
  -n openmpi "$OMPI_RUN $OMPI_BIN -c barrier -t 0.001" \
  -n mpich "$MPICH_RUN $MPICH_BIN -c barrier -t 0.001" \
  -n collie "$COLLIE_RUN $BUILD/collie-bench -o barrier -t 0.001" >"$WORK/startup.log" 2>&1 || {
  tail -n 5 "$WORK/startup.log" >&2
  die "hyperfine failed (log: $WORK/startup.log)"
}

# ---- memory ----
# peak LABEL CMD...: GNU time's maximum RSS (KiB) of the launch, into
# WORK/rss_LABEL.txt (left empty when the launch failed).
peak() {
  label=$1
  shift
  if ! timeout -k 10 "$RUN_TIMEOUT" /usr/bin/time -f '%M' -o "$WORK/rss_$label.txt" "$@" >"$WORK/mem_$label.log" 2>&1; then
    echo "$ME: the $label run failed (log: $WORK/mem_$label.log)" >&2
    : >"$WORK/rss_$label.txt"
    FAILED=$((FAILED + 1))
  fi
}
echo "== peak resident memory: $N ranks, one allreduce of $SIZE (GNU time)"
# shellcheck disable=SC2086 # the launcher commands are word lists
peak openmpi $OMPI_RUN "$OMPI_BIN" -c allreduce -b "$SIZE_B" -e "$SIZE_B" -t 0.1
# shellcheck disable=SC2086
peak mpich $MPICH_RUN "$MPICH_BIN" -c allreduce -b "$SIZE_B" -e "$SIZE_B" -t 0.1
# shellcheck disable=SC2086
peak collie $COLLIE_RUN "$BUILD/collie-bench" -o allreduce -b "$SIZE_B" -e "$SIZE_B" -t 0.1

# ---- the table ----
{
  echo "| library | start-up s (mean ± sd, min) | peak RSS MiB | of it beyond the 2 x $SIZE buffers |"
  echo "|---|--:|--:|--:|"
  for lib in openmpi mpich collie; do
    rss=$(tail -n 1 "$WORK/rss_$lib.txt")
    awk -F, -v lib="$lib" -v rss="$rss" -v buf="$SIZE_B" '
      $1 == lib { t = sprintf("%.3f ± %.3f, %.3f", $2, $3, $7) }
      END {
        if (rss == "") { m = "failed"; o = "-" } else { m = sprintf("%.0f", rss / 1024); o = sprintf("%.0f", rss / 1024 - 2 * buf / 1048576) }
        printf "| %s | %s | %s | %s |\n", lib, (t == "") ? "failed" : t, m, o
      }' "$WORK/startup.csv"
  done
} >"$WORK/footprint.md"
echo
cat "$WORK/footprint.md"
echo
echo "files in $WORK: footprint.md, startup.csv and .log, rss_*.txt, mem_*.log"
[ "$FAILED" = 0 ] || exit 1
exit 0
