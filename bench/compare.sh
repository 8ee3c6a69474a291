#!/bin/sh
# compare.sh - collie side by side with Open MPI and MPICH on this machine.
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
# Noise is the enemy here, so by default the three libraries take turns at
# each size (the ratios of one row are measured within seconds of each
# other), every launch records how much CPU other processes took meanwhile,
# and a launch that saw such load is measured again (--retries).
#
#   sh bench/compare.sh [-n "2 8"] [-b 8] [-e 64M] [-f 2] [-o allreduce,allgather,...]
#                       [-t 0.1] [--build DIR] [--work DIR] [--timeout S] [--retries R]
#                       [--idle-wait S] [--per-library] [--mpi-nommap]
#                       [--collie-args "..."] [--no-install] [--tables-only]
#
# Everything goes to the work dir (default BUILD/compare): the anchor
# binaries, one CSV and one log per library and rank count (ompi_npN.csv,
# mpich_npN.csv, collie_npN.csv with a foreign_load_pct column added;
# collie_npN.txt is collie-bench's own table), membw.csv, env.txt,
# commands.log (every launch: exit status, wall time, load), compare_npN.csv
# (the joined rows), table_npN.txt, table.txt and table.md (all tables).
# Exit status: 0; 1 when a run failed, timed out or left processes behind, a
# CSV is missing, or collie reported wrong results; 2 for bad usage.
#
# POSIX sh (Debian's dash) and mawk: nothing beyond the base system apart
# from the MPI packages, which it installs when they are missing.

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

usage() {
  cat <<EOF
usage: sh bench/compare.sh [options]

Runs the same collectives and sizes with Open MPI, MPICH (the anchors'
mpi_coll_perf.c) and collie-bench, one after the other, and prints per rank
count a table with collie's time and busbw relative to the faster MPI.

  -n "N ..."         rank counts (default "2 8"). More ranks than CPUs are
                     oversubscribed: Open MPI then gets --oversubscribe and
                     --mca mpi_yield_when_idle 1, as the anchors ran it
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
  --work DIR         where binaries, CSVs, logs and tables go (default BUILD/compare)
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
  --collie-args "A"  extra arguments for collie-bench (e.g. "--transport tcp")
  --no-install       never run apt-get; fail if an MPI command is missing
  --tables-only      run nothing: remake the tables from the CSVs already in
                     the work dir (give the same -n and -o)
  -h, --help         this text

Exit status: 0; 1 when a run failed or timed out, a CSV is missing or collie
reported wrong results; 2 for bad usage.
EOF
}

die() {
  echo "$ME: $*" >&2
  exit 1
}
bad_usage() {
  echo "$ME: $*" >&2
  echo "$ME: see sh bench/compare.sh --help" >&2
  exit 2
}

# ---- options ----
need_arg() { [ "$2" -ge 2 ] || bad_usage "option $1 needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
  -n) need_arg "$1" $#; NRANKS=$2; shift 2 ;;
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
  --per-library) PER_LIBRARY=1; shift ;;
  --mpi-nommap) NOMMAP=1; shift ;;
  --no-install) INSTALL=0; shift ;;
  --tables-only) TABLES_ONLY=1; shift ;;
  -h | --help) usage; exit 0 ;;
  *) bad_usage "unknown option '$1'" ;;
  esac
done

is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }
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

# The sizes of nccl-tests' -b/-e/-f: b, b*f, b*f^2, ... <= e.
SIZES=$(awk -v b="$MINB_B" -v e="$MAXB_B" -v f="$STEP" 'BEGIN { for (s = b; s <= e; s *= f) printf "%.0f ", s }')

[ -z "$WORK" ] && WORK=$BUILD/compare
mkdir -p "$WORK/parts" || die "cannot create the work dir $WORK"
WORK=$(cd "$WORK" && pwd)
BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd) || die "cannot create the build dir"
PARTS=$WORK/parts
OMPI_BIN=$WORK/mpi_coll_perf_ompi
MPICH_BIN=$WORK/mpi_coll_perf_mpich
MEMBW_BIN=$WORK/membw
BENCH=$BUILD/collie-bench
RUNNER=$BUILD/collierun
NCPU=$(nproc)
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/collie_compare.XXXXXX") || die "mktemp failed"

# ---- signals: stop the launch in progress, leave nothing behind ----
# `timeout` puts each launch in its own process group, so a Ctrl-C on the
# terminal reaches only this shell: the trap passes it on.
CUR_PID=
cleanup() { rm -rf "$TMPD"; }
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
# build OUT SRC CMD...: (re)built when missing or older than its source.
build() {
  out=$1 src=$2
  shift 2
  if [ ! -x "$out" ] || [ -n "$(find "$src" -newer "$out")" ]; then
    "$@" -o "$out" "$src" >"$TMPD/cc.log" 2>&1 || {
      cat "$TMPD/cc.log" >&2
      die "building $out failed: $*"
    }
  fi
}
build_anchors() {
  [ -f "$ANCHORS/mpi_coll_perf.c" ] && [ -f "$ANCHORS/membw.c" ] ||
    die "the MPI anchors are not in $ANCHORS (mpi_coll_perf.c, membw.c); set COLLIE_ANCHORS=DIR"
  echo "== building the anchors in $WORK"
  build "$OMPI_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.openmpi -O2 -Wall
  build "$MPICH_BIN" "$ANCHORS/mpi_coll_perf.c" mpicc.mpich -O2 -Wall
  build "$MEMBW_BIN" "$ANCHORS/membw.c" gcc -O3 -march=native -fopenmp -Wall
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
# launch; returns 1 when there was one.
reap_leftovers() {
  found=
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in
    "$OMPI_BIN" | "$MPICH_BIN" | "$BENCH" | "$RUNNER") found="$found ${p#/proc/}" ;;
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

# launch LIB N LO HI TAG LABEL: one launch of LIB (ompi, mpich, collie) at N
# ranks over the sizes LO..HI; its CSV ends up in PARTS/TAG.csv.
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
    run "$l_tag" "$l_label" mpirun.openmpi -np "$l_n" "$@" "$OMPI_BIN" -i openmpi \
      -b "$l_lo" -e "$l_hi" -t "$TSEC" -c "$MPI_OPS"
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.csv"
    ;;
  mpich)
    set -- mpiexec.mpich -n "$l_n" "$MPICH_BIN" -i mpich -b "$l_lo" -e "$l_hi" -t "$TSEC" -c "$MPI_OPS"
    [ "$NOMMAP" = 1 ] && set -- env "GLIBC_TUNABLES=$NOMMAP_TUN" "$@"
    run "$l_tag" "$l_label" "$@"
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.csv"
    ;;
  collie)
    rm -f "$PARTS/$l_tag.csv"
    # shellcheck disable=SC2086 # --collie-args is a word list
    run "$l_tag" "$l_label" "$RUNNER" -n "$l_n" "$BENCH" -b "$l_lo" -e "$l_hi" -f "$STEP" \
      -o "$COLLIE_OPS" -t "$TSEC" --csv "$PARTS/$l_tag.csv" $COLLIE_ARGS
    mv "$PARTS/$l_tag.out" "$PARTS/$l_tag.txt"
    ;;
  esac
}

# point LIB N LO HI: launch, again while other processes took >= LOAD_PCT %
# of the CPUs (at most RETRIES more times), keep the least loaded attempt as
# PARTS/LIB_npN_LO.{csv,log,txt} with a foreign_load_pct column appended to
# the CSV. Sets POINT_NOTE ("0.8 s, load 3 %") for the progress line.
point() {
  plib=$1 pn=$2 plo=$3 phi=$4
  key=${plib}_np${pn}_$plo
  case $plib in ompi) plabel="Open MPI" ;; mpich) plabel=MPICH ;; *) plabel=collie ;; esac
  [ "$plo" = "$phi" ] && plabel="$plabel $(hsize "$plo") ($pn ranks)" || plabel="$plabel ($pn ranks)"
  try=0 best='' best_load='' note=''
  while :; do
    try=$((try + 1))
    launch "$plib" "$pn" "$plo" "$phi" "$key.try$try" "$plabel"
    load=$RUN_LOAD
    if [ -z "$best" ] || { [ -n "$load" ] && [ -n "$best_load" ] && [ "$load" -lt "$best_load" ]; }; then
      best=$try best_load=$load
    fi
    note="$note${note:+; }${RUN_WALL} s, load ${load:-?} %"
    [ "$RUN_RC" = 0 ] && [ -n "$load" ] && [ "$load" -ge "$LOAD_PCT" ] && [ "$try" -le "$RETRIES" ] || break
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
    echo "options: -n \"$NRANKS\" -b $MINB -e $MAXB -f $STEP -o $MPI_OPS -t $TSEC --retries $RETRIES$([ "$PER_LIBRARY" = 1 ] && echo ' --per-library')$([ "$NOMMAP" = 1 ] && echo ' --mpi-nommap')${COLLIE_ARGS:+ --collie-args \"$COLLIE_ARGS\"}"
  } >"$WORK/env.txt"
  cat "$WORK/env.txt"

  echo "== memory bandwidth (membw, 64 MiB arrays)"
  rm -f "$WORK/membw.csv"
  run membw "membw" "$MEMBW_BIN" -s 64M -r 20 -t 1,2
  [ -s "$PARTS/membw.out" ] && mv "$PARTS/membw.out" "$WORK/membw.csv"
  mv "$PARTS/membw.log" "$WORK/membw.log" 2>/dev/null
  membw_line
  echo "   $MEMBW"

  for n in $NRANKS; do
    echo "== $n ranks on $NCPU CPUs$([ "$n" -gt "$NCPU" ] && echo ', oversubscribed')"
    rm -f "$WORK/ompi_np$n".* "$WORK/mpich_np$n".* "$WORK/collie_np$n".*
    if [ "$PER_LIBRARY" = 1 ]; then
      # Each library over every size in one launch; the anchor only doubles,
      # so with another step factor it gets one launch per size.
      for lib in ompi mpich collie; do
        if [ "$lib" = collie ] || [ "$STEP" = 2 ]; then
          point "$lib" "$n" "$MINB_B" "$MAXB_B"
          mv "$PARTS/${lib}_np${n}_$MINB_B.csv" "$WORK/${lib}_np$n.csv" 2>/dev/null
          mv "$PARTS/${lib}_np${n}_$MINB_B.log" "$WORK/${lib}_np$n.log" 2>/dev/null
          mv "$PARTS/${lib}_np${n}_$MINB_B.txt" "$WORK/${lib}_np$n.txt" 2>/dev/null
          echo "   $lib: $POINT_NOTE"
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
        for lib in ompi mpich collie; do
          point "$lib" "$n" "$s" "$s"
          line="$line${line:+ | }$lib $POINT_NOTE"
        done
        printf '   %-8s %s\n' "$(hsize "$s")" "$line"
      done
      for lib in ompi mpich collie; do assemble "$lib" "$n"; done
    fi
    check_csv "$WORK/ompi_np$n.csv" "Open MPI ($n ranks)"
    check_csv "$WORK/mpich_np$n.csv" "MPICH ($n ranks)"
    check_csv "$WORK/collie_np$n.csv" "collie ($n ranks)"
  done
}

# ---- 5. the tables ----
# join_csv N: one line per (collective, bytes), in the -o order, then by
# size, on stdout. Columns are found by name in each CSV's header.
join_csv() {
  n=$1
  files=
  for f in ompi mpich collie; do [ -f "$WORK/${f}_np$n.csv" ] && files="$files $WORK/${f}_np$n.csv"; done
  # shellcheck disable=SC2086 # a list of files
  awk -F, -v ops="$OPLIST" -v n="$n" '
    BEGIN { k = split(ops, o, " "); for (i = 1; i <= k; i++) order[o[i]] = i }
    FNR == 1 { src = FILENAME; sub(/.*\//, "", src); sub(/_np.*/, "", src)
               split("", col)
               for (i = 1; i <= NF; i++) col[$i] = i
               next }
    /^#/ || NF < 5 { next }
    { c = $col["collective"]; if (c == "broadcast") c = "bcast"
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
      print "collective,nranks,bytes,ompi_time_us,ompi_busbw_GBps,mpich_time_us,mpich_busbw_GBps,collie_time_us,collie_busbw_GBps,collie_algorithm,collie_wrong,best_mpi,time_ratio,busbw_ratio,collie_behind,max_foreign_load_pct"
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
        load = maxl(maxl(ml["ompi", key], ml["mpich", key]), cl[key])
        printf "%d\t%s\t%s,%s,%s,%s,%s,%s\n", order[c], by, line, best, tr, br, behind, load
      }
    }' $files >"$TMPD/join.txt"
  grep -v '	' "$TMPD/join.txt"
  grep '	' "$TMPD/join.txt" | sort -t '	' -k1,1n -k2,2n | cut -f 3
}

# table N FMT NOTES: compare_npN.csv as a text (FMT=txt) or Markdown (md)
# table, then a summary per collective. (awk: a ternary in a print argument
# list must be parenthesised, or mawk reads ">" as a redirection.)
table() {
  awk -F, -v n="$1" -v fmt="$2" -v notes="$3" -v ncpu="$NCPU" -v membw="$MEMBW" -v lpct="$LOAD_PCT" '
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
    function row(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) {
      if (fmt == "md")
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14
      else
        printf "%-14s %7s | %8s %6s | %8s %6s | %8s %6s %-18s | %5s %6s %6s %4s  %s\n", a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14
    }
    NR == 1 {
      if (fmt == "md") printf "**%d ranks on %d CPUs%s.** %s.%s\n\n", n, ncpu, ((n > ncpu) ? ", oversubscribed" : ""), membw, notes
      else printf "%d ranks on %d CPUs%s: collie against the faster MPI at each point\n%s\n%s\n", n, ncpu, ((n > ncpu) ? " (oversubscribed)" : ""), membw, notes
      if (fmt != "md") printf "time: us per call (max over ranks of the mean); busbw: GB/s (nccl-tests factors); load: %% of the CPUs other processes used\n\n"
      row("collective", "size", "OMPI us", "busbw", "MPICH us", "busbw", "collie us", "busbw", "algorithm", "best", "t/best", "bw/bst", "load", "")
      if (fmt == "md") print "|---|--:|--:|--:|--:|--:|--:|--:|---|---|--:|--:|--:|---|"
      else print "--------------------------------------------------------------------------------------------------------------------"
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
      row(cname(c), hsize($3), t($4), g3($5), t($6), g3($7), t($8), g3($9), (($10 == "") ? "-" : $10), ((best == "") ? "-" : best), f2(tr), f2($14), ((ld == "") ? "-" : ld), mark)
      if (!(c in seen)) { seen[c] = 1; corder[++nc] = c }
      if (tr == "") next
      v = tr + 0
      rows[c]++; lsum[c] += log(v); if (v > 1) beh[c]++; if (v > 1.25) beh25[c]++
      if (!(c in lo) || v < lo[c]) { lo[c] = v; los[c] = hsize($3) }
      if (!(c in hi) || v > hi[c]) { hi[c] = v; his[c] = hsize($3) }
      all++; alls += log(v); if (v > 1) allb++; if (v > 1.25) allb25++
    }
    END {
      print ""
      if (fmt == "md") {
        print "| collective | points | t/best > 1 | > 1.25 | geomean t/best | best t/best (size) | worst t/best (size) |"
        print "|---|--:|--:|--:|--:|--:|--:|"
      } else {
        print "summary (t/best: collie time / the faster MPI time at that point; below 1 collie is faster)"
        printf "%-14s %6s %10s %6s %14s %20s %20s\n", "collective", "points", "t/best > 1", "> 1.25", "geomean t/best", "best t/best (size)", "worst t/best (size)"
      }
      for (i = 1; i <= nc; i++) {
        c = corder[i]
        if (!rows[c]) continue
        b1 = sprintf("%.2f (%s)", lo[c], los[c]); w1 = sprintf("%.2f (%s)", hi[c], his[c])
        if (fmt == "md") printf "| %s | %d | %d | %d | %.2f | %s | %s |\n", cname(c), rows[c], beh[c], beh25[c], exp(lsum[c] / rows[c]), b1, w1
        else printf "%-14s %6d %10d %6d %14.2f %20s %20s\n", cname(c), rows[c], beh[c], beh25[c], exp(lsum[c] / rows[c]), b1, w1
      }
      if (all) {
        if (fmt == "md") printf "| all | %d | %d | %d | %.2f | | |\n", all, allb, allb25, exp(alls / all)
        else printf "%-14s %6d %10d %6d %14.2f\n", "all", all, allb, allb25, exp(alls / all)
      }
      if (fmt != "md") {
        print "(<< behind: t/best > 1.25; <  behind: 1 < t/best <= 1.25, within this machine'"'"'s run-to-run noise;"
        printf " loaded: other processes used >= %d %% of the CPUs during one of the launches of that row: %d rows)\n", lpct, nload
      }
    }' "$WORK/compare_np$1.csv"
}

# ---- main ----
if [ "$TABLES_ONLY" = 0 ]; then
  install_missing
  build_anchors
  build_collie
  measure
else
  [ -f "$WORK/env.txt" ] && cat "$WORK/env.txt"
  for n in $NRANKS; do
    check_csv "$WORK/ompi_np$n.csv" "Open MPI ($n ranks)"
    check_csv "$WORK/mpich_np$n.csv" "MPICH ($n ranks)"
    check_csv "$WORK/collie_np$n.csv" "collie ($n ranks)"
  done
  membw_line
fi

echo
: >"$WORK/table.txt"
: >"$WORK/table.md"
for n in $NRANKS; do
  join_csv "$n" >"$WORK/compare_np$n.csv"
  notes=$(awk -F, -v lpct="$LOAD_PCT" 'NR > 1 && $16 != "" { k++; if ($16 + 0 >= lpct) m++; if ($16 + 0 > mx) mx = $16 + 0 }
    END { if (k) printf " Other processes used up to %d %% of the CPUs during a launch; %d of %d rows saw >= %d %%.", mx, m, k, lpct }' "$WORK/compare_np$n.csv")
  table "$n" txt "${notes# }" >"$WORK/table_np$n.txt"
  table "$n" md "$notes" >"$WORK/table_np$n.md"
  cat "$WORK/table_np$n.txt"
  echo
  { cat "$WORK/table_np$n.txt"; echo; } >>"$WORK/table.txt"
  { cat "$WORK/table_np$n.md"; echo; } >>"$WORK/table.md"
  wrong=$(awk -F, 'NR > 1 && $11 + 0 > 0 { w += $11 } END { print w + 0 }' "$WORK/compare_np$n.csv")
  [ "$wrong" = 0 ] || fail "collie reported $wrong wrong elements at $n ranks (see $WORK/collie_np$n.txt)"
done
echo "files in $WORK: env.txt, commands.log, membw.csv, {ompi,mpich,collie}_npN.csv and .log, collie_npN.txt, compare_npN.csv, table.txt, table.md"
if [ "$FAILED" -gt 0 ]; then
  echo "$ME: $FAILED problem(s), listed above; the tables may be incomplete" >&2
  exit 1
fi
exit 0
