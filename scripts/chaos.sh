#!/bin/sh
# scripts/chaos.sh - chaos trials (docs/reliability.md): N ranks run a random
# sequence of collectives (tests/chaos/chaos_rank.c) and one of them, drawn
# from the trial's seed, injects one fault at a random moment: SIGKILL,
# SIGTERM, SIGSTOP (a frozen rank), over tcp shutting its sockets, with a
# private /dev/shm filling it, and on the test bed of hosts (--testbed)
# cutting its host's link. Each trial checks what the operator of a job needs:
#   - every surviving rank's call fails, and its error names the operation
#     ("#<seq>") and the victim ("world rank V"), or a rank whose own error
#     does (a rank blocked on the victim in another communicator is what a
#     rank of this one waited on; at most 3 hops);
#   - it fails within LIMIT s of the fault for a dead rank, and within the
#     deadline (COLLIE_TIMEOUT_MS) plus LIMIT for a frozen one;
#   - no rank hangs (collierun --timeout), no rank's process outlives the
#     trial, no /dev/shm/collie-* file is left;
#   - the flight-recorder dumps exist and `collie-report hang` names the victim
#     (by its world rank when the stuck operation was on a split).
# A cut link kills no rank: every rank fails, those off the cut host naming
# a rank of it (or a rank whose own error leads there, at most 3 hops), those
# on it a rank of another host, within the deadline plus LIMIT; and
# `collie-report hang` says that host lost its network ("network: ...").
# It prints one line per trial, then the detection times per fault kind, and
# every failed trial with its seed (`--seeds S` replays it exactly).
#
#   sh scripts/chaos.sh [--build DIR] [-n RANKS | -n LO-HI] [--transport shm|tcp|mixed|ofi|netofi]
#                       [--testbed 2,1,3 [--net ofi]]
#                       [--seeds "1 2 3" | --trials N] [--limit S] [--timeout-ms MS]
#                       [--faults kill,term,stop,sockets,shmfull,cut]   (only these)
#                       [--collide]
#   e.g. sh scripts/chaos.sh --trials 1000 -n 4 --transport tcp   (the benchmark)
#        sh scripts/chaos.sh --trials 2000 -n 2-8 --transport tcp --collide
# -n LO-HI draws each trial's rank count from its seed (the same seed, the
# same count). --collide makes deadlines collide: only frozen ranks (stop),
# frozen 0-2 ms into their operation (tests/chaos/chaos_rank.c), and a
# deadline of 250 ms unless --timeout-ms says otherwise, so that the ranks
# of a chain of waits give up within milliseconds of each other and each
# must still name the frozen rank (or a rank whose error does).
#
# Exit status: 0 when every trial passed, 1 otherwise, 2 for usage.
set -u
# A full /dev/shm is a fault only where it is private: as root, the trials
# run in a mount namespace of their own with a small tmpfs there (below).
if [ -z "${CHAOS_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  exec unshare -m env CHAOS_IN_NS=1 sh "$0" "$@"
fi
build=build nranks=3 transport=shm seeds="" trials=20 limit=2.0 tmo="" testbed="" net="" faults="" collide=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    -n) nranks=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --timeout-ms) tmo=$2; shift 2 ;;
    --testbed) testbed=$2; shift 2 ;;
    --net) net=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --collide) collide=1; shift ;;
    *) echo "chaos.sh: unknown argument $1 (see the header of scripts/chaos.sh)" >&2; exit 2 ;;
  esac
done
for f in "$build/collierun" "$build/tests/chaos_rank" "$build/collie-report"; do
  [ -x "$f" ] || { echo "chaos.sh: $f is missing: build first" >&2; exit 2; }
done
bad() { echo "chaos.sh: $*" >&2; exit 2; }
case $trials in '' | *[!0-9]* | 0) bad "--trials '$trials': expected a count > 0" ;; esac
case $nranks in
  *-*) lo=${nranks%-*} hi=${nranks#*-}
    case $lo$hi in '' | *[!0-9]*) bad "-n '$nranks': expected a count or LO-HI" ;; esac
    [ "$lo" -ge 2 ] && [ "$hi" -ge "$lo" ] || bad "-n '$nranks': expected 2 <= LO <= HI" ;;
  '' | *[!0-9]* | 0 | 1) bad "-n '$nranks': expected 2 ranks or more" ;;
  *) lo=$nranks hi=$nranks ;;
esac
if [ $collide = 1 ]; then
  [ -z "$faults" ] || [ "$faults" = stop ] || bad "--collide freezes ranks: --faults must be stop or unset"
  faults=stop
  [ -n "$tmo" ] || tmo=250
fi
[ -n "$tmo" ] || tmo=1500
case $tmo in *[!0-9]* | 0) bad "--timeout-ms '$tmo': expected milliseconds > 0" ;; esac
case $limit in '' | *[!0-9.]* | *.*.* | .) bad "--limit '$limit': expected seconds" ;; esac
case $seeds in *[!0-9[:space:]]*) bad "--seeds '$seeds': expected numbers" ;; esac
[ "$transport" != testbed ] || bad "--transport testbed: use --testbed HOSTS"
case $net in '' | ofi) ;; *) bad "--net '$net': expected ofi (the test bed's hosts then talk over libfabric)" ;; esac
[ -z "$net" ] || [ -n "$testbed" ] || bad "--net ofi is for the test bed (--testbed HOSTS); elsewhere: --transport ofi or netofi"
for k in $(echo "$faults" | tr ',' ' '); do
  case $k in kill | term | stop | sockets | shmfull | cut) ;; *) bad "--faults: '$k' is not kill, term, stop, sockets, shmfull or cut" ;; esac
done
case $faults in *cut*) [ -n "$testbed" ] || bad "--faults cut: a cut link needs the test bed (--testbed HOSTS)" ;; esac
[ -n "$seeds" ] || seeds=$(seq 1 "$trials")
# On the test bed of hosts (scripts/testbed.sh) the ranks are real hosts'
# ranks: shm within a host, tcp between hosts; -n is the hosts' sum.
if [ -n "$testbed" ]; then
  transport=testbed
  nranks=0
  for c in $(echo "$testbed" | tr ',' ' '); do nranks=$((nranks + c)); done
  lo=$nranks hi=$nranks
fi
case $transport in
  testbed) ranks_env="COLLIE_TRANSPORT=auto CHAOS_TESTBED=1${net:+ COLLIE_NET=$net}" ;;
  shm | tcp | ofi) ranks_env="COLLIE_TRANSPORT=$transport" ;;
  mixed) ranks_env="COLLIE_TRANSPORT=auto CHAOS_MIXED=1" ;;
  netofi) ranks_env="COLLIE_TRANSPORT=auto COLLIE_NET=ofi CHAOS_MIXED=1" ;;
  *) echo "chaos.sh: --transport $transport: expected shm, tcp, mixed, ofi or netofi" >&2; exit 2 ;;
esac
# The private tmpfs also keeps other jobs' segments out of the leftover check.
shm_full=0
if [ -n "${CHAOS_IN_NS:-}" ] && mount -t tmpfs -o size=128m chaos-shm /dev/shm; then
  case $transport in tcp | ofi) ;; *) shm_full=1 ;; esac # (ofi moves nothing through /dev/shm)
elif [ "$transport" != tcp ] && [ "$transport" != ofi ]; then
  echo "chaos.sh: no private /dev/shm (needs root and unshare): the shmfull fault is left out"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/collie-chaos.XXXXXX")
[ -n "${CHAOS_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
# How many files match a glob (0 when none does).
count() { n=0; for f in "$@"; do [ -e "$f" ] && n=$((n + 1)); done; echo $n; }
shm_count() { count /dev/shm/collie-*; }
# Whether an error message ($1) satisfies the test $2 (a function of a
# message), or the error of the rank it names first does, at most 3 hops
# on: a rank blocked in another communicator, or one whose deadline came
# first, names the rank it waited on, whose own error goes on. Reads $d.
leads() {
  m=$1 hops=0
  while [ $hops -lt 4 ]; do
    "$2" "$m" && return 0
    next=$(printf '%s' "$m" | grep -o 'world rank [0-9]*' | head -1 | awk '{print $3}')
    [ -n "$next" ] && [ -f "$d/rank$next" ] || return 1
    m=$(sed -n 2p "$d/rank$next")
    hops=$((hops + 1))
  done
  return 1
}
names_victim() { case $1 in *"world rank $victim"[!0-9]*) return 0 ;; esac; return 1; }
# A cut: off the cut host, a rank of it is named; on it, a rank of another host.
names_across() {
  for w in $(printf '%s' "$1" | grep -o 'world rank [0-9]*' | awk '{print $3}'); do
    h=$(cat "$d/host$w" 2>/dev/null)
    if [ "$mine" = "$vhost" ]; then [ "$h" != "$vhost" ] && return 0; else [ "$h" = "$vhost" ] && return 0; fi
  done
  return 1
}
failed=0 passed=0
: >"$work/times"
[ $collide = 0 ] || ranks_env="$ranks_env CHAOS_COLLIDE=1"
for seed in $seeds; do
  d="$work/t$seed"
  # This trial's rank count: -n's, or drawn from the seed within LO-HI.
  n=$(awk -v s="$seed" -v lo="$lo" -v hi="$hi" 'BEGIN { print lo + (s * 2654435761) % 4294967296 % (hi - lo + 1) }')
  mkdir -p "$d/logs"
  before=$(shm_count)
  if [ -n "$testbed" ]; then
    # shellcheck disable=SC2086
    env $ranks_env CHAOS_SHM_FULL=0 CHAOS_DIR=$d COLLIE_LOG_DIR=$d/logs COLLIE_TIMEOUT_MS=$tmo \
      CHAOS_FAULTS=$faults CHAOS_CUT_FILE=$d/cutreq COLLIE_DEBUG=NONE timeout 120 \
      sh "$(dirname "$0")/testbed.sh" --build "$build" --hosts "$testbed" --keep-going \
      --cut-on-request "$d/cutreq" --timeout $((tmo / 1000 + 15)) -- \
      "$(cd "$build" && pwd)/tests/chaos_rank" "$seed" >"$d/out" 2>&1 &
  else
    # shellcheck disable=SC2086
    env $ranks_env CHAOS_SHM_FULL=$shm_full CHAOS_FAULTS=$faults CHAOS_DIR=$d COLLIE_LOG_DIR=$d/logs \
      COLLIE_TIMEOUT_MS=$tmo COLLIE_DEBUG=NONE timeout 120 "$build/collierun" -n "$n" --keep-going \
      --grace 1 --timeout $((tmo / 1000 + 15)) "$build/tests/chaos_rank" "$seed" >"$d/out" 2>&1 &
  fi
  job=$!
  # A frozen victim never ends by itself: once every other rank has reported,
  # kill it (as an operator would), so that the trial ends now.
  while kill -0 $job 2>/dev/null; do
    if [ -f "$d/fault" ] && [ "$(cut -d' ' -f1 "$d/fault")" = stop ] &&
      [ "$(count "$d"/rank[0-9] "$d"/rank[0-9][0-9])" -ge $((n - 1)) ]; then
      kill -KILL "$(cut -d' ' -f5 "$d/fault")" 2>/dev/null
    fi
    sleep 0.1
  done
  wait $job
  rc=$?
  why="" kind="" victim="" fop="" worst=""
  if [ ! -f "$d/fault" ]; then
    why="no fault was injected (exit $rc)"
  else
    read -r kind tf fop victim _ vhost <"$d/fault"
    [ "$kind" != cut ] || [ -f "$d/cutreq.cut" ] || why="$why the test bed did not cut host $vhost's link;"
    worst=0
    for r in $(seq 0 $((n - 1))); do
      f="$d/rank$r"
      [ -f "$f" ] || continue
      if [ "$(head -1 "$f")" = "done" ]; then
        why="$why rank $r finished every operation despite the fault;"
        continue
      fi
      te=$(head -1 "$f" | awk '{print $2}')
      msg=$(sed -n 2p "$f")
      dt=$(awk -v a="$te" -v b="$tf" 'BEGIN { printf "%.3f", a - b }')
      worst=$(awk -v a="$dt" -v b="$worst" 'BEGIN { print (a > b) ? a : b }')
      echo "$kind $dt" >>"$work/times"
      case $msg in *"#"* | "collie_comm_split ("*) ;; *) why="$why rank $r's error names no operation;" ;; esac
      if [ "$kind" = shmfull ]; then
        # Every rank's split fails on the cause, the full /dev/shm, whoever
        # had to make the segment (the victim only filled it).
        case $msg in *"/dev/shm"*"too small"* | *"/dev/shm"*"No space left"*) ;;
          *) why="$why rank $r's error does not say /dev/shm is full: $msg;" ;; esac
        continue
      fi
      if [ "$kind" = cut ]; then
        # Off the cut host: a rank of it is named, or a rank whose error
        # leads there (3 hops at most); on it: a rank of another host.
        mine=$(cat "$d/host$r" 2>/dev/null)
        leads "$msg" names_across || why="$why rank $r (host $mine) does not lead across the cut of host $vhost: $msg;"
        continue
      fi
      [ "$r" = "$victim" ] && continue # its own error (sockets: it cut them itself)
      leads "$msg" names_victim || why="$why rank $r's error does not lead to world rank $victim: $msg;"
    done
    nres=$(count "$d"/rank[0-9] "$d"/rank[0-9][0-9])
    need=$((n - 1))
    [ "$kind" != cut ] || need=$n # nobody died
    [ "$nres" -ge $need ] || why="$why only $nres of $need rank(s) reported (a rank hung?);"
    bound=$limit
    case $kind in stop | cut) bound=$(awk -v l="$limit" -v t="$tmo" 'BEGIN { print t / 1000 + l }') ;; esac
    awk -v w="$worst" -v b="$bound" 'BEGIN { exit !(w > b) }' && why="$why detection took $worst s (bound $bound s);"
  fi
  if [ -f "$d/fault" ] && [ "$kind" != shmfull ]; then
    ls "$d/logs"/flight-rank*.json >/dev/null 2>&1 || why="$why no flight-recorder dump;"
    "$build/collie-report" hang "$d/logs" >"$d/report" 2>&1
    [ $? -le 1 ] || why="$why collie-report hang failed: $(tail -1 "$d/report");"
    # A dead or frozen victim writes no dump: the verdict must say so by name
    # (a victim that cut its sockets failed like the others and dumped).
    if [ "$kind" = cut ]; then
      grep -q "^network: .*testbed-h${vhost}[ :,]" "$d/report" ||
        why="$why collie-report hang does not say host testbed-h$vhost lost its link: $(grep -v '^  ' "$d/report" | tr '\n' ' ');"
    elif [ "$kind" != sockets ] &&
      ! grep -Eq "(rank $victim|\(world rank $victim\)) left no dump" "$d/report"; then
      why="$why collie-report hang does not name world rank $victim: $(tr '\n' ' ' <"$d/report");"
    fi
  fi
  for f in "$d"/pid*; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && why="$why a rank's process (pid $(cat "$f")) outlived the trial;"
  done
  rm -f /dev/shm/chaos-fill
  [ "$(shm_count)" -le "$before" ] || why="$why shared memory left in /dev/shm;"
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    what="$kind of world rank ${victim:-?}"
    [ "$kind" != cut ] || what="cut of host ${vhost:-?}'s link (by world rank ${victim:-?})"
    echo "seed $seed: $n ranks, $what at op ${fop:-?}: ok (slowest survivor ${worst:-?} s)"
  else
    failed=$((failed + 1))
    echo "seed $seed: FAILED:$why"
    sed 's/^/    /' "$d/out" | tail -5
    # The whole verdict, every rank's error with it: what a clean clone's
    # CI printed is all there is to read afterwards.
    [ ! -f "$d/report" ] || sed 's/^/    report: /' "$d/report" | head -60
  fi
done
ranks=$lo
[ "$hi" = "$lo" ] || ranks="$lo-$hi"
echo "chaos: $passed passed, $failed failed ($ranks ranks, $transport$([ $collide = 1 ] && echo ", deadlines colliding"))"
awk '{ t[$1] = t[$1] " " $2 } END { for (k in t) print k, t[k] }' "$work/times" | while read -r k rest; do
  echo "$rest" | tr ' ' '\n' | sort -n | awk -v k="$k" '
    { v[NR] = $1 } END { if (NR) printf "  %-8s detection s: n %d, min %.3f, median %.3f, p90 %.3f, max %.3f\n",
      k, NR, v[1], v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.999)], v[NR] }'
done
[ $failed -eq 0 ] && [ $passed -gt 0 ]
