#!/bin/sh
# bench/ofi_compare.sh - collie's ofi transport against collie's own tcp and
# against Open MPI's ofi path (--mca pml cm --mca mtl ofi) on the same
# libfabric provider (tcp;ofi_rxm), one rank on each of two hosts of the
# test bed (scripts/testbed.sh; root), with libfabric's own floor
# (fi_pingpong between the two hosts) printed above the table (issue 40,
# point 4).
#
#   sh bench/ofi_compare.sh [--build DIR] [-b 8] [-e 64M] [-o allreduce,allgather,alltoall]
#                           [--rounds R] [--out DIR]
#
# Each round runs the three one after the other (collie tcp, collie ofi,
# Open MPI), at every size of -b..-e (x2 steps, 0.1 s per size); the table
# gives each one's best time over the rounds and the ratios ofi/tcp and
# ofi/Open MPI (below 1: collie's ofi is faster). sendrecv (8 B..-e) is
# collie's alone (the MPI anchor has none): its 8 B time is what the floor
# bounds. Open MPI's ranks enter their hosts through scripts/testbed_enter.sh
# from an mpirun started inside host 0, whose PMIx server then listens on
# host 0's eth0 (PMIX_MCA_ptl_tcp_if_include), where host 1 reaches it.
#
# Needs: the build's collie-bench and collierun, libfabric's fi_pingpong
# (libfabric-bin), mpicc.openmpi and mpirun (libopenmpi-dev, openmpi-bin),
# ../shared/anchors/mpi_coll_perf.c (COLLIE_ANCHORS). What is missing is
# said, and that column left out. Everything goes to --out (default
# $TMPDIR/collie-ofi-compare): the CSVs, the logs, table.md, and best.csv (each
# one's best time per point in the columns collie-report bench draws).
set -u
build=build minb=8 maxb=64M ops=allreduce,allgather,alltoall rounds=2 out=${TMPDIR:-/tmp}/collie-ofi-compare
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    -o) ops=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "ofi_compare.sh: unknown argument $1 (see its header)" >&2; exit 2 ;;
  esac
done
case $rounds in '' | *[!0-9]* | 0) echo "ofi_compare.sh: --rounds '$rounds': expected a count > 0" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" 2>/dev/null && pwd) || { echo "ofi_compare.sh: no build directory" >&2; exit 2; }
[ -x "$build/collie-bench" ] || { echo "ofi_compare.sh: $build/collie-bench is missing: build first" >&2; exit 2; }
mkdir -p "$out" || exit 2
anchors=${COLLIE_ANCHORS:-$here/../shared/anchors}
ompi=""
if command -v mpicc.openmpi >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && [ -f "$anchors/mpi_coll_perf.c" ]; then
  mpicc.openmpi -O2 -o "$out/mpi_coll_perf_ompi" "$anchors/mpi_coll_perf.c" && ompi=$out/mpi_coll_perf_ompi
fi
[ -n "$ompi" ] || echo "ofi_compare.sh: no Open MPI (mpicc.openmpi, mpirun, the anchors' mpi_coll_perf.c): its column is left out" >&2
command -v fi_pingpong >/dev/null 2>&1 || echo "ofi_compare.sh: no fi_pingpong (libfabric-bin): the floor is left out" >&2
prov="tcp;ofi_rxm"

# One round, run inside the test bed (--outside: this shell sees TESTBED_NS).
cat >"$out/round.sh" <<EOF
set -u
r=\$1
ns0=\${TESTBED_NS}0 ns1=\${TESTBED_NS}1
ip0=\$(ip netns exec "\$ns0" ip -4 -o addr show eth0 | awk '{print \$4}' | cut -d/ -f1)
if [ "\$r" = 1 ] && command -v fi_pingpong >/dev/null 2>&1; then
  ip netns exec "\$ns0" fi_pingpong -p "$prov" -e rdm -I 2000 -S 8 >"$out/pingpong_server.log" 2>&1 &
  sleep 0.5
  ip netns exec "\$ns1" fi_pingpong -p "$prov" -e rdm -I 2000 -S 8 "\$ip0" >"$out/pingpong.log" 2>&1
  wait
fi
for t in tcp ofi; do
  net=tcp; [ \$t = ofi ] && net=ofi
  sh "$here/scripts/testbed.sh" --build "$build" --hosts 1,1 --timeout 600 -- env COLLIE_NET=\$net \
    "$build/collie-bench" -o $ops,sendrecv -b $minb -e $maxb -t 0.1 --csv "$out/collie_\${t}_r\$r.csv" \
    >"$out/collie_\${t}_r\$r.log" 2>&1 || echo "ofi_compare.sh: collie over \$t failed (round \$r): $out/collie_\${t}_r\$r.log" >&2
done
if [ -n "$ompi" ]; then
  ip netns exec "\$ns0" env PMIX_MCA_ptl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
    mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml cm --mca mtl ofi \
    --mca mtl_ofi_provider_include "$prov" --mca btl self -x TESTBED_NS -x TESTBED_HOSTS \
    sh "$here/scripts/testbed_enter.sh" "$ompi" -i openmpi-ofi -b $minb -e $maxb -t 0.1 -c $ops \
    >"$out/ompi_r\$r.csv" 2>"$out/ompi_r\$r.log" || echo "ofi_compare.sh: Open MPI failed (round \$r): $out/ompi_r\$r.log" >&2
fi
EOF
r=1
while [ $r -le "$rounds" ]; do
  echo "== round $r of $rounds"
  sh "$here/scripts/testbed.sh" --build "$build" --hosts 1,1 --outside -- sh "$out/round.sh" $r || exit 1
  r=$((r + 1))
done

# The table: best time per (collective, size) over the rounds.
{
  echo "# collie ofi against collie tcp and Open MPI ofi ($prov), 2 hosts of the test bed, one rank each"
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), git $(git -C "$here" rev-parse --short HEAD 2>/dev/null), $(nproc) cores, best of $rounds round(s)"
  [ -s "$out/pingpong.log" ] && sed -n '/bytes/,$p' "$out/pingpong.log" | head -3 | sed 's/^/# fi_pingpong: /'
  echo
  echo "| collective | bytes | collie tcp us | collie ofi us | Open MPI ofi us | ofi/tcp | ofi/Open MPI |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
  awk -F, '
    $1 == "impl" || NF < 5 || /^#/ { next }
    {
      who = FILENAME ~ /ompi_r/ ? "ompi" : FILENAME ~ /collie_ofi_r/ ? "ofi" : "tcp"
      if (who == "ompi") { key = $2 "," $4; t = $5 } else { key = $2 "," $6; t = $8 }
      if (!(key in seen)) { seen[key] = 1; order[n++] = key }
      if (!((who, key) in best) || t + 0 < best[who, key] + 0) best[who, key] = t
    }
    function f(x) { return x == "" ? "-" : sprintf("%.1f", x) }
    function r(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
    END {
      print "impl,collective,nranks,bytes,time_us" > bestcsv
      for (i = 0; i < n; i++) {
        split(order[i], k, ",")
        tc = best["tcp", order[i]]; of = best["ofi", order[i]]; om = best["ompi", order[i]]
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", k[1], k[2], f(tc), f(of), f(om), r(of, tc), r(of, om)
        if (tc != "") printf "collie (tcp),%s,2,%s,%s\n", k[1], k[2], tc > bestcsv
        if (of != "") printf "collie (ofi),%s,2,%s,%s\n", k[1], k[2], of > bestcsv
        if (om != "") printf "openmpi-ofi,%s,2,%s,%s\n", k[1], k[2], om > bestcsv
      }
    }' bestcsv="$out/best.csv" $(ls "$out"/collie_tcp_r*.csv "$out"/collie_ofi_r*.csv "$out"/ompi_r*.csv 2>/dev/null)
} >"$out/table.md"
cat "$out/table.md"
