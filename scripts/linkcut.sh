#!/bin/sh
# scripts/linkcut.sh - a host loses its link in the middle of a job (issue
# 20; root): on the test bed (scripts/testbed.sh), every rank runs checked
# allreduces (tests/chaos/linkcut_rank) until one fails, and host CUT's
# link is taken down after AFTER seconds. Each trial passes when
#   - every rank fails, none hangs, and the test bed is gone afterwards;
#   - each fails within the deadline (COLLIE_TIMEOUT_MS) + 2 s of silence;
#   - each rank's error names a rank of another host, by its host, and
#     some rank off the cut host names the cut host ("host testbed-hCUT").
#     (Three hosts in a chain: a rank whose own deadline passes before the
#     news from across the chain arrives names the silent neighbour host.)
#
#   sh scripts/linkcut.sh [--build DIR] [--timeout-ms MS] [SHAPE:CUT ...]
#
# Default trials: 2,2:1 2,1,3:1 2,1,3:2 1,2,1:0 (hosts:cut host). Exit 0
# when every trial passed, 1 otherwise, 2 for usage.
set -u
build=build timeout_ms=2000
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --timeout-ms) timeout_ms=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "linkcut.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- 2,2:1 2,1,3:1 2,1,3:2 1,2,1:0
rank_bin=$(cd "$build" 2>/dev/null && pwd)/tests/linkcut_rank
[ -x "$rank_bin" ] || { echo "linkcut.sh: $build/tests/linkcut_rank is missing: build first" >&2; exit 2; }
here=$(dirname "$0")
out=$(mktemp "${TMPDIR:-/tmp}/collie-linkcut.XXXXXX")
logs=$(mktemp -d "${TMPDIR:-/tmp}/collie-linkcut-logs.XXXXXX") # the ranks' flight dumps, not the working directory
trap 'rm -rf "$out" "$logs"' EXIT
limit=$(awk "BEGIN { print $timeout_ms / 1000 + 2 }")
failed=0
for trial in "$@"; do
  case $trial in
    *[!0-9,:]* | *:*:*) echo "linkcut.sh: '$trial': expected HOSTS:CUT, e.g. 2,1,3:1" >&2; exit 2 ;;
    [0-9]*:[0-9]*) ;;
    *) echo "linkcut.sh: '$trial': expected HOSTS:CUT, e.g. 2,1,3:1" >&2; exit 2 ;;
  esac
  shape=${trial%:*} cut=${trial#*:}
  nranks=$(($(echo "$shape" | tr ',' '+')))
  start=$(date +%s) before=$(ip netns list 2>/dev/null | grep -c '^ctb')
  COLLIE_LOG_DIR=$logs COLLIE_TIMEOUT_MS=$timeout_ms sh "$here/testbed.sh" --build "$build" --hosts "$shape" --keep-going \
    --timeout 60 --cut-link "$cut@1.5" -- "$rank_bin" 1000000000 >"$out" 2>&1
  rc=$? took=$(($(date +%s) - start)) bad=""
  [ $rc = 3 ] || bad="$bad; the test bed exited $rc, not 3 (every rank failing)"
  lines=$(grep -c '^linkcut_rank: rank' "$out")
  [ "$lines" = "$nranks" ] || bad="$bad; $lines of $nranks ranks reported a failure"
  # Each report: its silence within the limit, and a host across the cut named.
  bad=$bad$(grep '^linkcut_rank: rank' "$out" | awk -v cut="$cut" -v limit="$limit" '
    {
      host = $5; s = $8 + 0; ok = 0; rest = $0
      if (s > limit) printf "; rank %s waited %.2f s (limit %.2f)", $3, s, limit
      while (match(rest, /host testbed-h[0-9]+/)) {
        h = substr(rest, RSTART + 14, RLENGTH - 14)
        if (h != host) ok = 1
        if (h == cut && host != cut) named = 1
        rest = substr(rest, RSTART + RLENGTH)
      }
      if (!ok) printf "; rank %s (host %s) names no other host", $3, host
    }
    END { if (!named) printf "; no rank off host %s names it", cut }')
  [ "$(ip netns list 2>/dev/null | grep -c '^ctb')" -le "$before" ] || bad="$bad; a test bed namespace is left"
  if [ -n "$bad" ]; then
    echo "linkcut: hosts $shape, host $cut cut: FAIL${bad} (${took} s)"
    sed "s/^/    /" "$out" | grep -v "collierun:" | tail -20
    failed=1
  else
    echo "linkcut: hosts $shape, host $cut cut: every rank failed within ${limit} s of silence, naming the other side (${took} s)"
  fi
done
exit $failed
