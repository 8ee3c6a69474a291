#!/bin/sh
# bench/hosts_bench.sh - hierarchical against flat collie on the test bed of
# hosts (issue 20, item 6; root): one collie-bench --algo all per shape and
# link rate (scripts/testbed.sh), then per collective and size the
# hierarchical time, the best flat algorithm's, their ratio, and what the
# automatic choice would have run (collie-bench's own pick at that size is
# not measured separately: --algo all times each by name).
#
#   sh bench/hosts_bench.sh [--build DIR] [--out DIR] [SHAPE@RATE ...]
#
# Default: 2,2@10gbit 2,2@1gbit 1,2,1,2@1gbit. RATE is tc's (10gbit, 1gbit,
# or "none" for an unshaped link). This kernel has no sch_netem, so the
# link delays of the issue (50 us, 1 ms) cannot be set here (docs/hosts.md).
# Ratios are flat/hierarchical in one run: above 1, hierarchical is faster.
set -u
build=build out=${TMPDIR:-/tmp}/collie-hosts-bench
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -*) echo "hosts_bench.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- 2,2@10gbit 2,2@1gbit 1,2,1,2@1gbit
bench=$(cd "$build" 2>/dev/null && pwd)/collie-bench
[ -x "$bench" ] || { echo "hosts_bench.sh: $build/collie-bench is missing: build first" >&2; exit 2; }
here=$(dirname "$0")
mkdir -p "$out"
for cfg in "$@"; do
  shape=${cfg%@*} rate=${cfg#*@}
  csv="$out/hosts-$(echo "$shape" | tr ',' '+')-$rate.csv"
  shaping=""
  [ "$rate" = none ] || shaping="--rate $rate"
  # shellcheck disable=SC2086
  sh "$here/../scripts/testbed.sh" --build "$build" --hosts "$shape" $shaping --timeout 900 -- \
    "$bench" -o allreduce,allgather,reduce_scatter,broadcast,alltoall -b 8 -e 16M -f 8 \
    --algo all -t 0.05 --csv "$csv" >"$out/hosts-$(echo "$shape" | tr ',' '+')-$rate.txt" 2>&1 ||
    { echo "hosts_bench.sh: the run at $shape, $rate failed: see $out" >&2; exit 1; }
  echo "## hosts $shape, links $rate"
  python3 - "$csv" <<'PY'
import collections, csv, sys
by = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    by[(r["collective"], int(r["bytes"]))][r["algorithm"]] = float(r["time_us"])
print("| collective | bytes | hierarchical us | best flat | flat us | flat/hier |")
print("|---|---|---|---|---|---|")
for (c, b), d in sorted(by.items()):
    h = d.get("hierarchical")
    flat = {k: v for k, v in d.items() if k != "hierarchical"}
    if h is None or not flat:
        continue
    k = min(flat, key=flat.get)
    print(f"| {c} | {b} | {h:.1f} | {k} | {flat[k]:.1f} | {flat[k] / h:.2f} |")
PY
done
