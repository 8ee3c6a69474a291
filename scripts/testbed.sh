#!/bin/sh
# scripts/testbed.sh - a test bed of hosts on this machine (issue 20; root):
# H "hosts", each a network namespace with its own UTS namespace (its own
# hostname, so its own collie host identity without COLLIE_HOST_ID) and its
# own /dev/shm, joined by veth pairs to a bridge (in a namespace of its own),
# optionally rate-limited per link; then one collierun per host, as a real
# multi-node job (--nprocs, so hosts may have uneven rank counts), running
# PROGRAM. Everything it made (namespaces, links, processes) goes when it
# exits, however it exits (a failed run, Ctrl-C, SIGTERM).
#
#   sh scripts/testbed.sh [--hosts 2,1,3] [--rate 10gbit] [--delay 50us]
#                         [--jitter 10us] [--loss PCT] [--timeout S]
#                         [--build DIR] [--tag] -- PROGRAM [ARGS...]
#
#   --hosts LIST   ranks per host (default 2,2: two hosts of two ranks)
#   --rate R       each link's rate both ways (tc tbf: 10gbit, 1gbit, 100mbit)
#   --delay D, --jitter J, --loss P
#                  the one-way latency between two hosts (50us, 1ms; D +- J,
#                  uniform) and the percentage of frames lost: tc netem on
#                  each host's eth0 where the kernel has sch_netem, else the
#                  hosts meet through build/tests/delay_switch (a learning
#                  switch in user space that holds each frame D +- J, in
#                  order) instead of the bridge; --rate still applies
#   --timeout S    collierun's --timeout on every host (default 300)
#   --keep-going   a failed rank or host stops nothing (collierun --keep-going
#                  on every host; the others are not stopped): jobs that go on
#                  after a death, chaos trials
#   --tag          prefix each output line with its host ("[h1] ...")
#   --outside      run PROGRAM once, in this namespace, instead of a
#                  collierun per host: for another launcher (mpiexec) whose
#                  ranks enter their hosts themselves with
#                  scripts/testbed_enter.sh (it reads TESTBED_NS and
#                  TESTBED_HOSTS, set here)
#   --cut-link I@S take host I's link down S seconds after the start (its
#                  veth end on the bridge: whatever it sends or is sent is
#                  lost, as when a cable is pulled; scripts/linkcut.sh)
#   --cut-on-request FILE  take a host's link down when the job asks: a
#                  rank writes the host's index to FILE (whole: write a
#                  temporary file and rename it), and within ~20 ms that
#                  host's link goes down as with --cut-link; the time of
#                  the cut goes to FILE.cut (scripts/chaos.sh's cut fault)
#
# Host i is 10.213.N.(i+1)/24 on its eth0 (N from the script's pid, so that
# two test beds can run at once); rank 0 is on host 0, which serves the
# store. PROGRAM sees TESTBED_HOST (its host's index) and the usual
# collierun variables. Exit status: 0 when every host's collierun exited 0,
# else the first failure's status; 2 for usage or a missing capability.
set -u
hosts=2,2 rate="" delay="" jitter="" loss="" timeout=300 build=build tag=0 keep="" cut="" outside=0 cut_req=""
usage() { echo "usage: sh scripts/testbed.sh [--hosts 2,1,3] [--rate R] [--delay D] [--jitter J] [--loss P] [--timeout S] [--build DIR] [--tag] [--keep-going] [--cut-link I@S] [--cut-on-request FILE] -- PROGRAM [ARGS...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --jitter) jitter=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --tag) tag=1; shift ;;
    --keep-going) keep=--keep-going; shift ;;
    --cut-link) cut=$2; shift 2 ;;
    --cut-on-request) cut_req=$2; shift 2 ;;
    --outside) outside=1; shift ;;
    --) shift; break ;;
    *) echo "testbed.sh: unknown argument $1" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "testbed.sh: no program to run" >&2; usage; }
case ,$hosts, in
  *[!0-9,]* | ,, | *,,* | *,0,* | *,0[0-9]*) echo "testbed.sh: --hosts '$hosts': expected counts like 2,1,3" >&2; exit 2 ;;
esac
nhosts=$(echo "$hosts" | tr ',' '\n' | grep -c .)
cut_host="" cut_after=""
if [ -n "$cut" ]; then
  cut_host=${cut%@*} cut_after=${cut#*@}
  case $cut in *@*) ;; *) cut_host="" ;; esac
  case $cut_host in *[!0-9]* | "") echo "testbed.sh: --cut-link '$cut': expected HOST@SECONDS" >&2; exit 2 ;; esac
  case $cut_after in *[!0-9.]* | *.*.* | . | "") echo "testbed.sh: --cut-link '$cut': expected HOST@SECONDS" >&2; exit 2 ;; esac
  [ "$cut_host" -lt "$nhosts" ] || { echo "testbed.sh: --cut-link: there is no host $cut_host of $nhosts" >&2; exit 2; }
fi
[ "$(id -u)" = 0 ] || { echo "testbed.sh: needs root (network namespaces)" >&2; exit 2; }
for tool in ip unshare tc; do
  command -v $tool >/dev/null 2>&1 || { echo "testbed.sh: needs $tool (iproute2, util-linux)" >&2; exit 2; }
done
run=$(cd "$build" 2>/dev/null && pwd)/collierun
[ -x "$run" ] || [ $outside = 1 ] || { echo "testbed.sh: $build/collierun is missing: build first" >&2; exit 2; }

id=$$
net=10.213.$((id % 250)).
ns_br=ctb$id-br
made=""
pids=""
cleanup() {
  trap - EXIT INT TERM
  for p in $pids ${cut_pid:-} ${req_pid:-} ${switch_pid:-}; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.2
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  # A namespace's processes are its collierun's: gone above. Deleting a
  # namespace deletes the veth ends in it, and with them their peers.
  for ns in $made; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null; ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

fail() { echo "testbed.sh: $*" >&2; exit 2; }
ip netns add "$ns_br" || fail "cannot make network namespace $ns_br"
made="$ns_br"
ip -n "$ns_br" link add br0 type bridge && ip -n "$ns_br" link set br0 up && ip -n "$ns_br" link set lo up ||
  fail "cannot make the bridge"

# Microseconds of a tc time ("50us", "1ms", "1.5ms", "2s"), or nothing.
usec() {
  echo "$1" | awk '/^[0-9.]+(us|ms|s)$/ { n = $0 + 0; u = $0; sub(/^[0-9.]+/, "", u)
    printf "%d\n", n * (u == "us" ? 1 : (u == "ms" ? 1000 : 1000000)) }'
}
switch=""
if [ -n "$delay$jitter$loss" ]; then
  [ -n "$delay" ] || delay=0us
  delay_us=$(usec "$delay") jitter_us=$(usec "${jitter:-0us}")
  [ -n "$delay_us" ] || fail "--delay '$delay': expected a time such as 50us or 1ms"
  [ -n "$jitter_us" ] && [ "$jitter_us" -le "$delay_us" ] || fail "--jitter '$jitter': expected a time no longer than --delay"
  case ${loss:-0} in *[!0-9.]* | *.*.* | .) fail "--loss '$loss': expected a percentage" ;; esac
  # netem where the kernel has it; else the switch in user space.
  probe=ctb$id-probe
  if ip netns add "$probe" 2>/dev/null && ip netns exec "$probe" tc qdisc add dev lo root netem delay 1us 2>/dev/null; then
    switch=""
  else
    switch=$(cd "$build" 2>/dev/null && pwd)/tests/delay_switch
    [ -x "$switch" ] || fail "no tc netem in this kernel, and $build/tests/delay_switch (its stand-in) is missing: build first"
  fi
  ip netns del "$probe" 2>/dev/null
fi

# The link's shaping, on one veth end (egress: each end shapes its own direction).
shape() { # ns dev where: where "host" takes the delay (once per path: one way)
  if [ "$3" = host ] && [ -n "$delay$jitter$loss" ] && [ -z "$switch" ]; then
    args="delay $delay${jitter:+ $jitter}${loss:+ loss $loss%}${rate:+ rate $rate}"
    # shellcheck disable=SC2086
    ip netns exec "$1" tc qdisc add dev "$2" root netem $args || fail "tc netem $args failed on $2"
  elif [ -n "$rate" ]; then
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 50ms ||
      fail "tc tbf rate $rate failed on $2"
  fi
}

i=0
for _ in $(echo "$hosts" | tr "," " "); do
  ns=ctb$id-h$i
  ip netns add "$ns" || fail "cannot make network namespace $ns"
  made="$made $ns"
  ip link add "ctb${id}h$i" type veth peer name "ctb${id}b$i" || fail "cannot make a veth pair"
  ip link set "ctb${id}h$i" netns "$ns" && ip link set "ctb${id}b$i" netns "$ns_br" || fail "cannot move the veth ends"
  ip -n "$ns" link set "ctb${id}h$i" name eth0 &&
    ip -n "$ns" addr add "$net$((i + 1))/24" dev eth0 &&
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || fail "cannot set up host $i's eth0"
  if [ -n "$switch" ]; then
    ip -n "$ns_br" link set "ctb${id}b$i" up || fail "cannot bring up host $i's switch port"
  else
    ip -n "$ns_br" link set "ctb${id}b$i" master br0 && ip -n "$ns_br" link set "ctb${id}b$i" up ||
      fail "cannot attach host $i to the bridge"
  fi
  shape "$ns" eth0 host
  shape "$ns_br" "ctb${id}b$i" switch
  ports="${ports:-} ctb${id}b$i"
  i=$((i + 1))
done
if [ -n "$switch" ]; then
  # shellcheck disable=SC2086
  ip netns exec "$ns_br" "$switch" --delay-us "$delay_us" --jitter-us "$jitter_us" --loss "${loss:-0}" \
    --seed "$id" $ports &
  switch_pid=$!
  sleep 0.2
  kill -0 "$switch_pid" 2>/dev/null || fail "the delay switch did not start"
fi

if [ $outside = 1 ]; then
  # Another launcher's job: its ranks enter ctb$id-hI themselves. In the
  # background, so that a signal reaches the traps (and the cleanup) at once.
  TESTBED_NS=ctb$id-h TESTBED_HOSTS=$hosts timeout "$timeout" "$@" &
  pids="$pids $!"
  wait $!
  exit $?
fi
: "${COLLIE_JOB_TOKEN:=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
export COLLIE_JOB_TOKEN
status_dir=$(mktemp -d "${TMPDIR:-/tmp}/collie-testbed.XXXXXX")
i=0
for _ in $(echo "$hosts" | tr "," " "); do
  ns=ctb$id-h$i
  (
    # Its own hostname and /dev/shm, as a host has; then its collierun. The
    # status goes through a file: a pipeline's is its last command's.
    {
      TESTBED_HOST=$i ip netns exec "$ns" unshare --uts --mount sh -c '
        hostname "testbed-h$1" && mount -t tmpfs -o size=1g testbed-shm /dev/shm || exit 2
        shift
        exec "$@"' sh "$i" "$run" --nprocs "$hosts" --node-rank "$i" --master-addr "${net}1" \
        --master-port 29500 --timeout "$timeout" $keep "$@"
      # Whole or not at all: the loop below reads it while we write.
      echo $? >"$status_dir/.h$i" && mv "$status_dir/.h$i" "$status_dir/h$i"
    } 2>&1 | if [ $tag = 1 ]; then sed -u "s/^/[h$i] /"; else cat; fi
  ) &
  pids="$pids $!"
  i=$((i + 1))
done
if [ -n "$cut_host" ]; then
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM # its sleep goes with it
    sleep "$cut_after" &
    s=$!
    wait "$s" && ip -n "$ns_br" link set "ctb${id}b$cut_host" down &&
      echo "testbed.sh: host $cut_host's link is down" >&2
  ) &
  cut_pid=$! # not waited for: a cut due after the job ended is dropped
fi
if [ -n "$cut_req" ]; then
  (
    trap 'exit 0' TERM
    while [ ! -f "$cut_req" ]; do sleep 0.02; done
    h=$(cat "$cut_req")
    case $h in '' | *[!0-9]*) echo "testbed.sh: $cut_req: '$h' is not a host index" >&2; exit 0 ;; esac
    if [ "$h" -lt "$nhosts" ] && ip -n "$ns_br" link set "ctb${id}b$h" down; then
      date +%s.%N >"$cut_req.cut"
      echo "testbed.sh: host $h's link is down (asked for in $cut_req)" >&2
    else
      echo "testbed.sh: $cut_req: cannot cut host $h's link" >&2
    fi
  ) &
  req_pid=$!
fi
# Wait for every host; when one fails, stop the others (all processes of
# their namespaces), as collierun stops a node's ranks when one fails.
rc=0 stopped=0
while :; do
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  if [ "$rc" = 0 ]; then
    for f in "$status_dir"/h*; do
      [ -f "$f" ] && [ "$(cat "$f")" != 0 ] && rc=$(cat "$f") && echo "testbed.sh: host ${f##*/h} failed (exit $rc)" >&2
    done
  fi
  if [ "$rc" != 0 ] && [ $stopped = 0 ] && [ -z "$keep" ]; then
    stopped=1
    for ns in $made; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -TERM 2>/dev/null; done
  fi
  [ $alive = 1 ] || break
  sleep 0.1
done
for p in $pids; do wait "$p"; done
for i in $(seq 0 $((nhosts - 1))); do
  [ -f "$status_dir/h$i" ] || { [ "$rc" = 0 ] && rc=1 && echo "testbed.sh: host $i reported no status" >&2; }
done
[ -z "${cut_pid:-}" ] || kill "$cut_pid" 2>/dev/null
[ -z "${req_pid:-}" ] || kill "$req_pid" 2>/dev/null
rm -rf "$status_dir"
exit "$rc"
