#!/bin/sh
# scripts/hostile.sh - a running job against a stranger (docs/reliability.md):
# N ranks over tcp (tests/chaos/steady_rank.c) split, reduce and check their
# results ROUNDS times while tests/chaos/hostile_peer.c keeps connecting to
# the job's store and to every rank listener it finds, sending garbage,
# wrong tokens, other protocol versions, requests before a HELLO, absurd
# lengths, trickles and silence. It checks that
#   - the job finishes every round with correct results;
#   - the stranger was never accepted, and did reach both the store and the
#     ranks' listeners (else the run proved nothing);
#   - the job's log names what it refused ("refused a connection from ...");
#     by the ranks too with --reuse 0: with kept tcp connections (the
#     default, COLLIE_TCP_REUSE=1) the splits after the first say hello on
#     connections of earlier ones, so a rank's listener is closed again
#     before the stranger's bytes are read, and what it held is dropped
#     unread: never accepted, nothing to log.
#
#   sh scripts/hostile.sh [--build DIR] [-n RANKS] [--rounds N] [--reuse 0|1]
#
# Exit status: 0 when all holds, 1 otherwise, 2 for usage.
set -u
build=build nranks=4 rounds=200 reuse=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    -n) nranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --reuse) reuse=$2; shift 2 ;;
    *) echo "hostile.sh: unknown argument $1 (see the header of scripts/hostile.sh)" >&2; exit 2 ;;
  esac
done
case $reuse in 0 | 1) ;; *) echo "hostile.sh: --reuse '$reuse': expected 0 or 1" >&2; exit 2 ;; esac
for f in "$build/collierun" "$build/tests/steady_rank" "$build/tests/hostile_peer"; do
  [ -x "$f" ] || { echo "hostile.sh: $f is missing: build first" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/collie-hostile.XXXXXX")
trap 'rm -rf "$work"' EXIT
COLLIE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export COLLIE_JOB_TOKEN
CHAOS_DIR=$work "$build/tests/hostile_peer" "$nranks" >"$work/peer.out" 2>&1 &
peer=$!
CHAOS_DIR=$work COLLIE_LOG_DIR=$work COLLIE_TRANSPORT=tcp COLLIE_DEBUG=WARN COLLIE_TIMEOUT_MS=20000 \
  COLLIE_TCP_REUSE=$reuse \
  timeout 300 "$build/collierun" -n "$nranks" --timeout 240 \
  "$build/tests/steady_rank" "$rounds" >"$work/job.out" 2>&1
job=$?
touch "$work/stop"
wait $peer
peer_rc=$?
cat "$work/peer.out"
why=""
[ $job = 0 ] || why="$why the job failed (exit $job);"
[ "$(grep -c 'rounds right' "$work/job.out")" = "$nranks" ] ||
  why="$why not every rank reported its rounds right;"
[ $peer_rc = 0 ] || why="$why the stranger was accepted or failed (exit $peer_rc);"
grep -q 'store at port [1-9]' "$work/peer.out" || why="$why the stranger never found the store;"
grep -q 'listeners seen [1-9]' "$work/peer.out" || why="$why the stranger never found a rank listener;"
refused_store=$(grep -c 'store tcp://.*refused a connection\|store tcp://.*closing the connection\|dropped without a valid HELLO' "$work/job.out")
refused_rank=$(grep -c 'TCP: tcp: refused a connection' "$work/job.out")
echo "job log: $refused_store store refusal line(s), $refused_rank rank refusal line(s)"
[ "$refused_store" -gt 0 ] || why="$why the job's log names no refusal by the store;"
[ "$refused_rank" -gt 0 ] || [ "$reuse" = 1 ] || why="$why the job's log names no refusal by a rank;"
grep 'refused a connection' "$work/job.out" | sed 's/^/  /' | head -4
if [ -n "$why" ]; then
  echo "hostile: FAILED:$why"
  tail -20 "$work/job.out" | sed 's/^/    /'
  exit 1
fi
echo "hostile: ok: $nranks ranks, $rounds rounds of split + checked allreduce under attack"
