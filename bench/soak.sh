#!/bin/sh
# soak.sh - the soak of issue 19 (docs/reliability.md, "Soak"): bench/soak
# under collierun at N ranks (default 4), once per transport (shm, then tcp),
# with the timing log on. Each run is a random mix of checked collectives
# (10^6 small and 10^4 large per rank by default) and then split/destroy
# cycles (10^4); rank 0 prints the curve of resident memory, descriptors,
# threads and mean call time, and a verdict. This script shows the curves as
# they come, then reads every rank's timing-rank*.meta for the records the
# timing log wrote and dropped, and ends with one table.
#
#   sh bench/soak.sh [--quick] [-n N] [--transports "shm tcp"] [--small N] [--large N]
#                    [--splits N] [--samples K] [--seed S] [--timeout S] [--build DIR]
#                    [--work DIR] [--keep-timing]
#
# Exit status: 0 when every run passed (soak's own verdict: no rank's
# descriptors or threads grew, its memory by at most the slack, every result
# right); 1 when a run failed, timed out or grew; 2 for bad usage.
# "A && B || bad_usage" is meant (bad_usage only exits).
# shellcheck disable=SC2015
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=4
TRANSPORTS="shm tcp"
SMALL=1000000
LARGE=10000
SPLITS=10000
SAMPLES=20
SEED=1
RUN_TIMEOUT=3600
BUILD=$ROOT/build
WORK=
KEEP=0

usage() {
  cat <<EOF
usage: sh bench/soak.sh [options]

The soak: bench/soak under collierun, one run per transport, with the timing
log on; prints each run's curve and verdict, the timing log's written and
dropped records per rank, and a summary table.

  --quick           short counts: 20000 small, 200 large, 200 splits (well
                    under a minute per transport here)
  -n N              ranks (default 4)
  --transports L    transports to run, in order (default "shm tcp")
  --small N         small collectives per rank (default 1000000)
  --large N         large collectives per rank (default 10000)
  --splits N        split/collective/destroy cycles (default 10000)
  --samples K       points per phase (default 20, at least 3)
  --seed S          the random sequence (default 1)
  --timeout S       limit of each run (default 3600 s): a hung run fails the
                    script, not the machine
  --build DIR       build dir with collierun and bench/soak (default build)
  --work DIR        logs and timing logs (default BUILD/soak)
  --keep-timing     keep the timing CSVs (default: only their .meta sidecars)
  -h, --help        this text
EOF
}

# shellcheck source=bench/sh_lib.sh
. "$ROOT/bench/sh_lib.sh"

while [ $# -gt 0 ]; do
  case $1 in
  --quick) SMALL=20000 LARGE=200 SPLITS=200; shift ;;
  -n) need_arg "$1" $#; N=$2; shift 2 ;;
  --transports) need_arg "$1" $#; TRANSPORTS=$2; shift 2 ;;
  --small) need_arg "$1" $#; SMALL=$2; shift 2 ;;
  --large) need_arg "$1" $#; LARGE=$2; shift 2 ;;
  --splits) need_arg "$1" $#; SPLITS=$2; shift 2 ;;
  --samples) need_arg "$1" $#; SAMPLES=$2; shift 2 ;;
  --seed) need_arg "$1" $#; SEED=$2; shift 2 ;;
  --timeout) need_arg "$1" $#; RUN_TIMEOUT=$2; shift 2 ;;
  --build) need_arg "$1" $#; BUILD=$2; shift 2 ;;
  --work) need_arg "$1" $#; WORK=$2; shift 2 ;;
  --keep-timing) KEEP=1; shift ;;
  -h | --help) usage; exit 0 ;;
  *) bad_usage "unknown argument '$1'" ;;
  esac
done
is_uint "$N" && [ "$N" -ge 1 ] && [ "$N" -le 64 ] || bad_usage "-n: '$N' is not a rank count in 1..64"
for t in $TRANSPORTS; do
  case $t in shm | tcp | auto) ;; *) bad_usage "--transports: '$t' is not shm, tcp or auto" ;; esac
done
[ -n "$TRANSPORTS" ] || bad_usage "--transports: empty"
is_uint "$SMALL" || bad_usage "--small: '$SMALL' is not a count"
is_uint "$LARGE" || bad_usage "--large: '$LARGE' is not a count"
is_uint "$SPLITS" || bad_usage "--splits: '$SPLITS' is not a count"
is_uint "$SAMPLES" && [ "$SAMPLES" -ge 3 ] || bad_usage "--samples: '$SAMPLES' is not a count of at least 3"
is_uint "$SEED" || bad_usage "--seed: '$SEED' is not a whole number"
is_uint "$RUN_TIMEOUT" && [ "$RUN_TIMEOUT" -ge 1 ] || bad_usage "--timeout: '$RUN_TIMEOUT' is not a whole number of seconds"

BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build dir $BUILD (cmake -S . -B build && cmake --build build)"
[ -x "$BUILD/collierun" ] && [ -x "$BUILD/bench/soak" ] || die "$BUILD has no collierun or bench/soak: build them first"
[ -n "$WORK" ] || WORK=$BUILD/soak
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd) || die "cannot create $WORK"

FAILED=0
: >"$WORK/summary.txt"
for t in $TRANSPORTS; do
  log=$WORK/soak-$t.log tdir=$WORK/timing-$t
  rm -rf "$tdir"
  echo "== soak, $N ranks, COLLIE_TRANSPORT=$t, timing log in $tdir"
  start=$(date +%s)
  # collierun stops the job at --timeout (exit 124); timeout(1) is the
  # backstop should collierun itself hang. Rank 0 prints the curve; the
  # library's warnings (the timing log's drops at close) come on stderr.
  # COLLIE_LOG_DIR: comms.csv and, should a call fail, the flight dumps.
  { COLLIE_TRANSPORT=$t COLLIE_TIMING_LOG=$tdir COLLIE_LOG_DIR=$WORK timeout -k 10 $((RUN_TIMEOUT + 30)) \
    "$BUILD/collierun" -n "$N" --timeout "$RUN_TIMEOUT" "$BUILD/bench/soak" --small "$SMALL" \
    --large "$LARGE" --splits "$SPLITS" --samples "$SAMPLES" --seed "$SEED" 2>&1
    echo "$?" >"$WORK/rc-$t"; } | tee "$log"
  rc=$(cat "$WORK/rc-$t")
  wall=$(($(date +%s) - start))
  case $rc in
  0) status=pass ;;
  124 | 137) status="timed out"; FAILED=1 ;;
  *) status="failed ($rc)"; FAILED=1 ;;
  esac
  grep -q 'verdict.*GREW' "$log" && status="grew"

  # The timing log's own count of what it wrote and dropped, per rank.
  echo "-- timing log ($t): records written and dropped per rank (timing-rank*.meta)"
  written=0 dropped=0
  for meta in "$tdir"/timing-rank*.meta; do
    [ -f "$meta" ] || { echo "   no .meta in $tdir"; break; }
    w=$(sed -n 's/^records_written=//p' "$meta")
    d=$(sed -n 's/^records_dropped=//p' "$meta")
    q=$(sed -n 's/^queue_capacity=//p' "$meta")
    r=$(sed -n 's/^rank=//p' "$meta")
    echo "   rank $r: written $w, dropped $d (queue $q)"
    written=$((written + ${w:-0})) dropped=$((dropped + ${d:-0}))
  done
  [ "$KEEP" = 1 ] || rm -f "$tdir"/*.csv
  echo "   all ranks: written $written, dropped $dropped"
  echo

  # One summary row: first and last point of each phase (largest among the
  # ranks), each rank's largest growth (the verdict) and late/early times.
  awk -v t="$t" -v st="$status" -v wall="$wall" -v w="$written" -v d="$dropped" '
    function ratio(phase, what,   s) { s = lat[phase, what]; return s == "" ? "-" : s }
    function or_dash(s) { return s == "" ? "-" : s }
    $1 == "mix" || $1 == "split" {
      if (!(($1, "first") in pt)) pt[$1, "first"] = $4 " / " $5 " / " $6
      pt[$1, "last"] = $4 " / " $5 " / " $6; ops[$1] = $2; secs[$1] = $3
    }
    /^verdict .*the most any rank grew/ {
      ph = $2; sub(/:$/, "", ph)
      match($0, /rss [-+][0-9.]+ MiB/); g = substr($0, RSTART + 4, RLENGTH - 8)
      match($0, /fds [-+][0-9]+/); g = g " / " substr($0, RSTART + 4, RLENGTH - 4)
      match($0, /threads [-+][0-9]+/); grow[ph] = g " / " substr($0, RSTART + 8, RLENGTH - 8)
    }
    /^verdict .*late\/early/ { ph = $2; sub(/:$/, "", ph); lat[ph, $3] = $7 }
    END {
      printf "| %s | %s s | %s | %s ops, %s s | %s -> %s | %s | %s | %s | %s cycles, %s s | %s -> %s | %s | %s | %s | %s |\n",
        t, wall, st, or_dash(ops["mix"]), or_dash(secs["mix"]), or_dash(pt["mix", "first"]),
        or_dash(pt["mix", "last"]), or_dash(grow["mix"]), ratio("mix", "small"), ratio("mix", "large"),
        or_dash(ops["split"]), or_dash(secs["split"]), or_dash(pt["split", "first"]),
        or_dash(pt["split", "last"]), or_dash(grow["split"]), ratio("split", "cycle"), w, d
    }' "$log" >>"$WORK/summary.txt"
done

echo "== summary: $N ranks, seed $SEED, $SMALL small + $LARGE large collectives, $SPLITS splits per run"
echo "   rss MiB / fds / threads: the largest among the ranks at the first and the last point;"
echo "   growth: the most any rank's own numbers grew between them; t late/early: mean call"
echo "   (cycle) time of the last window over the second's; drops: the timing log's, all ranks"
echo
echo "| transport | wall | result | mix | rss/fds/threads first -> last | growth | small t late/early | large t late/early | splits | rss/fds/threads first -> last | growth | cycle t late/early | timing log written | dropped |"
echo "|---|--:|---|--:|---|---|--:|--:|--:|---|---|--:|--:|--:|"
cat "$WORK/summary.txt"
echo
echo "logs in $WORK: soak-TRANSPORT.log, timing-TRANSPORT/ (and flight-rank*.json if a call failed)"
exit "$FAILED"
