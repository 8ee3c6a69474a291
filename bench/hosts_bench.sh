#!/bin/sh
# bench/hosts_bench.sh - hierarchical against flat collie on the test bed of
# hosts (issue 20, item 6; root): one collie-bench --algo all per shape and
# link rate (scripts/testbed.sh), then per collective and size the
# hierarchical time, the best flat algorithm's, their ratio, collie's own
# pick (a second, automatic run), and MPICH's time on the same hosts where
# mpicc.mpich and the anchors' mpi_coll_perf.c are there (mpiexec.mpich with
# one fake host per test-bed host, each rank entering its host through
# scripts/testbed_enter.sh, so MPICH uses shared memory inside a host and
# tcp between hosts, as collie does).
#
#   sh bench/hosts_bench.sh [--build DIR] [--out DIR] [--ops LIST] [--max SIZE]
#                           [SHAPE@RATE[@DELAY] ...]
#
# Default: 2,2@10gbit 2,2@1gbit 1,2,1,2@1gbit. RATE is tc's (10gbit, 1gbit,
# or "none" for an unshaped link); DELAY the one-way latency between two
# hosts (50us, 1ms: scripts/testbed.sh --delay, through its user-space
# switch where the kernel has no netem). --ops (default allreduce,
# allgather,reduce_scatter,broadcast,alltoall) and --max (default 16M)
# narrow the sweep.
# Ratios are from one run: flat/hier above 1, hierarchical is faster;
# MPICH/collie above 1, collie is faster. 4 ranks on 2 cores are
# oversubscribed, where MPICH's busy polling costs it most.
set -u
build=build out=${TMPDIR:-/tmp}/collie-hosts-bench ops=allreduce,allgather,reduce_scatter,broadcast,alltoall max=16M
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    -*) echo "hosts_bench.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- 2,2@10gbit 2,2@1gbit 1,2,1,2@1gbit
bench=$(cd "$build" 2>/dev/null && pwd)/collie-bench
[ -x "$bench" ] || { echo "hosts_bench.sh: $build/collie-bench is missing: build first" >&2; exit 2; }
here=$(dirname "$0")
mkdir -p "$out"
anchors=${COLLIE_ANCHORS:-$here/../../shared/anchors}
mpich=""
if command -v mpicc.mpich >/dev/null 2>&1 && [ -f "$anchors/mpi_coll_perf.c" ]; then
  mpich=$out/mpi_coll_perf_mpich
  mpicc.mpich -O2 -o "$mpich" "$anchors/mpi_coll_perf.c" || mpich=""
fi
[ -n "$mpich" ] || echo "hosts_bench.sh: no MPICH (mpicc.mpich, the anchors' mpi_coll_perf.c): collie alone" >&2
for cfg in "$@"; do
  shape=${cfg%%@*} rest=${cfg#*@} delay=""
  rate=${rest%%@*}
  [ "$rest" = "$rate" ] || delay=${rest#*@}
  tag="$out/hosts-$(echo "$shape" | tr ',' '+')-$rate${delay:+-$delay}"
  shaping=""
  [ "$rate" = none ] || shaping="--rate $rate"
  [ -z "$delay" ] || shaping="$shaping --delay $delay"
  for mode in all auto; do
    algo=""
    [ $mode = all ] && algo="--algo all"
    # shellcheck disable=SC2086
    sh "$here/../scripts/testbed.sh" --build "$build" --hosts "$shape" $shaping --timeout 900 -- \
      "$bench" -o "$ops" -b 8 -e "$max" -f 8 $algo -t 0.05 --csv "$tag-$mode.csv" >"$tag-$mode.txt" 2>&1 ||
      { echo "hosts_bench.sh: collie at $shape, $rate failed: see $tag-$mode.txt" >&2; exit 1; }
  done
  : >"$tag-mpich.csv"
  if [ -n "$mpich" ]; then
    # MPICH's own launcher, one fake host per test-bed host, each rank in
    # its host's namespace (scripts/testbed_enter.sh).
    hl="" i=0
    for n in $(echo "$shape" | tr ',' ' '); do hl="$hl${hl:+,}h$i:$n" i=$((i + 1)); done
    # MPI_Finalize across the namespaces can hang after the last point
    # (seen here, 4 ranks spinning): the run ends 10 s after its ranks say
    # every result was verified.
    # shellcheck disable=SC2086
    sh "$here/../scripts/testbed.sh" --hosts "$shape" $shaping --outside --timeout 900 -- \
      mpiexec.mpich -launcher fork -hosts "$hl" -n "$(($(echo "$shape" | tr ',' '+')))" \
      sh "$here/../scripts/testbed_enter.sh" "$mpich" -i mpich -b 8 -e "$max" -t 0.05 \
      -c "$(echo $ops | sed s/broadcast/bcast/)" >"$tag-mpich.csv" 2>"$tag-mpich.err" &
    tb=$!
    while kill -0 $tb 2>/dev/null; do
      if grep -q "all results verified" "$tag-mpich.err" 2>/dev/null; then
        sleep 10
        kill -TERM $tb 2>/dev/null
        break
      fi
      sleep 1
    done
    wait $tb 2>/dev/null
    grep -q "all results verified" "$tag-mpich.err" ||
      echo "hosts_bench.sh: MPICH at $shape, $rate failed: see $tag-mpich.err" >&2
  fi
  echo "## hosts $shape, links $rate${delay:+, $delay one way}"
  python3 - "$tag-all.csv" "$tag-auto.csv" "$tag-mpich.csv" <<'PY'
import collections, csv, sys
alls = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    alls[(r["collective"], int(r["bytes"]))][r["algorithm"]] = float(r["time_us"])
auto = {}
for r in csv.DictReader(open(sys.argv[2])):
    auto[(r["collective"], int(r["bytes"]))] = (r["algorithm"], float(r["time_us"]))
mpich = {}
for line in open(sys.argv[3]):
    f = line.strip().split(",")
    if len(f) == 7 and f[0] == "mpich":
        mpich[(f[1], int(f[3]))] = float(f[4])
print("| collective | bytes | collie's pick, us | hierarchical us | best flat, us | flat/hier | MPICH us | MPICH/collie |")
print("|---|---|---|---|---|---|---|---|")
def cell(v):
    return "-" if v is None else f"{v:.1f}"
for key in sorted(alls):
    c, b = key
    d = alls[key]
    h = d.get("hierarchical")
    flat = {k: v for k, v in d.items() if k != "hierarchical"}
    k = min(flat, key=flat.get) if flat else None
    a = auto.get(key)
    m = mpich.get(key)
    pick = f"{a[0]} {cell(a[1])}" if a else "-"
    best = f"{k} {cell(flat[k])}" if k else "-"
    fh = f"{flat[k] / h:.2f}" if h and k else "-"
    mc = f"{m / a[1]:.2f}" if m and a else "-"
    print(f"| {c} | {b} | {pick} | {cell(h)} | {best} | {fh} | {cell(m)} | {mc} |")
PY
done
