#!/bin/sh
# perf_plots.sh - remakes every plot of docs/performance.md from the
# benchmark CSVs kept in bench/results, with collie-report bench.
#
# Why: a plot in the docs must show the numbers of its table, not a run
# nobody can find. Each comparison's CSVs (bench/results/<comparison>/, with
# the command, machine and date in its README.md) are the source of both;
# this script is the only way the plots are made, and CI runs it with
# --check, which fails when a plot in docs/img differs from what the CSVs
# give (a CSV updated without its plot, or a plot edited by hand).
#
#   sh scripts/perf_plots.sh [--check] [BUILD]     (BUILD: default build)
#
# A new comparison is one more `plot` line below.
set -eu
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
build=${1:-build}
report=$build/collie-report
if [ ! -x "$report" ]; then
  echo "perf_plots.sh: $report is missing: build collie first (cmake --build $build)" >&2
  exit 2
fi
out=docs/img
mkdir -p "$out"
if [ $check = 1 ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
stale=0
r=bench/results

# plot NAME TITLE [collie-report bench options and CSVs]: docs/img/NAME.svg
plot() {
  name=$1
  title=$2
  shift 2
  "$report" bench --title "$title" -o "$out/$name.svg" "$@" >/dev/null
  if [ $check = 1 ] && ! cmp -s "$out/$name.svg" "docs/img/$name.svg"; then
    echo "perf_plots.sh: docs/img/$name.svg is not what $* gives: run sh scripts/perf_plots.sh" >&2
    stale=1
  fi
}

for n in 2 4 8; do
  plot "perf-shm-${n}ranks" "Shared memory, $n ranks on 2 cores: time per call (bench/results/shm)" \
    --ranks $n $r/shm/collie_np$n.csv $r/shm/ompi_np$n.csv $r/shm/mpich_np$n.csv
done
plot perf-tcp-2ranks "tcp over loopback, 2 ranks: time per call (bench/results/tcp)" \
  $r/tcp/collie_np2.csv $r/tcp/ompi_np2.csv $r/tcp/mpich_np2.csv $r/tcp/gloo_np2.csv
plot perf-torch-2ranks "torch 2.13, 2 ranks: time per call (bench/results/torch)" \
  $r/torch/sweep_np2.csv
plot perf-ofi-testbed "Two hosts of the test bed over libfabric (tcp;ofi_rxm): time per call" \
  $r/ofi/best.csv
plot perf-gpu-h200 "One H200, 2 ranks on the GPU: time per call (bench/results/gpu)" \
  $r/gpu/collie_cuda_2.csv $r/gpu/gloo_cuda_2.csv

if [ $check = 1 ]; then
  [ $stale = 0 ] && echo "perf_plots.sh: every plot in docs/img matches bench/results"
  exit $stale
fi
echo "perf_plots.sh: wrote the plots of docs/performance.md into docs/img"
