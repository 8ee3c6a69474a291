#!/bin/sh
# netns_wrap.sh - run benchmark processes inside the two network namespaces
# that `bench/compare.sh --netns` sets up (and tears down) around its runs.
#
# Why: to measure TCP between two "hosts" on one machine, the two ranks of a
# job must live in different network namespaces, joined by a veth pair, so
# that their bytes cross a real (virtual) link instead of loopback. Each
# launcher needs a different way in:
#
#   sh bench/netns_wrap.sh mpi CMD [ARG...]
#       For mpiexec.mpich (hydra): `mpiexec.mpich -n 2 sh netns_wrap.sh mpi
#       ./bench_binary ...`. Rank PMI_RANK (0 or 1) runs in namespace 0 or 1,
#       with UCX restricted to TCP over that namespace's veth end. This works
#       because hydra hands PMI to the rank over an inherited file descriptor;
#       Open MPI's ranks would have to reach mpirun's PMIx server by address,
#       which another namespace cannot.
#   sh bench/netns_wrap.sh pair CMD0 [ARG...] -- CMD1 [ARG...]
#       Two separate programs, CMD0 in namespace 0 and CMD1 in namespace 1, at
#       the same time (collierun --nnodes 2 once per node; tcp_pingpong client
#       and server). CMD1 starts first. When one fails, the other is stopped
#       (SIGTERM) rather than left waiting for a peer that is gone.
#       Exit status: that of the command that failed first, else 0.
#
# The names come from the environment, set by compare.sh, so that they are
# written down once: COMPARE_NS0, COMPARE_NS1 (namespaces), COMPARE_DEV0,
# COMPARE_DEV1 (their veth ends). Needs root (ip netns exec).
# Exit status: the command's; 2 for bad usage.

# shellcheck disable=SC2317 # the trap calls its function
set -u
ME=netns_wrap.sh

usage_err() {
  echo "$ME: $*" >&2
  echo "usage: sh $ME mpi CMD [ARG...] | sh $ME pair CMD0 [ARG...] -- CMD1 [ARG...]" >&2
  exit 2
}

for v in COMPARE_NS0 COMPARE_NS1 COMPARE_DEV0 COMPARE_DEV1; do
  eval "val=\${$v:-}"
  [ -n "$val" ] || usage_err "$v is not set (compare.sh --netns sets it; this wrapper is its helper)"
done
[ $# -ge 1 ] || usage_err "no mode given"
mode=$1
shift

case $mode in
mpi)
  [ $# -ge 1 ] || usage_err "mpi: no command given"
  case ${PMI_RANK:-} in
  0) ns=$COMPARE_NS0 dev=$COMPARE_DEV0 ;;
  1) ns=$COMPARE_NS1 dev=$COMPARE_DEV1 ;;
  '') usage_err "mpi: PMI_RANK is not set (run it under mpiexec.mpich)" ;;
  *) usage_err "mpi: PMI_RANK=$PMI_RANK, but there are only two namespaces (ranks 0 and 1)" ;;
  esac
  exec ip netns exec "$ns" env UCX_TLS=tcp,self UCX_NET_DEVICES="$dev" "$@"
  ;;
pair)
  # Split "$@" at the first "--": n0 words of CMD0, then CMD1.
  n0=0 seen=0
  for a do
    if [ "$a" = -- ]; then
      seen=1
      break
    fi
    n0=$((n0 + 1))
  done
  [ "$seen" = 1 ] || usage_err "pair: no '--' between the two commands"
  [ "$n0" -ge 1 ] || usage_err "pair: no command before '--'"
  [ $# -gt $((n0 + 1)) ] || usage_err "pair: no command after '--'"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/netns_wrap.XXXXXX") || exit 1
  # side I NS CMD...: runs CMD in NS, writes its pid to dir/pidI and its
  # exit status to dir/rcI; when it fails and the other side is still
  # running, stops that one (SIGTERM): a peer that is gone would otherwise
  # leave it waiting until its own timeout.
  side() {
    i=$1 ns=$2
    shift 2
    o=$((1 - i))
    ip netns exec "$ns" "$@" &
    echo $! >"$dir/pid$i"
    wait $!
    rc=$?
    echo "$rc" >"$dir/rc$i"
    [ "$rc" = 0 ] && return 0
    [ -f "$dir/first" ] || echo "$i $rc" >"$dir/first"
    k=0
    while [ ! -f "$dir/pid$o" ] && [ "$k" -lt 50 ]; do
      sleep 0.1
      k=$((k + 1))
    done
    if [ -f "$dir/pid$o" ] && [ ! -f "$dir/rc$o" ]; then
      echo "$ME: the command in $ns failed (status $rc); stopping the other one" >&2
      kill -TERM "$(cat "$dir/pid$o")" 2>/dev/null
    fi
  }
  # A signal (compare.sh's timeout, Ctrl-C) stops both sides.
  on_signal() {
    trap '' INT TERM HUP
    for i in 0 1; do
      [ -f "$dir/pid$i" ] && [ ! -f "$dir/rc$i" ] && kill -TERM "$(cat "$dir/pid$i")" 2>/dev/null
    done
    wait
    rm -rf "$dir"
    exit 143
  }
  trap on_signal INT TERM HUP
  (
    shift $((n0 + 1))
    side 1 "$COMPARE_NS1" "$@"
  ) &
  s1=$!
  # Keep only CMD0's words in "$@" (the for list was fixed when it started).
  n=$# i=0
  for a do
    i=$((i + 1))
    [ "$i" -le "$n0" ] && set -- "$@" "$a"
  done
  shift "$n"
  side 0 "$COMPARE_NS0" "$@" &
  s0=$!
  wait "$s0"
  wait "$s1"
  if [ -f "$dir/first" ]; then
    read -r who rc <"$dir/first"
    echo "$ME: the command in namespace $who failed first (status $rc)" >&2
  else
    rc=0
    for i in 0 1; do [ -f "$dir/rc$i" ] || rc=1; done
  fi
  rm -rf "$dir"
  exit "$rc"
  ;;
*) usage_err "unknown mode '$mode' (mpi or pair)" ;;
esac
