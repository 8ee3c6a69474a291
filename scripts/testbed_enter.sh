#!/bin/sh
# scripts/testbed_enter.sh - puts one rank of another launcher's job into
# its host of the test bed (scripts/testbed.sh --outside), then runs CMD:
#
#   mpiexec.mpich -launcher fork -hosts h0:2,h1:2 -n 4 \
#     sh scripts/testbed_enter.sh ./mpi_coll_perf ...
#
# The rank (PMI_RANK, OMPI_COMM_WORLD_RANK or RANK) picks the host from
# TESTBED_HOSTS (ranks host after host, as collierun places them); the rank
# then runs in that host's network namespace, TESTBED_NS<host>, with UCX
# kept to tcp over its eth0. /dev/shm stays the machine's: the launcher's
# ranks of one host must share it (they do not get a private one).
set -u
[ $# -ge 1 ] || { echo "testbed_enter.sh: no command" >&2; exit 2; }
: "${TESTBED_NS:?testbed_enter.sh: run it under scripts/testbed.sh --outside}"
: "${TESTBED_HOSTS:?testbed_enter.sh: run it under scripts/testbed.sh --outside}"
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${RANK:-}}}
[ -n "$rank" ] || { echo "testbed_enter.sh: no rank (PMI_RANK, OMPI_COMM_WORLD_RANK, RANK)" >&2; exit 2; }
host=0 first=0
for n in $(echo "$TESTBED_HOSTS" | tr ',' ' '); do
  [ "$rank" -lt $((first + n)) ] && break
  first=$((first + n)) host=$((host + 1))
done
exec ip netns exec "$TESTBED_NS$host" env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 TESTBED_HOST=$host "$@"
