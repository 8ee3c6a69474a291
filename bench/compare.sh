#!/bin/sh
# compare.sh - collie side by side with Open MPI and MPICH (and, over TCP,
# Gloo and raw TCP) on this machine.
#
# Why: a collie figure alone says little on a shared 2-core VM whose memory
# bandwidth moves 2x between minutes. The same collectives and sizes, with
# the same conventions, measured by the MPI anchors
# (../shared/anchors/mpi_coll_perf.c) in the same run give ratios that mean
# something. For each rank count it runs Open MPI, MPICH and collie-bench
# (under collierun) one after the other, plus membw once, and prints one
# table per rank count: time and busbw of each library, collie's time / the
# faster MPI's time and busbw / its busbw, with the lines where collie is
# behind marked. docs/performance.md explains the table and has this
# machine's figures.
#
# --transport tcp forces every library onto TCP over loopback: Open MPI's
# tcp btl (lo), MPICH with UCX_TLS=tcp,self, Gloo (the anchors' gloo_perf.py
# under /usr/bin/python3, when that imports torch) and collie-bench
# --transport tcp. The raw TCP limits (the anchors' tcp_pingpong.c: 8 B
# half round trip, one-way stream, and both sides sending at once) are
# measured once and printed above the tables, and under each table the tcp
# targets of issue 8: 8 B allreduce against Open MPI, the largest allreduce's
# busbw against Gloo's and as % of the raw exchange bandwidth. Tables get a
# Gloo column and collie's time / Gloo's (t/gloo).
# --netns does the same between two network namespaces joined by a veth
# pair (COMPARE_NS0/1 below, 192.168.78.0/24), which it creates and removes
# (trap on every exit, signals included; root only): 2 ranks, one per
# namespace; collie as two collierun "nodes", MPICH through
# bench/netns_wrap.sh, tcp_pingpong as client and server. Open MPI is left
# out here: its ranks reach mpirun's PMIx server only when mpirun runs in
# the first namespace with PMIX_MCA_ptl_tcp_if_include=eth0, as
# bench/ofi_compare.sh does it on the test bed; Gloo cannot (gloo_perf.py
# spawns both ranks itself, in one namespace).
#
# Noise is the enemy here, so by default the libraries take turns at
# each size (the ratios of one row are measured within seconds of each
# other), every launch records how much CPU other processes took meanwhile,
# and a launch that saw such load is measured again (--retries).
#
#   sh bench/compare.sh [-n "2 8"] [-b 8] [-e 64M] [-f 2] [-o allreduce,allgather,...]
#                       [-t 0.1] [--build DIR] [--work DIR] [--timeout S] [--retries R]
#                       [--idle-wait S] [--per-library] [--mpi-nommap]
#                       [--collie-args "..."] [--no-install] [--tables-only]
#                       [--transport shm|tcp] [--netns]
#
# Everything goes to the work dir (default BUILD/compare; BUILD/compare-tcp
# with --transport tcp, BUILD/compare-netns with --netns): the anchor
# binaries, one CSV and one log per library and rank count (ompi_npN.csv,
# mpich_npN.csv, gloo_npN.csv, collie_npN.csv with a foreign_load_pct column
# added; collie_npN.txt is collie-bench's own table), membw.csv, tcp_raw.csv
# (tcp_pingpong), env.txt, commands.log (every launch: exit status, wall
# time, load), compare_npN.csv (the joined rows), table_npN.txt, table.txt
# and table.md (all tables).
# Exit status: 0; 1 when a run failed, timed out or left processes behind, a
# CSV is missing, collie reported wrong results, or --netns cannot set up
# its namespaces; 2 for bad usage.
#
# POSIX sh (Debian's dash) and mawk: nothing beyond the base system apart
# from the MPI packages, which it installs when they are missing (and
# iproute2 for --netns). COMPARE_GLOO_PYTHON overrides the interpreter that
# runs gloo_perf.py (default /usr/bin/python3: Debian's, with python3-torch).

# "A && B || fail" is meant (fail only exits); the traps call their functions.
# shellcheck disable=SC2015,SC2317
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANCHORS=${COLLIE_ANCHORS:-$ROOT/../shared/anchors}
ME=compare.sh

NRANKS="2 8"
MINB=8
MAXB=64M
STEP=2
OPS="allreduce,allgather,reduce_scatter,broadcast,alltoall,barrier"
TSEC=0.1
BUILD=$ROOT/build
WORK=
RUN_TIMEOUT=600
RETRIES=1
LOAD_PCT=10
IDLE_WAIT=0
PER_LIBRARY=0
NOMMAP=0
COLLIE_ARGS=
INSTALL=1
TABLES_ONLY=0
TRANSPORT=shm
TRANSPORT_SET=0
NETNS=0
NRANKS_SET=0
GLOO_PY=${COMPARE_GLOO_PYTHON:-/usr/bin/python3}
# --netns: our namespaces, veth ends and subnet; names and subnet differ from
# the anchors' (anchtest/anchtest2, vanch0/vanch1, 192.168.77.0/24).
COMPARE_NS0=collie0 COMPARE_NS1=collie1
COMPARE_DEV0=vcollie0 COMPARE_DEV1=vcollie1
NS_ADDR0=192.168.78.1 NS_ADDR1=192.168.78.2 NS_PREFIX=24

usage() {
  cat <<EOF
usage: sh bench/compare.sh [options]

Runs the same collectives and sizes with Open MPI, MPICH (the anchors'
mpi_coll_perf.c) and collie-bench, one after the other, and prints per rank
count a table with collie's time and busbw relative to the faster MPI.

  --transport T      shm (default): each library as it runs on one host
                     (shared memory). tcp: all over TCP on loopback: Open MPI
                     --mca btl tcp,self (lo), MPICH UCX_TLS=tcp,self, Gloo
                     (gloo_perf.py under $GLOO_PY; left out, with a
                     note, when that cannot import torch), collie-bench
                     --transport tcp. Adds the raw TCP figures (tcp_pingpong)
                     above each table and, under it, the tcp targets: 8 B
                     allreduce against Open MPI; the largest allreduce's busbw
                     against Gloo's and as % of the raw TCP exchange. The
                     sizes then always end with -e itself
  --netns            as --transport tcp, but the 2 ranks live in two network
                     namespaces, $COMPARE_NS0 and $COMPARE_NS1, joined by a veth pair
                     ($COMPARE_DEV0 $NS_ADDR0, $COMPARE_DEV1 $NS_ADDR1), made here and
                     removed on every exit; needs root and -n 2. MPICH and
                     collie (two collierun nodes) only: Open MPI's ranks cannot
                     reach its PMIx server from another namespace, and
                     gloo_perf.py starts both ranks in one namespace
  -n "N ..."         rank counts (default "2 8"; over tcp "2"). More ranks
                     than CPUs are oversubscribed: Open MPI then gets
                     --oversubscribe and --mca mpi_yield_when_idle 1, as the
                     anchors ran it
  -b SIZE            smallest size in bytes (default 8; K/M/G suffixes, binary)
  -e SIZE            largest size (default 64M)
  -f N               size step factor, an integer >= 2 (default 2)
  -o LIST            collectives, comma separated, or "all" (default
                     $OPS); names: allreduce allgather
                     reduce_scatter broadcast (or bcast) reduce alltoall
                     gather scatter barrier
  -t SEC             target seconds per (collective, size) point (default 0.1)
  --build DIR        collie build dir with collie-bench and collierun
                     (default build; configured and built when they are missing)
  --work DIR         where binaries, CSVs, logs and tables go (default
                     BUILD/compare, BUILD/compare-tcp, BUILD/compare-netns)
  --timeout S        limit of each launch in seconds (default 600)
  --retries R        measure a launch again, up to R times, when other processes
                     took >= $LOAD_PCT % of the CPUs during it; the attempt with the
                     least load is kept (default 1; 0: never)
  --idle-wait S      before each launch wait up to S s for the CPUs to be idle
                     (< $LOAD_PCT % busy); default 0 (no waiting)
  --per-library      run each library over all sizes before the next (Open
                     MPI, MPICH, collie) instead of taking turns at each size;
                     fewer launches, but load that comes and goes biases the ratios
  --mpi-nommap       run the MPIs with glibc's malloc never using mmap (the
                     anchors' "+nommap" variant: no page faults from their
                     temporary buffers at large sizes)
  --collie-args "A"  extra arguments for collie-bench (e.g. "--algo ring"; over
                     tcp no --transport: the option above passes it)
  --no-install       never run apt-get; fail if an MPI command is missing
  --tables-only      run nothing: remake the tables from the CSVs already in
                     the work dir (give the same -n, -o, --transport, --netns)
  -h, --help         this text

Exit status: 0; 1 when a run failed or timed out, a CSV is missing, collie
reported wrong results or --netns could not set up its namespaces; 2 for bad
usage.
EOF
}

# shellcheck source=bench/sh_lib.sh
. "$ROOT/bench/sh_lib.sh"

# ---- options ----
while [ $# -gt 0 ]; do
  case $1 in
  -n) need_arg "$1" $#; NRANKS=$2; NRANKS_SET=1; shift 2 ;;
  -b) need_arg "$1" $#; MINB=$2; shift 2 ;;
  -e) need_arg "$1" $#; MAXB=$2; shift 2 ;;
  -f) need_arg "$1" $#; STEP=$2; shift 2 ;;
  -o) need_arg "$1" $#; OPS=$2; shift 2 ;;
  -t) need_arg "$1" $#; TSEC=$2; shift 2 ;;
  --build) need_arg "$1" $#; BUILD=$2; shift 2 ;;
  --work) need_arg "$1" $#; WORK=$2; shift 2 ;;
  --timeout) need_arg "$1" $#; RUN_TIMEOUT=$2; shift 2 ;;
  --retries) need_arg "$1" $#; RETRIES=$2; shift 2 ;;
  --idle-wait) need_arg "$1" $#; IDLE_WAIT=$2; shift 2 ;;
  --collie-args) need_arg "$1" $#; COLLIE_ARGS=$2; shift 2 ;;
  --transport) need_arg "$1" $#; TRANSPORT=$2; TRANSPORT_SET=1; shift 2 ;;
  --netns) NETNS=1; shift ;;
  --per-library) PER_LIBRARY=1; shift ;;
  --mpi-nommap) NOMMAP=1; shift ;;
  --no-install) INSTALL=0; shift ;;
  --tables-only) TABLES_ONLY=1; shift ;;
  -h | --help) usage; exit 0 ;;
  *) bad_usage "unknown option '$1'" ;;
  esac
done

is_num() { echo "$1" | grep -Eq '^([0-9]+\.?[0-9]*|\.[0-9]+)$'; }

# parse_size TEXT: bytes (K/M/G binary suffixes), or nothing when malformed.
parse_size() {
  echo "$1" | awk '/^[0-9]+[KkMmGg]?$/ {
      n = $0; s = substr(n, length(n)); m = 1
      if (s ~ /[Kk]/) m = 1024; else if (s ~ /[Mm]/) m = 1048576; else if (s ~ /[Gg]/) m = 1073741824
      if (m > 1) n = substr(n, 1, length(n) - 1)
      printf "%.0f\n", n * m }'
}
# hsize BYTES: 8 B, 4 KiB, 64 MiB.
hsize() {
  awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576
    else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024; else printf "%d B", b }'
}

case $TRANSPORT in
shm | tcp) ;;
*) bad_usage "--transport: '$TRANSPORT' is not a transport (shm or tcp)" ;;
esac
if [ "$NETNS" = 1 ]; then
  [ "$TRANSPORT_SET" = 1 ] && [ "$TRANSPORT" != tcp ] &&
    bad_usage "--netns measures TCP between two namespaces: it cannot go with --transport $TRANSPORT"
  TRANSPORT=tcp
fi
if [ "$TRANSPORT" = tcp ]; then
  [ "$NRANKS_SET" = 1 ] || NRANKS=2
  case " $COLLIE_ARGS " in
  *" --transport"*) bad_usage "--collie-args: '--transport' there would fight --transport $TRANSPORT; leave it out" ;;
  esac
fi
NRANKS=$(echo "$NRANKS" | tr ',' ' ')
[ -n "$(echo "$NRANKS" | tr -d ' ')" ] || bad_usage "-n: no rank count given"
for n in $NRANKS; do
  is_uint "$n" && [ "$n" -ge 1 ] && [ "$n" -le 256 ] || bad_usage "-n: '$n' is not a rank count (1..256)"
done
MINB_B=$(parse_size "$MINB")
MAXB_B=$(parse_size "$MAXB")
[ -n "$MINB_B" ] && [ "$MINB_B" -ge 1 ] || bad_usage "-b: '$MINB' is not a size (e.g. 8, 4K, 64M)"
[ -n "$MAXB_B" ] && [ "$MAXB_B" -ge 1 ] || bad_usage "-e: '$MAXB' is not a size (e.g. 8, 4K, 64M)"
[ "$MINB_B" -le "$MAXB_B" ] || bad_usage "-b $MINB is larger than -e $MAXB"
[ "$MAXB_B" -le 1073741824 ] || bad_usage "-e: '$MAXB' is above 1G (every rank holds two buffers of that size)"
is_uint "$STEP" && [ "$STEP" -ge 2 ] || bad_usage "-f: '$STEP' is not an integer >= 2 (the MPI anchor sweeps whole factors only)"
is_num "$TSEC" && awk "BEGIN { exit !($TSEC > 0 && $TSEC <= 60) }" || bad_usage "-t: '$TSEC' is not a time in seconds (0 < t <= 60)"
is_uint "$RUN_TIMEOUT" && [ "$RUN_TIMEOUT" -ge 1 ] || bad_usage "--timeout: '$RUN_TIMEOUT' is not a whole number of seconds"
is_uint "$RETRIES" && [ "$RETRIES" -le 10 ] || bad_usage "--retries: '$RETRIES' is not a count (0..10)"
is_uint "$IDLE_WAIT" || bad_usage "--idle-wait: '$IDLE_WAIT' is not a whole number of seconds"
if [ "$NETNS" = 1 ]; then
  [ "$(echo "$NRANKS" | tr -d ' ')" = 2 ] ||
    bad_usage "--netns: -n '$NRANKS': two namespaces hold exactly 2 ranks (give -n 2 or leave -n out)"
fi

# Collective names: the MPI anchor says "bcast", collie-bench's -o
# "broadcast" (its CSV may say either); the joined rows use the anchor's.
ALL_OPS="allreduce allgather reduce_scatter bcast reduce alltoall gather scatter barrier"
[ "$OPS" = all ] && OPS=$(echo "$ALL_OPS" | tr ' ' ',')
OPLIST=
for op in $(echo "$OPS" | tr ',' ' '); do
  [ "$op" = broadcast ] && op=bcast
  case " $ALL_OPS " in
  *" $op "*) ;;
  *) bad_usage "-o: unknown collective '$op' (known: $ALL_OPS, broadcast, all)" ;;
  esac
  case " $OPLIST " in *" $op "*) continue ;; esac
  OPLIST="$OPLIST $op"
done
OPLIST=${OPLIST# }
[ -n "$OPLIST" ] || bad_usage "-o: no collective given"
MPI_OPS=$(echo "$OPLIST" | tr ' ' ',')
COLLIE_OPS=
for op in $OPLIST; do
  [ "$op" = bcast ] && op=broadcast
  COLLIE_OPS="$COLLIE_OPS${COLLIE_OPS:+,}$op"
done

# Gloo's names (gloo_perf.py) for the same collectives.
GLOO_OPS=
for op in $OPLIST; do
  case $op in
  allreduce) op=all_reduce ;;
  allgather) op=all_gather ;;
  bcast) op=broadcast ;;
  alltoall) op=all_to_all ;;
  esac
  GLOO_OPS="$GLOO_OPS${GLOO_OPS:+,}$op"
done

# The sizes of nccl-tests' -b/-e/-f: b, b*f, b*f^2, ... <= e. Over TCP the
# targets are at the -e size (64 MiB), so it is always measured: when the
# steps miss it (-b 8 -f 8 ends at 16 MiB), it is added as SIZE_EXTRA, and
# SWEEP_HI is the last size the steps reach.
SIZES=$(awk -v b="$MINB_B" -v e="$MAXB_B" -v f="$STEP" 'BEGIN { for (s = b; s <= e; s *= f) printf "%.0f ", s }')
SWEEP_HI=$MAXB_B
SIZE_EXTRA=
if [ "$TRANSPORT" = tcp ]; then
  last=$(echo "$SIZES" | awk '{ print $NF }')
  if [ "$last" != "$MAXB_B" ]; then
    SWEEP_HI=$last SIZE_EXTRA=$MAXB_B
    SIZES="$SIZES$MAXB_B "
  fi
fi

# The libraries of this mode, in launch order (collie last, as always).
if [ "$NETNS" = 1 ]; then
  LIBS="mpich collie" MODE_NAME="TCP between two network namespaces joined by a veth pair"
elif [ "$TRANSPORT" = tcp ]; then
  LIBS="ompi mpich gloo collie" MODE_NAME="TCP over loopback"
else
  LIBS="ompi mpich collie" MODE_NAME=
fi

if [ "$NETNS" = 1 ] && [ "$TABLES_ONLY" = 0 ]; then
  [ "$(id -u)" = 0 ] ||
    die "--netns creates network namespaces and a veth pair, which needs root: rerun as root (or measure loopback only: --transport tcp)"
  command -v ip >/dev/null 2>&1 ||
    die "--netns needs the ip command (Debian: apt-get install iproute2)"
  err=$(ip netns list 2>&1 >/dev/null) ||
    die "--netns: 'ip netns list' fails here ($(echo "$err" | head -n 1)): network namespaces are not available"
fi

if [ -z "$WORK" ]; then
  if [ "$NETNS" = 1 ]; then
    WORK=$BUILD/compare-netns
  elif [ "$TRANSPORT" = tcp ]; then
    WORK=$BUILD/compare-tcp
  else
    WORK=$BUILD/compare
  fi
fi
mkdir -p "$WORK/parts" || die "cannot create the work dir $WORK"
WORK=$(cd "$WORK" && pwd)
BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd) || die "cannot create the build dir"
PARTS=$WORK/parts
OMPI_BIN=$WORK/mpi_coll_perf_ompi
MPICH_BIN=$WORK/mpi_coll_perf_mpich
MEMBW_BIN=$WORK/membw
TCP_BIN=$WORK/tcp_pingpong
WRAP=$ROOT/bench/netns_wrap.sh
BENCH=$BUILD/collie-bench
RUNNER=$BUILD/collierun
NCPU=$(nproc)
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/collie_compare.XXXXXX") || die "mktemp failed"

# ---- signals: stop the launch in progress, leave nothing behind ----
# `timeout` puts each launch in its own process group, so a Ctrl-C on the
# terminal reaches only this shell: the trap passes it on.
CUR_PID=
NS_MADE=
# netns_down: removes the namespaces this run created (their veth pair goes
# with them); safe to call twice.
netns_down() {
  for ns in $NS_MADE; do
    ip netns del "$ns" 2>/dev/null || echo "$ME: could not remove network namespace $ns: ip netns del $ns" >&2
  done
  NS_MADE=
}
cleanup() {
  netns_down
  rm -rf "$TMPD"
}
on_signal() {
  trap '' INT TERM HUP
  if [ -n "$CUR_PID" ]; then
    kill -TERM "$CUR_PID" 2>/dev/null
    wait "$CUR_PID" 2>/dev/null
  fi
  reap_leftovers >/dev/null 2>&1
  cleanup
  echo "$ME: interrupted; stopped the launch in progress" >&2
  exit 130
}
trap on_signal INT TERM HUP
trap cleanup EXIT

FAILED=0
fail() {
  echo "$ME: $*" >&2
  FAILED=$((FAILED + 1))
}

# ---- 1. the MPI packages ----
# pkg_of COMMAND: the Debian package that provides it.
pkg_of() {
  case $1 in
  mpicc.openmpi) echo libopenmpi-dev ;;
  mpirun.openmpi) echo openmpi-bin ;;
  mpicc.mpich) echo libmpich-dev ;;
  mpiexec.mpich) echo mpich ;;
  *) echo "$1" ;;
  esac
}
NEEDED="mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich gcc cmake"
install_missing() {
  missing=
  for c in $NEEDED; do
    command -v "$c" >/dev/null 2>&1 || missing="$missing $(pkg_of "$c")"
  done
  [ -n "$missing" ] || return 0
  missing=${missing# }
  [ "$INSTALL" = 1 ] || die "missing packages: $missing (--no-install given; install them with apt-get)"
  command -v apt-get >/dev/null 2>&1 ||
    die "missing packages: $missing, and no apt-get here: install Open MPI and MPICH (mpicc.openmpi, mpirun.openmpi, mpicc.mpich, mpiexec.mpich) by hand"
  if [ "$(id -u)" = 0 ]; then
    sudo=
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    die "missing packages: $missing; installing them needs root: run  sudo apt-get install -y $missing  (or rerun as root)"
  fi
  echo "== installing $missing with apt-get (log: $WORK/apt.log)"
  # shellcheck disable=SC2086 # $sudo and $missing are word lists
  if ! { timeout -k 10 "$RUN_TIMEOUT" $sudo apt-get update &&
    DEBIAN_FRONTEND=noninteractive timeout -k 10 "$RUN_TIMEOUT" $sudo apt-get install -y --no-install-recommends $missing; } >"$WORK/apt.log" 2>&1; then
    tail -n 5 "$WORK/apt.log" >&2
    die "apt-get could not install $missing (full log: $WORK/apt.log)"
  fi
  for c in $NEEDED; do
    command -v "$c" >/dev/null 2>&1 || die "after apt-get, $c is still missing (see $WORK/apt.log)"
  done
}

# ---- 2. the anchors ----
build_anchors() {
  [ -f "$ANCHORS/mpi_coll_perf.c" ] && [ -f "$ANCHORS/membw.c" ] ||
    die "the MPI anchors are not in $ANCHORS (mpi_coll_perf.c, membw.c); set COLLIE_ANCHORS=DIR"
  echo "== building the anchors in $WORK"
  case " $LIBS " in *" ompi "*) build "$OMPI_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.openmpi -O2 -Wall ;; esac
  build "$MPICH_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.mpich -O2 -Wall
  build "$MEMBW_BIN" "$ANCHORS/membw.c" gcc -O3 -march=native -fopenmp -Wall
  if [ "$TRANSPORT" = tcp ]; then
    [ -f "$ANCHORS/tcp_pingpong.c" ] || die "the raw TCP anchor $ANCHORS/tcp_pingpong.c is missing; set COLLIE_ANCHORS=DIR"
    build "$TCP_BIN" "$ANCHORS/tcp_pingpong.c" gcc -O2 -Wall
  fi
}

# gloo_check: keeps gloo in LIBS only when gloo_perf.py is there and GLOO_PY
# imports torch.distributed; otherwise drops it and says why (GLOO_NOTE, also
# printed under the tables). GLOO_VERSION: torch's version.
GLOO_NOTE='' GLOO_VERSION=''
gloo_check() {
  case " $LIBS " in *" gloo "*) ;; *) return 0 ;; esac
  if [ ! -f "$ANCHORS/gloo_perf.py" ]; then
    GLOO_NOTE="Gloo left out: $ANCHORS/gloo_perf.py is missing"
  elif ! GLOO_VERSION=$("$GLOO_PY" -c 'import torch, torch.distributed as d
assert d.is_available() and d.is_gloo_available()
print(torch.__version__)' 2>"$TMPD/gloo.err"); then
    GLOO_NOTE="Gloo left out: $GLOO_PY cannot import torch with gloo ($(grep -v '^ ' "$TMPD/gloo.err" | tail -n 1)); on Debian: apt-get install python3-torch, or set COMPARE_GLOO_PYTHON"
    GLOO_VERSION=
  fi
  if [ -n "$GLOO_NOTE" ]; then
    LIBS=$(echo " $LIBS " | sed 's/ gloo / /; s/^ //; s/ $//')
    echo "$ME: $GLOO_NOTE" >&2
  fi
}

# ---- 3. collie ----
build_collie() {
  if [ ! -x "$BENCH" ] || [ ! -x "$RUNNER" ]; then
    echo "== building collie in $BUILD (log: $WORK/build.log)"
    { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
      cmake --build "$BUILD" -j "$NCPU" --target collie-bench collierun; } >"$WORK/build.log" 2>&1 || {
      tail -n 20 "$WORK/build.log" >&2
      die "building collie failed (full log: $WORK/build.log)"
    }
  fi
  "$BENCH" --help >"$TMPD/help.txt" 2>&1 || {
    head -n 5 "$TMPD/help.txt" >&2
    die "$BENCH does not run (--help failed); rebuild it: cmake --build $BUILD"
  }
}

# ---- measuring helpers ----
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NOMMAP_TUN='glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296'

# busy_pct: % of all CPU time that was not idle in a 0.5 s window.
busy_pct() {
  a=$(head -n 1 /proc/stat)
  sleep 0.5
  b=$(head -n 1 /proc/stat)
  printf '%s\n%s\n' "$a" "$b" | awk 'NR == 1 { for (i = 2; i <= 9; i++) x[i] = $i }
    NR == 2 { t = 0; for (i = 2; i <= 9; i++) t += $i - x[i]; idle = $5 - x[5] + $6 - x[6]
              print ((t > 0) ? int(100 * (t - idle) / t) : 0) }'
}
# wait_idle: up to IDLE_WAIT s until two windows in a row are below LOAD_PCT.
wait_idle() {
  [ "$IDLE_WAIT" -gt 0 ] || return 0
  start=$(date +%s)
  while :; do
    p1=$(busy_pct)
    p2=$(busy_pct)
    [ "$p1" -lt "$LOAD_PCT" ] && [ "$p2" -lt "$LOAD_PCT" ] && return 0
    [ $(($(date +%s) - start)) -ge "$IDLE_WAIT" ] && return 0
    sleep 1
  done
}
# child_cpu: sets CHILD_CPU to the CPU seconds (user + system) of every child
# this shell has reaped. `times` must run in this shell, not in a command
# substitution (a subshell), so the result comes back in a variable.
child_cpu() {
  times >"$TMPD/times"
  CHILD_CPU=$(awk 'NR == 2 { s = 0
      for (i = 1; i <= 2; i++) { v = $i; m = v; sub(/m.*/, "", m); sub(/^[0-9]*m/, "", v); sub(/s$/, "", v); s += m * 60 + v }
      printf "%.3f\n", s }' "$TMPD/times")
}
# reap_leftovers: kills (by pid) any rank binary of ours still alive after a
# launch; returns 1 when there was one. Gloo's ranks are python processes
# like any other: only those whose environment carries this run's
# COMPARE_SH_OWNER mark (set on the Gloo launches) are ours.
reap_leftovers() {
  found=
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in
    "$OMPI_BIN" | "$MPICH_BIN" | "$BENCH" | "$RUNNER") found="$found ${p#/proc/}" ;;
    "$TCP_BIN") [ "$TRANSPORT" = tcp ] && found="$found ${p#/proc/}" ;;
    */python*)
      [ "$TRANSPORT" = tcp ] && tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "COMPARE_SH_OWNER=$$" &&
        found="$found ${p#/proc/}"
      ;;
    esac
  done
  [ -n "$found" ] || return 0
  echo "$ME: processes left behind:$found; killing them" >&2
  # shellcheck disable=SC2086 # a list of pids
  kill -TERM $found 2>/dev/null
  sleep 2
  # shellcheck disable=SC2086
  kill -KILL $found 2>/dev/null
  return 1
}

# run TAG LABEL CMD...: one launch under `timeout`, stdout to PARTS/TAG.out,
# stderr to PARTS/TAG.log. Sets RUN_RC, RUN_WALL and RUN_LOAD: the CPU time
# that processes other than this launch used meanwhile, as % of all CPUs
# ("" when the launch was too short to tell), and logs the launch in
# commands.log. A failure is reported with the log's last lines.
run() {
  tag=$1 label=$2
  shift 2
  wait_idle
  a=$(head -n 1 /proc/stat)
  child_cpu
  c0=$CHILD_CPU
  t0=$(date +%s.%N)
  timeout -k 10 "$RUN_TIMEOUT" "$@" >"$PARTS/$tag.out" 2>"$PARTS/$tag.log" </dev/null &
  CUR_PID=$!
  wait "$CUR_PID"
  RUN_RC=$?
  CUR_PID=
  t1=$(date +%s.%N)
  child_cpu
  c1=$CHILD_CPU
  b=$(head -n 1 /proc/stat)
  res=$(printf '%s\n%s\n' "$a" "$b" | awk -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" \
    -v hz="$HZ" -v ncpu="$NCPU" 'NR == 1 { for (i = 2; i <= 9; i++) x[i] = $i }
      NR == 2 { wall = t1 - t0; cpu = ($2 - x[2] + $3 - x[3] + $4 - x[4]) / hz
        f = (wall > 0) ? 100 * (cpu - (c1 - c0)) / (wall * ncpu) : 0
        if (f < 0) f = 0
        # /proc/stat counts 10 ms ticks: below 0.2 s of wall the share is noise
        printf "%.1f %s\n", wall, ((wall < 0.2) ? "" : sprintf("%.0f", f)) }')
  RUN_WALL=${res%% *}
  RUN_LOAD=${res#* }
  printf '%-28s rc=%-3s wall=%6ss foreign_load=%3s%%  %s\n' "$tag" "$RUN_RC" "$RUN_WALL" "${RUN_LOAD:--}" "$*" >>"$WORK/commands.log"
  if ! reap_leftovers; then
    fail "$label left processes behind (killed)"
  fi
  if [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ]; then
    fail "$label timed out after $RUN_TIMEOUT s (log: $PARTS/$tag.log)"
  elif [ "$RUN_RC" != 0 ]; then
    fail "$label failed with exit status $RUN_RC (log: $PARTS/$tag.log); its last lines:"
    grep -v '^#' "$PARTS/$tag.log" | tail -n 8 | sed 's/^/    /' >&2
  fi
}

# launch LIB N LO HI TAG LABEL: one launch of LIB (ompi, mpich, gloo,
# collie) at N ranks over the sizes LO..HI, over the mode's transport; its
# CSV ends up in PARTS/TAG.csv.
NS_SEQ=0
launch() {
  l_lib=$1 l_n=$2 l_lo=$3 l_hi=$4 l_tag=$5 l_label=$6
  case $l_lib in
  ompi)
    # The anchors' flags: no binding; oversubscribed, yield when idle (what
    # Open MPI picks by itself there, stated so that it is certain).
    if [ "$l_n" -gt "$NCPU" ]; then
      set -- --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
    else
      set -- --bind-to none
    fi
    [ "$NOMMAP" = 1 ] && set -- "$@" -x "GLIBC_TUNABLES=$NOMMAP_TUN"
    l_impl=openmpi
    if [ "$TRANSPORT" = tcp ]; then
      # The anchors' tcp run, with pml ob1 named so that the btl list is
      # what carries the bytes (pml ucx would bypass it).
      set -- "$@" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
      l_impl=openmpi-tcp-lo
    fi
    run "$l_tag" "$l_label" mpirun.openmpi -np "$l_n" "$@" "$OMPI_BIN" -i "$l_impl" \
      -b "$l_lo" -e "$l_hi" -t "$TSEC" -c "$MPI_OPS"
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.csv"
    ;;
  mpich)
    if [ "$NETNS" = 1 ]; then
      # hydra hands PMI over an inherited fd: each rank enters its namespace.
      set -- mpiexec.mpich -n "$l_n" sh "$WRAP" mpi "$MPICH_BIN" -i mpich-ucxtcp-veth
    elif [ "$TRANSPORT" = tcp ]; then
      set -- env UCX_TLS=tcp,self mpiexec.mpich -n "$l_n" "$MPICH_BIN" -i mpich-ucxtcp-lo
    else
      set -- mpiexec.mpich -n "$l_n" "$MPICH_BIN" -i mpich
    fi
    set -- "$@" -b "$l_lo" -e "$l_hi" -t "$TSEC" -c "$MPI_OPS"
    [ "$NOMMAP" = 1 ] && set -- env "GLIBC_TUNABLES=$NOMMAP_TUN" "$@"
    run "$l_tag" "$l_label" "$@"
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.csv"
    ;;
  gloo)
    run "$l_tag" "$l_label" env GLOO_SOCKET_IFNAME=lo COMPARE_SH_OWNER=$$ "$GLOO_PY" "$ANCHORS/gloo_perf.py" \
      -n "$l_n" -i gloo-lo -b "$l_lo" -e "$l_hi" -t "$TSEC" -c "$GLOO_OPS"
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.csv"
    ;;
  collie)
    rm -f "$PARTS/$l_tag.csv"
    if [ "$NETNS" = 1 ]; then
      # Two collierun "nodes" of one rank each, one per namespace; rank 0
      # serves the store on its veth address. A fresh port per launch keeps
      # clear of the last launch's TIME_WAIT sockets. The namespaces share
      # the kernel and hostname, so collie takes them for one host; with
      # COLLIE_SOCKET_IFNAME set it still publishes that interface's address
      # rather than 127.0.0.1, which the other namespace cannot reach.
      NS_SEQ=$((NS_SEQ + 1))
      l_port=$((29500 + NS_SEQ % 10000))
      l_tok=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
      set -- "$BENCH" -b "$l_lo" -e "$l_hi" -f "$STEP" -o "$COLLIE_OPS" -t "$TSEC" --transport tcp
      # shellcheck disable=SC2086 # --collie-args is a word list
      run "$l_tag" "$l_label" sh "$WRAP" pair \
        env COLLIE_JOB_TOKEN="$l_tok" COLLIE_TRANSPORT=tcp COLLIE_SOCKET_IFNAME="$COMPARE_DEV0" \
        "$RUNNER" --nnodes 2 --node-rank 0 -n 1 --master-addr "$NS_ADDR0" --master-port "$l_port" \
        "$@" --csv "$PARTS/$l_tag.csv" $COLLIE_ARGS -- \
        env COLLIE_JOB_TOKEN="$l_tok" COLLIE_TRANSPORT=tcp COLLIE_SOCKET_IFNAME="$COMPARE_DEV1" \
        "$RUNNER" --nnodes 2 --node-rank 1 -n 1 --master-addr "$NS_ADDR0" --master-port "$l_port" \
        "$@" $COLLIE_ARGS
    else
      [ "$TRANSPORT" = tcp ] && set -- --transport tcp || set --
      # shellcheck disable=SC2086 # --collie-args is a word list
      run "$l_tag" "$l_label" "$RUNNER" -n "$l_n" "$BENCH" -b "$l_lo" -e "$l_hi" -f "$STEP" \
        -o "$COLLIE_OPS" -t "$TSEC" --csv "$PARTS/$l_tag.csv" "$@" $COLLIE_ARGS
    fi
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.txt"
    ;;
  esac
}

# attempt_again: after attempt $try of a launch, keeps the least loaded
# attempt so far in best and best_load, adds this one to note, and succeeds
# when another attempt is due (this one ran but saw load, retries remain).
attempt_again() {
  load=$RUN_LOAD
  if [ -z "$best" ] || { [ -n "$load" ] && [ -n "$best_load" ] && [ "$load" -lt "$best_load" ]; }; then
    best=$try best_load=$load
  fi
  note="$note${note:+; }${RUN_WALL} s, load ${load:-?} %"
  [ "$RUN_RC" = 0 ] && [ -n "$load" ] && [ "$load" -ge "$LOAD_PCT" ] && [ "$try" -le "$RETRIES" ]
}

# point LIB N LO HI: launch, again while other processes took >= LOAD_PCT %
# of the CPUs (at most RETRIES more times), keep the least loaded attempt as
# PARTS/LIB_npN_LO.{csv,log,txt} with a foreign_load_pct column appended to
# the CSV. Sets POINT_NOTE ("0.8 s, load 3 %") for the progress line.
point() {
  plib=$1 pn=$2 plo=$3 phi=$4
  key=${plib}_np${pn}_$plo
  case $plib in ompi) plabel="Open MPI" ;; mpich) plabel=MPICH ;; gloo) plabel=Gloo ;; *) plabel=collie ;; esac
  [ "$plo" = "$phi" ] && plabel="$plabel $(hsize "$plo") ($pn ranks)" || plabel="$plabel ($pn ranks)"
  try=0 best='' best_load='' note=''
  while :; do
    try=$((try + 1))
    launch "$plib" "$pn" "$plo" "$phi" "$key.try$try" "$plabel"
    attempt_again || break
  done
  for ext in csv log txt; do
    [ -f "$PARTS/$key.try$best.$ext" ] && mv "$PARTS/$key.try$best.$ext" "$PARTS/$key.$ext"
  done
  rm -f "$PARTS/$key".try*
  if [ -f "$PARTS/$key.csv" ]; then
    # Keep the header and the rows with as many fields as it has; add the load.
    awk -F, -v l="$best_load" 'NR == 1 { nf = NF; print $0 ",foreign_load_pct"; next }
      NF == nf && !/^#/ { print $0 "," l }' "$PARTS/$key.csv" >"$TMPD/part.csv"
    mv "$TMPD/part.csv" "$PARTS/$key.csv"
  fi
  POINT_NOTE=$note
  [ "$try" -gt 1 ] && POINT_NOTE="$POINT_NOTE (kept try $best)"
}

# assemble LIB N: PARTS/LIB_npN_*.{csv,log,txt} in size order into
# WORK/LIB_npN.csv (one header), .log and (collie) .txt.
assemble() {
  alib=$1 an=$2
  out=$WORK/${alib}_np$an
  : >"$out.csv.tmp"
  : >"$out.log"
  [ "$alib" = collie ] && : >"$out.txt"
  for s in $SIZES; do
    p=$PARTS/${alib}_np${an}_$s
    [ -f "$p.csv" ] && cat "$p.csv" >>"$out.csv.tmp"
    [ -f "$p.log" ] && { echo "### size $s"; cat "$p.log"; } >>"$out.log"
    [ -f "$p.txt" ] && cat "$p.txt" >>"$out.txt"
  done
  awk 'NR == 1 || !/^impl,/' "$out.csv.tmp" >"$out.csv"
  rm -f "$out.csv.tmp" "$PARTS/${alib}_np${an}_"*
  [ -s "$out.csv" ] || rm -f "$out.csv"
}

# check_csv FILE LABEL: the CSV exists and has data rows.
check_csv() {
  if [ ! -s "$1" ]; then
    fail "$2: no CSV written ($1)"
    return 1
  fi
  if [ "$(grep -c -v -e '^impl,' -e '^#' -e '^$' "$1")" -eq 0 ]; then
    fail "$2: the CSV $1 has no data rows"
    return 1
  fi
  return 0
}

# membw_line: sets MEMBW (memcpy's bandwidth from membw.csv).
membw_line() {
  MEMBW=$(awk -F, '$1 == "memcpy" { v[$2] = $6 } END {
      if (("1" in v) && ("2" in v)) printf "memcpy %.1f GB/s (1 thread), %.1f GB/s (2 threads), 64 MiB, per buffer", v[1], v[2] }' "$WORK/membw.csv" 2>/dev/null)
  [ -n "$MEMBW" ] || {
    fail "membw wrote no memcpy rows ($WORK/membw.csv)"
    MEMBW="memcpy: not measured"
  }
}

# raw_line: sets RAW (tcp_pingpong's figures as one line) and RAW_EX (the
# exchange bandwidth, GB/s per direction, "" when missing) from tcp_raw.csv.
raw_line() {
  RAW_EX=$(awk -F, '$1 == "exchange_per_direction" { print $4 }' "$WORK/tcp_raw.csv" 2>/dev/null)
  RAW=$(awk -F, -v where="$RAW_WHERE" '{ v[$1] = $4; t[$1] = $3; b[$1] = $2 }
    END { if (!("exchange_per_direction" in v)) exit
      printf "raw TCP (tcp_pingpong, %s, %s): both sides sending at once %s GB/s per direction, one way %s GB/s;", where, hs(b["exchange_per_direction"]), bw(v["exchange_per_direction"]), bw(v["stream"])
      printf " 8 B half round trip %.1f us (blocking recv), %.1f us (busy poll)", t["rtt_block_half"], t["rtt_spin_half"] }
    function bw(x) { return (x + 0 >= 0.1) ? sprintf("%.2f", x) : sprintf("%.3g", x) }
    function hs(x) { return (x >= 1048576 && x % 1048576 == 0) ? sprintf("%d MiB", x / 1048576) : ((x >= 1024 && x % 1024 == 0) ? sprintf("%d KiB", x / 1024) : sprintf("%d B", x)) }' "$WORK/tcp_raw.csv" 2>/dev/null)
  [ -n "$RAW" ] || {
    fail "tcp_pingpong wrote no exchange row ($WORK/tcp_raw.csv)"
    RAW="raw TCP: not measured"
  }
}
RAW_WHERE=loopback
[ "$NETNS" = 1 ] && RAW_WHERE="veth $COMPARE_NS0 -> $COMPARE_NS1"

# raw_tcp: tcp_pingpong at the -e size (its exchange is what the largest
# allreduce is held against), again while loaded (as point does), into
# WORK/tcp_raw.csv and .log.
raw_tcp() {
  echo "== raw TCP (tcp_pingpong, $(hsize "$MAXB_B"), $RAW_WHERE)"
  rm -f "$WORK/tcp_raw.csv" "$WORK/tcp_raw.log"
  try=0 best='' best_load='' note=''
  while :; do
    try=$((try + 1))
    if [ "$NETNS" = 1 ]; then
      # server on the second namespace's address, client in the first
      NS_SEQ=$((NS_SEQ + 1))
      port=$((29500 + NS_SEQ % 10000))
      run "tcp_raw.try$try" "raw TCP (tcp_pingpong)" sh "$WRAP" pair \
        "$TCP_BIN" -c "$NS_ADDR1" "$port" -S "$MAXB_B" -- "$TCP_BIN" -s "$port" -a "$NS_ADDR1" -S "$MAXB_B"
    else
      run "tcp_raw.try$try" "raw TCP (tcp_pingpong)" "$TCP_BIN" -l -S "$MAXB_B"
    fi
    attempt_again || break
  done
  [ -s "$PARTS/tcp_raw.try$best.out" ] && mv "$PARTS/tcp_raw.try$best.out" "$WORK/tcp_raw.csv"
  mv "$PARTS/tcp_raw.try$best.log" "$WORK/tcp_raw.log" 2>/dev/null
  rm -f "$PARTS"/tcp_raw.try*
  raw_line
  echo "   $RAW ($note)"
}

# netns_up: the two namespaces and the veth pair between them; dies (the
# EXIT trap then removes what was made) when a step fails. Namespaces of
# the same names that exist already are not touched: a concurrent run, or
# one killed by SIGKILL, which no trap sees.
netns_up() {
  for ns in "$COMPARE_NS0" "$COMPARE_NS1"; do
    if ip netns list | awk '{ print $1 }' | grep -qx "$ns"; then
      die "network namespace $ns exists already: another compare.sh --netns is running, or one was killed before it could clean up (then: ip netns del $COMPARE_NS0; ip netns del $COMPARE_NS1)"
    fi
  done
  echo "== network namespaces $COMPARE_NS0 ($NS_ADDR0 on $COMPARE_DEV0) and $COMPARE_NS1 ($NS_ADDR1 on $COMPARE_DEV1), veth pair"
  for ns in "$COMPARE_NS0" "$COMPARE_NS1"; do
    ip netns add "$ns" 2>"$TMPD/ip.err" || die "ip netns add $ns failed: $(head -n 1 "$TMPD/ip.err")"
    NS_MADE="$NS_MADE $ns"
  done
  # One command per step, so that a failure names its step.
  for step in "link add $COMPARE_DEV0 netns $COMPARE_NS0 type veth peer name $COMPARE_DEV1 netns $COMPARE_NS1" \
    "-n $COMPARE_NS0 addr add $NS_ADDR0/$NS_PREFIX dev $COMPARE_DEV0" \
    "-n $COMPARE_NS1 addr add $NS_ADDR1/$NS_PREFIX dev $COMPARE_DEV1" \
    "-n $COMPARE_NS0 link set $COMPARE_DEV0 up" "-n $COMPARE_NS1 link set $COMPARE_DEV1 up" \
    "-n $COMPARE_NS0 link set lo up" "-n $COMPARE_NS1 link set lo up"; do
    # shellcheck disable=SC2086 # a word list
    ip $step 2>"$TMPD/ip.err" || die "setting up the namespaces: 'ip $step' failed: $(head -n 1 "$TMPD/ip.err")"
  done
  export COMPARE_NS0 COMPARE_NS1 COMPARE_DEV0 COMPARE_DEV1
}

# ---- 4. the runs ----
measure() {
  : >"$WORK/commands.log"
  rm -f "$PARTS"/*
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(uname -n), kernel $(uname -r), $NCPU CPUs, $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo)"
    lscpu 2>/dev/null | grep -E 'Model name|L3' | sed 's/  */ /g'
    echo "Open MPI: $(mpirun.openmpi --version 2>/dev/null | head -n 1)"
    echo "MPICH: $(mpiexec.mpich --version 2>/dev/null | grep -m 1 Version | sed 's/.*: *//')"
    echo "collie: git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(test -n "$(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1)" && echo ' + uncommitted changes'), build $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=\(..*\)/\1/p' "$BUILD/CMakeCache.txt" 2>/dev/null || true))"
    if [ "$TRANSPORT" = tcp ]; then
      case " $LIBS " in *" gloo "*) echo "Gloo: torch $GLOO_VERSION ($GLOO_PY)" ;; esac
      [ -n "$GLOO_NOTE" ] && echo "$GLOO_NOTE"
      if [ "$NETNS" = 1 ]; then
        echo "transport: TCP between network namespaces $COMPARE_NS0 ($NS_ADDR0 on $COMPARE_DEV0) and $COMPARE_NS1 ($NS_ADDR1 on $COMPARE_DEV1), veth MTU $(ip -n "$COMPARE_NS0" link show "$COMPARE_DEV0" 2>/dev/null | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
      else
        echo "transport: TCP over loopback"
      fi
    fi
    echo "options: -n \"$NRANKS\" -b $MINB -e $MAXB -f $STEP -o $MPI_OPS -t $TSEC --retries $RETRIES$([ "$PER_LIBRARY" = 1 ] && echo ' --per-library')$([ "$NOMMAP" = 1 ] && echo ' --mpi-nommap')${COLLIE_ARGS:+ --collie-args \"$COLLIE_ARGS\"}$([ "$NETNS" = 1 ] && echo ' --netns' || { [ "$TRANSPORT" = tcp ] && echo ' --transport tcp'; })"
  } >"$WORK/env.txt"
  cat "$WORK/env.txt"

  echo "== memory bandwidth (membw, 64 MiB arrays)"
  rm -f "$WORK/membw.csv"
  run membw "membw" "$MEMBW_BIN" -s 64M -r 20 -t 1,2
  [ -s "$PARTS/membw.out" ] && mv "$PARTS/membw.out" "$WORK/membw.csv"
  mv "$PARTS/membw.log" "$WORK/membw.log" 2>/dev/null
  membw_line
  echo "   $MEMBW"
  [ "$TRANSPORT" = tcp ] && raw_tcp

  for n in $NRANKS; do
    echo "== $n ranks on $NCPU CPUs$([ "$n" -gt "$NCPU" ] && echo ', oversubscribed')${MODE_NAME:+, $MODE_NAME}"
    rm -f "$WORK/ompi_np$n".* "$WORK/mpich_np$n".* "$WORK/gloo_np$n".* "$WORK/collie_np$n".*
    if [ "$PER_LIBRARY" = 1 ]; then
      # Each library over every size in one launch; the anchors only double,
      # so with another step factor they get one launch per size. Over TCP
      # an -e the steps miss is one more launch.
      for lib in $LIBS; do
        if [ "$lib" = collie ] || [ "$STEP" = 2 ]; then
          point "$lib" "$n" "$MINB_B" "$SWEEP_HI"
          if [ -z "$SIZE_EXTRA" ]; then
            mv "$PARTS/${lib}_np${n}_$MINB_B.csv" "$WORK/${lib}_np$n.csv" 2>/dev/null
            mv "$PARTS/${lib}_np${n}_$MINB_B.log" "$WORK/${lib}_np$n.log" 2>/dev/null
            mv "$PARTS/${lib}_np${n}_$MINB_B.txt" "$WORK/${lib}_np$n.txt" 2>/dev/null
            echo "   $lib: $POINT_NOTE"
          else
            note1=$POINT_NOTE
            point "$lib" "$n" "$SIZE_EXTRA" "$SIZE_EXTRA"
            echo "   $lib: $note1; $(hsize "$SIZE_EXTRA"): $POINT_NOTE"
            assemble "$lib" "$n"
          fi
        else
          for s in $SIZES; do
            point "$lib" "$n" "$s" "$s"
            echo "   $lib $(hsize "$s"): $POINT_NOTE"
          done
          assemble "$lib" "$n"
        fi
      done
    else
      for s in $SIZES; do
        line=
        for lib in $LIBS; do
          point "$lib" "$n" "$s" "$s"
          line="$line${line:+ | }$lib $POINT_NOTE"
        done
        printf '   %-8s %s\n' "$(hsize "$s")" "$line"
      done
      for lib in $LIBS; do assemble "$lib" "$n"; done
    fi
    check_libs "$n"
  done
}

# check_libs N: check_csv for every library of this mode at N ranks.
check_libs() {
  for lib in $LIBS; do
    case $lib in ompi) l="Open MPI" ;; mpich) l=MPICH ;; gloo) l=Gloo ;; *) l=collie ;; esac
    check_csv "$WORK/${lib}_np$1.csv" "$l ($1 ranks)"
  done
}

# ---- 5. the tables ----
# join_csv N: one line per (collective, bytes), in the -o order, then by
# size, on stdout. Columns are found by name in each CSV's header.
join_csv() {
  n=$1
  files=
  for f in $LIBS; do [ -f "$WORK/${f}_np$n.csv" ] && files="$files $WORK/${f}_np$n.csv"; done
  # Over TCP three columns follow: Gloo's time and busbw, collie's time /
  # Gloo's. Gloo's names are mapped to the anchor's; its "unsupported" rows
  # are dropped.
  # shellcheck disable=SC2086 # a list of files
  awk -F, -v ops="$OPLIST" -v n="$n" -v tcp="$([ "$TRANSPORT" = tcp ] && echo 1 || echo 0)" '
    BEGIN { k = split(ops, o, " "); for (i = 1; i <= k; i++) order[o[i]] = i
            gname["all_reduce"] = "allreduce"; gname["all_gather"] = "allgather"; gname["all_to_all"] = "alltoall" }
    FNR == 1 { src = FILENAME; sub(/.*\//, "", src); sub(/_np.*/, "", src)
               split("", col)
               for (i = 1; i <= NF; i++) col[$i] = i
               next }
    /^#/ || NF < 5 { next }
    { c = $col["collective"]; if (c == "broadcast") c = "bcast"
      if (c in gname) c = gname[c]
      if ($col["bytes"] == "NA") next
      if (!(c in order) || $col["nranks"] != n) next
      key = c SUBSEP $col["bytes"]; keys[key] = 1
      t = $col["time_us"] + 0; bw = $col["busbw_GBps"] + 0
      l = ("foreign_load_pct" in col) ? $col["foreign_load_pct"] : ""
      if (src == "collie") {
        # several algorithms (--collie-args "--algo all"): keep the fastest
        if ((key in ct) && ct[key] <= t) next
        ct[key] = t; cb[key] = bw; cl[key] = l
        ca[key] = ("algorithm" in col) ? $col["algorithm"] : "?"
        cw[key] = ("wrong" in col) ? $col["wrong"] : 0
      } else { mt[src, key] = t; mb[src, key] = bw; ml[src, key] = l; have[src, key] = 1 }
    }
    function maxl(a, b) { if (a == "") return b; if (b == "") return a; return (a + 0 > b + 0) ? a : b }
    END {
      print "collective,nranks,bytes,ompi_time_us,ompi_busbw_GBps,mpich_time_us,mpich_busbw_GBps,collie_time_us,collie_busbw_GBps,collie_algorithm,collie_wrong,best_mpi,time_ratio,busbw_ratio,collie_behind,max_foreign_load_pct" ((tcp) ? ",gloo_time_us,gloo_busbw_GBps,gloo_time_ratio" : "")
      for (key in keys) {
        split(key, kk, SUBSEP); c = kk[1]; by = kk[2]
        best = ""
        if (have["ompi", key]) best = "ompi"
        if (have["mpich", key] && (best == "" || mt["mpich", key] < mt["ompi", key])) best = "mpich"
        line = c "," n "," by
        line = line "," (have["ompi", key] ? mt["ompi", key] "," mb["ompi", key] : ",")
        line = line "," (have["mpich", key] ? mt["mpich", key] "," mb["mpich", key] : ",")
        line = line "," ((key in ct) ? ct[key] "," cb[key] "," ca[key] "," cw[key] : ",,,")
        tr = ""; br = ""; behind = ""
        if (best != "" && (key in ct) && mt[best, key] > 0) {
          tr = sprintf("%.3f", ct[key] / mt[best, key]); behind = (tr + 0 > 1) ? 1 : 0
          if (mb[best, key] > 0) br = sprintf("%.3f", cb[key] / mb[best, key])
        }
        load = maxl(maxl(maxl(ml["ompi", key], ml["mpich", key]), ml["gloo", key]), cl[key])
        gl = ""
        if (tcp) {
          gr = ""
          if (have["gloo", key] && (key in ct) && mt["gloo", key] > 0) gr = sprintf("%.3f", ct[key] / mt["gloo", key])
          gl = "," (have["gloo", key] ? mt["gloo", key] "," mb["gloo", key] : ",") "," gr
        }
        printf "%d\t%s\t%s,%s,%s,%s,%s,%s%s\n", order[c], by, line, best, tr, br, behind, load, gl
      }
    }' $files >"$TMPD/join.txt"
  grep -v '	' "$TMPD/join.txt"
  grep '	' "$TMPD/join.txt" | sort -t '	' -k1,1n -k2,2n | cut -f 3
}

# table N FMT NOTES: compare_npN.csv as a text (FMT=txt) or Markdown (md)
# table, then a summary per collective. Over TCP (TABLE_REFS, TABLE_GLOO)
# the MPI columns are those of the libraries that ran, a Gloo column and
# t/gloo follow, and the raw TCP line and TABLE_LEFTOUT go above the table.
# (awk: a ternary in a print argument list must be parenthesised, or mawk
# reads ">" as a redirection.)
TABLE_REFS="ompi mpich" TABLE_GLOO=0 TABLE_LEFTOUT=
table() {
  awk -F, -v n="$1" -v fmt="$2" -v notes="$3" -v ncpu="$NCPU" -v membw="$MEMBW" -v lpct="$LOAD_PCT" \
    -v tcp="$([ "$TRANSPORT" = tcp ] && echo 1 || echo 0)" -v refs="$TABLE_REFS" -v gloo="$TABLE_GLOO" \
    -v raw="${RAW:-}" -v mode="$MODE_NAME" -v leftout="$TABLE_LEFTOUT" '
    function hsize(b) {
      if (b >= 1073741824 && b % 1073741824 == 0) return sprintf("%d GiB", b / 1073741824)
      if (b >= 1048576 && b % 1048576 == 0) return sprintf("%d MiB", b / 1048576)
      if (b >= 1024 && b % 1024 == 0) return sprintf("%d KiB", b / 1024)
      return sprintf("%d B", b)
    }
    function t(v) { return (v == "") ? "-" : ((v + 0 >= 10000) ? sprintf("%.0f", v) : sprintf("%.2f", v)) }
    function f2(v) { return (v == "") ? "-" : sprintf("%.2f", v) }
    function g3(v) { return (v == "") ? "-" : ((v + 0 >= 100) ? sprintf("%.0f", v) : sprintf("%.3g", v)) }
    function cname(c) { return (c == "bcast") ? "broadcast" : c }
    # One row from the cells C[1..NC]: collective, size, (time, busbw) per
    # MPI column, [Gloo time, busbw,] collie time, busbw, algorithm, best,
    # t/best, bw/bst, [t/gloo,] load, mark.
    function row(   s, i, k) {
      if (fmt == "md") {
        s = "|"
        for (i = 1; i <= NC; i++) s = s " " C[i] " |"
        print s
        return
      }
      s = sprintf("%-14s %7s |", C[1], C[2]); k = 3
      for (i = 1; i <= nref + gloo; i++) { s = s sprintf(" %8s %6s |", C[k], C[k + 1]); k += 2 }
      s = s sprintf(" %8s %6s %-18s |", C[k], C[k + 1], C[k + 2]); k += 3
      s = s sprintf(" %5s %6s %6s", C[k], C[k + 1], C[k + 2]); k += 3
      if (gloo) s = s sprintf(" %6s", C[k++])
      s = s sprintf(" %4s  %s", C[k], C[k + 1])
      lastlen = length(s)
      print s
    }
    function cell(v) { C[++NC] = v }
    BEGIN {
      nref = split(refs, ref, " ")
      # columns of compare_npN.csv holding each library time and busbw
      tc["ompi"] = 4; tc["mpich"] = 6; tc["gloo"] = 17
      rname["ompi"] = "OMPI"; rname["mpich"] = "MPICH"
    }
    NR == 1 {
      if (!tcp) {
        if (fmt == "md") printf "**%d ranks on %d CPUs%s.** %s.%s\n\n", n, ncpu, ((n > ncpu) ? ", oversubscribed" : ""), membw, notes
        else printf "%d ranks on %d CPUs%s: collie against the faster MPI at each point\n%s\n%s\n", n, ncpu, ((n > ncpu) ? " (oversubscribed)" : ""), membw, notes
      } else {
        if (fmt == "md") printf "**%d ranks on %d CPUs%s, %s.** %s. %s.%s%s\n\n", n, ncpu, ((n > ncpu) ? ", oversubscribed" : ""), mode, membw, raw, notes, ((leftout == "") ? "" : " " leftout)
        else {
          printf "%d ranks on %d CPUs%s, %s: collie against the faster MPI at each point%s\n", n, ncpu, ((n > ncpu) ? " (oversubscribed)" : ""), mode, ((gloo) ? ", and against Gloo" : "")
          printf "%s\n%s\n%s\n", membw, raw, notes
          if (leftout != "") print leftout
        }
      }
      if (fmt != "md") printf "time: us per call (max over ranks of the mean); busbw: GB/s (nccl-tests factors); load: %% of the CPUs other processes used%s\n\n", ((gloo) ? "; t/gloo: collie time / Gloo time" : "")
      NC = 0; cell("collective"); cell("size")
      for (i = 1; i <= nref; i++) { cell(rname[ref[i]] " us"); cell("busbw") }
      if (gloo) { cell("Gloo us"); cell("busbw") }
      cell("collie us"); cell("busbw"); cell("algorithm"); cell("best"); cell("t/best"); cell("bw/bst")
      if (gloo) cell("t/gloo")
      cell("load"); cell("")
      row()
      if (fmt == "md") {
        s = "|---|--:|"
        for (i = 1; i <= nref + gloo; i++) s = s "--:|--:|"
        s = s "--:|--:|---|---|--:|--:|"
        if (gloo) s = s "--:|"
        print s "--:|---|"
      } else if (!tcp) print "--------------------------------------------------------------------------------------------------------------------"
      else { s = ""; for (i = 0; i < lastlen; i++) s = s "-"; print s }
      next
    }
    {
      c = $1; best = $12; tr = $13; ld = $16
      mark = ""
      if ($8 == "") mark = "NO COLLIE ROW"
      else if ($11 + 0 > 0) mark = "WRONG " $11
      else if (tr != "" && tr + 0 > 1.25) mark = "<< behind"
      else if (tr != "" && tr + 0 > 1) mark = "<  behind"
      if (ld != "" && ld + 0 >= lpct) { mark = mark ((mark == "") ? "" : ", ") "loaded"; nload++ }
      NC = 0; cell(cname(c)); cell(hsize($3))
      for (i = 1; i <= nref; i++) { k = tc[ref[i]]; cell(t($k)); cell(g3($(k + 1))) }
      if (gloo) { cell(t($17)); cell(g3($18)) }
      cell(t($8)); cell(g3($9)); cell((($10 == "") ? "-" : $10)); cell(((best == "") ? "-" : best)); cell(f2(tr)); cell(f2($14))
      if (gloo) cell(f2($19))
      cell(((ld == "") ? "-" : ld)); cell(mark)
      row()
      if (!(c in seen)) { seen[c] = 1; corder[++nc] = c }
      if (gloo && $19 != "") { grows[c]++; gsum[c] += log($19 + 0) }
      if (tr == "") next
      v = tr + 0
      rows[c]++; lsum[c] += log(v); if (v > 1) beh[c]++; if (v > 1.25) beh25[c]++
      if (!(c in lo) || v < lo[c]) { lo[c] = v; los[c] = hsize($3) }
      if (!(c in hi) || v > hi[c]) { hi[c] = v; his[c] = hsize($3) }
      all++; alls += log(v); if (v > 1) allb++; if (v > 1.25) allb25++
    }
    function gm(c) { return (grows[c]) ? sprintf("%.2f", exp(gsum[c] / grows[c])) : "-" }
    END {
      print ""
      if (fmt == "md") {
        print "| collective | points | t/best > 1 | > 1.25 | geomean t/best | best t/best (size) | worst t/best (size) |" ((gloo) ? " geomean t/gloo |" : "")
        print "|---|--:|--:|--:|--:|--:|--:|" ((gloo) ? "--:|" : "")
      } else {
        print "summary (t/best: collie time / the faster MPI time at that point; below 1 collie is faster)"
        printf "%-14s %6s %10s %6s %14s %20s %20s%s\n", "collective", "points", "t/best > 1", "> 1.25", "geomean t/best", "best t/best (size)", "worst t/best (size)", ((gloo) ? sprintf(" %14s", "geomean t/gloo") : "")
      }
      for (i = 1; i <= nc; i++) {
        c = corder[i]
        if (!rows[c]) continue
        b1 = sprintf("%.2f (%s)", lo[c], los[c]); w1 = sprintf("%.2f (%s)", hi[c], his[c])
        if (fmt == "md") printf "| %s | %d | %d | %d | %.2f | %s | %s |%s\n", cname(c), rows[c], beh[c], beh25[c], exp(lsum[c] / rows[c]), b1, w1, ((gloo) ? " " gm(c) " |" : "")
        else printf "%-14s %6d %10d %6d %14.2f %20s %20s%s\n", cname(c), rows[c], beh[c], beh25[c], exp(lsum[c] / rows[c]), b1, w1, ((gloo) ? sprintf(" %14s", gm(c)) : "")
      }
      if (all) {
        if (fmt == "md") printf "| all | %d | %d | %d | %.2f | | |%s\n", all, allb, allb25, exp(alls / all), ((gloo) ? " |" : "")
        else printf "%-14s %6d %10d %6d %14.2f\n", "all", all, allb, allb25, exp(alls / all)
      }
      if (fmt != "md") {
        print "(<< behind: t/best > 1.25; <  behind: 1 < t/best <= 1.25, within this machine'"'"'s run-to-run noise;"
        printf " loaded: other processes used >= %d %% of the CPUs during one of the launches of that row: %d rows)\n", lpct, nload
      }
    }' "$WORK/compare_np$1.csv"
}

# tcp_targets N FMT: issue 8's tcp targets, checked on compare_npN.csv: the
# smallest allreduce against Open MPI (MPICH with --netns, where Open MPI
# cannot run), the largest allreduce's busbw against Gloo's and against the
# raw TCP exchange bandwidth (RAW_EX). busbw of an allreduce is the bytes
# each rank sends (and receives) per second, 2(n-1)/n x size / time, which
# is what tcp_pingpong's exchange measures per direction.
tcp_targets() {
  awk -F, -v n="$1" -v fmt="$2" -v rawex="${RAW_EX:-}" -v maxb="$MAXB_B" -v netns="$NETNS" '
    function hsize(b) {
      if (b >= 1048576 && b % 1048576 == 0) return sprintf("%d MiB", b / 1048576)
      if (b >= 1024 && b % 1024 == 0) return sprintf("%d KiB", b / 1024)
      return sprintf("%d B", b)
    }
    function bw(x) { return (x + 0 >= 0.1) ? sprintf("%.2f", x) : sprintf("%.3g", x) }
    function out(s) { print ((fmt == "md") ? "- " s : "  " s) }
    NR > 1 && $1 == "allreduce" {
      if (small == "" || $3 + 0 < small + 0) { small = $3; st = $8; so = $4; sm = $6 }
      if ($3 + 0 == maxb + 0) { big = 1; bb = $9; bg = $18 }
    }
    END {
      print ((fmt == "md") ? "tcp targets of issue 8 (" n " ranks):\n" : "tcp targets (issue 8), " n " ranks:")
      if (small == "") out("allreduce: not measured (-o has no allreduce)")
      else if (small + 0 > 1024) out(sprintf("allreduce 8 B: not measured (the sizes start at %s)", hsize(small)))
      else {
        where = (small + 0 == 8) ? "" : " (smallest size measured; the target is at 8 B)"
        if (netns) { rn = "MPICH (Open MPI cannot run across namespaces)"; rt = sm } else { rn = "Open MPI"; rt = so }
        if (st == "" || rt == "") out(sprintf("allreduce %s%s: collie %s us, %s %s us: cannot tell", hsize(small), where, ((st == "") ? "-" : st), rn, ((rt == "") ? "-" : rt)))
        else out(sprintf("allreduce %s%s: collie %.2f us, %s %.2f us: collie/%s time %.2f: %s (target: no slower)", hsize(small), where, st, rn, rt, ((netns) ? "MPICH" : "Open MPI"), st / rt, ((st + 0 <= rt + 0) ? "met" : "NOT MET")))
      }
      if (small != "" && !big) out(sprintf("allreduce %s: not measured", hsize(maxb)))
      else if (big) {
        where = (maxb + 0 == 67108864) ? "" : " (the targets are at 64 MiB)"
        if (netns) out(sprintf("allreduce %s%s: Gloo not measured (gloo_perf.py spawns both ranks in one namespace)", hsize(maxb), where))
        else if (bg == "" || bb == "") out(sprintf("allreduce %s%s: collie busbw %s GB/s, Gloo %s: cannot tell", hsize(maxb), where, ((bb == "") ? "-" : bb), ((bg == "") ? "not measured" : bg " GB/s")))
        else out(sprintf("allreduce %s%s: collie busbw %s GB/s, Gloo %s GB/s: collie/Gloo %.2f: %s (target: at least Gloo)", hsize(maxb), where, bw(bb), bw(bg), bb / bg, ((bb + 0 >= bg + 0) ? "met" : "NOT MET")))
        if (rawex == "" || bb == "") out(sprintf("allreduce %s%s: raw TCP exchange not measured: cannot tell", hsize(maxb), where))
        else out(sprintf("allreduce %s%s: collie busbw %s GB/s = %.0f %% of the raw TCP exchange, %s GB/s per direction: %s (target: at least 70 %%)", hsize(maxb), where, bw(bb), 100 * bb / rawex, bw(rawex), ((bb / rawex >= 0.7) ? "met" : "NOT MET")))
      }
      if (fmt == "md") print "\n(busbw of an allreduce = 2(n-1)/n x size / time = the bytes each rank sends, and receives, per second: what the raw exchange measures per direction.)"
    }' "$WORK/compare_np$1.csv"
}

# gloo_leftout N: the note on what Gloo could not do at N ranks.
gloo_leftout() {
  u=$(awk -F, '$5 == "unsupported" && !($2 in seen) { seen[$2] = 1; c = $2; if (c == "all_to_all") c = "alltoall"; s = s ((s == "") ? "" : ", ") c } END { print s }' "$WORK/gloo_np$1.csv" 2>/dev/null)
  [ -z "$u" ] || echo "Gloo (torch ${GLOO_VERSION:-?}) has no $u: no Gloo figure there."
}

# ---- main ----
if [ "$TABLES_ONLY" = 0 ]; then
  install_missing
  gloo_check
  build_anchors
  build_collie
  [ "$NETNS" = 1 ] && netns_up
  measure
else
  if [ -f "$WORK/env.txt" ]; then
    # The work dir must hold the runs of the mode asked for.
    opts=$(grep '^options:' "$WORK/env.txt")
    case "$opts" in *" --netns"*) was=netns ;; *" --transport tcp"*) was=tcp ;; *) was=shm ;; esac
    now=$TRANSPORT
    [ "$NETNS" = 1 ] && now=netns
    [ "$was" = "$now" ] || bad_usage "--tables-only: the runs in $WORK were made with $was, not $now (give the same --transport/--netns, or another --work)"
    cat "$WORK/env.txt"
    GLOO_VERSION=$(sed -n 's/^Gloo: torch \([^ ]*\).*/\1/p' "$WORK/env.txt")
  fi
  if [ "$TRANSPORT" = tcp ] && [ "$NETNS" = 0 ]; then
    have=0
    for n in $NRANKS; do [ -f "$WORK/gloo_np$n.csv" ] && have=1; done
    if [ "$have" = 0 ]; then
      GLOO_NOTE=$(grep '^Gloo left out' "$WORK/env.txt" 2>/dev/null)
      [ -n "$GLOO_NOTE" ] || GLOO_NOTE="Gloo left out: no gloo_npN.csv in $WORK"
      LIBS=$(echo " $LIBS " | sed 's/ gloo / /; s/^ //; s/ $//')
    fi
  fi
  for n in $NRANKS; do check_libs "$n"; done
  membw_line
  [ "$TRANSPORT" = tcp ] && raw_line
fi

if [ "$NETNS" = 1 ]; then
  TABLE_REFS=mpich
elif [ "$TRANSPORT" = tcp ]; then
  case " $LIBS " in *" gloo "*) TABLE_GLOO=1 ;; esac
fi

echo
: >"$WORK/table.txt"
: >"$WORK/table.md"
for n in $NRANKS; do
  join_csv "$n" >"$WORK/compare_np$n.csv"
  notes=$(awk -F, -v lpct="$LOAD_PCT" 'NR > 1 && $16 != "" { k++; if ($16 + 0 >= lpct) m++; if ($16 + 0 > mx) mx = $16 + 0 }
    END { if (k) printf " Other processes used up to %d %% of the CPUs during a launch; %d of %d rows saw >= %d %%.", mx, m, k, lpct }' "$WORK/compare_np$n.csv")
  if [ "$NETNS" = 1 ]; then
    TABLE_LEFTOUT="Not measured here: Open MPI (its ranks cannot reach mpirun's PMIx server from another namespace) and Gloo (gloo_perf.py spawns both ranks in one namespace)."
  elif [ "$TRANSPORT" = tcp ]; then
    if [ "$TABLE_GLOO" = 1 ]; then
      TABLE_LEFTOUT=$(gloo_leftout "$n")
    else
      TABLE_LEFTOUT="$GLOO_NOTE."
    fi
  fi
  table "$n" txt "${notes# }" >"$WORK/table_np$n.txt"
  table "$n" md "$notes" >"$WORK/table_np$n.md"
  if [ "$TRANSPORT" = tcp ]; then
    { echo; tcp_targets "$n" txt; } >>"$WORK/table_np$n.txt"
    { echo; tcp_targets "$n" md; } >>"$WORK/table_np$n.md"
  fi
  cat "$WORK/table_np$n.txt"
  echo
  { cat "$WORK/table_np$n.txt"; echo; } >>"$WORK/table.txt"
  { cat "$WORK/table_np$n.md"; echo; } >>"$WORK/table.md"
  wrong=$(awk -F, 'NR > 1 && $11 + 0 > 0 { w += $11 } END { print w + 0 }' "$WORK/compare_np$n.csv")
  [ "$wrong" = 0 ] || fail "collie reported $wrong wrong elements at $n ranks (see $WORK/collie_np$n.txt)"
done
if [ "$TRANSPORT" = tcp ]; then
  echo "files in $WORK: env.txt, commands.log, membw.csv, tcp_raw.csv, {$(echo "$LIBS" | tr ' ' ',')}_npN.csv and .log, collie_npN.txt, compare_npN.csv, table.txt, table.md"
else
  echo "files in $WORK: env.txt, commands.log, membw.csv, {ompi,mpich,collie}_npN.csv and .log, collie_npN.txt, compare_npN.csv, table.txt, table.md"
fi
if [ "$FAILED" -gt 0 ]; then
  echo "$ME: $FAILED problem(s), listed above; the tables may be incomplete" >&2
  exit 1
fi
exit 0
