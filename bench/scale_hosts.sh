#!/bin/sh
# bench/scale_hosts.sh - init + barrier + destroy as ranks grow (issue 20,
# item 7; root): 8, 16, 32 and 64 ranks on 4 hosts of the test bed
# (scripts/testbed.sh), each rank timing itself (bench/scale_rank.c). On
# this 2-core machine every point is oversubscribed (up to 32 ranks a
# core): read it as a curve, not as what a cluster would see.
#
#   sh bench/scale_hosts.sh [--build DIR] [--hosts H] [N ...]
#
# Prints, per N: init (median and max over ranks), barrier, destroy, peak
# RSS per rank (median, max), the store's connections (rank 0's
# descriptors less the median rank's) and the bytes each rank's store
# connection carried through init and the barrier (median, max; the
# kernel's TCP_INFO count, both ways).
set -u
build=build hosts=4
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    -*) echo "scale_hosts.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- 8 16 32 64
bin=$(cd "$build" 2>/dev/null && pwd)/bench/scale_rank
[ -x "$bin" ] || { echo "scale_hosts.sh: $build/bench/scale_rank is missing: build first" >&2; exit 2; }
here=$(dirname "$0")
out=$(mktemp "${TMPDIR:-/tmp}/collie-scale.XXXXXX")
trap 'rm -f "$out"' EXIT
echo "| ranks | hosts | init ms (median, max) | barrier ms (median, max) | destroy ms (median, max) | peak RSS KiB (median, max) | store connections | store bytes per rank (median, max) |"
echo "|---|---|---|---|---|---|---|---|"
for n in "$@"; do
  per=$((n / hosts)) shape=""
  for _ in $(seq 1 "$hosts"); do shape="$shape${shape:+,}$per"; done
  start=$(date +%s.%N)
  COLLIE_TIMEOUT_MS=120000 sh "$here/../scripts/testbed.sh" --build "$build" --hosts "$shape" --timeout 600 -- "$bin" >"$out" 2>&1 ||
    { echo "scale_hosts.sh: $n ranks failed:" >&2; tail -5 "$out" >&2; exit 1; }
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  grep '^scale:' "$out" | awk -v n="$n" -v h="$hosts" -v wall="$wall" '
    function med(a, k,   t, i, j) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((k + 1) / 2)] }
    function mx(a, k,   m, i) { m = a[1]; for (i = 2; i <= k; i++) if (a[i] > m) m = a[i]; return m }
    { k++; init[k] = $7; bar[k] = $9; des[k] = $11; rss[k] = $13; fds[k] = $15; sb[k] = $17; if ($3 == 0) fd0 = $15 }
    END {
      if (k != n) { printf "| %d | %d | only %d ranks reported |\n", n, h, k; exit 1 }
      mi = mx(init, k); mb = mx(bar, k); md = mx(des, k); mr = mx(rss, k); mf = med(fds, k)
      ms = mx(sb, k)
      printf "| %d | %d | %.0f, %.0f | %.1f, %.1f | %.0f, %.0f | %d, %d | %d (job %.1f s) | %d, %d |\n", n, h, med(init, k), mi, med(bar, k), mb, med(des, k), md, med(rss, k), mr, fd0 - mf, wall, med(sb, k), ms
    }' || exit 1
done
