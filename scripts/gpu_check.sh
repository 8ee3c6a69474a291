#!/bin/sh
# scripts/gpu_check.sh - the checks that need the device machine, in one call
# (its image has torch 2.x; this machine has Debian's 1.13 only):
#
#   device run: sh scripts/gpu_check.sh        (timeout_s 540; results in $OUT)
#   (carry .fetched: step 12's nccl-tests sources, see there)
#
# 1. collie.torch on torch 2.x: the whole tests/torch suite (env:// at 2 and 4
#    ranks, tcp:// and file:// at 2), CPU tensors, with the image's python3.
# 2. examples/python/train_ddp_torch.py under torch 2.x's own torchrun, with
#    gloo and with collie (the issue asks for both launchers).
# 3. The latency floor through torch 2.x (bench/torch_compare.py --latency).
# 4. python3 -m collie.profile --backend nccl at world size 1 (issue 17).
# 5. collie.distributed's wrappers on CUDA tensors (issue 17, item 7): the
#    seed's training loop (tests/torch/jobs/mfcl_snippet.py) with nccl at
#    world size 1 and with gloo at 2 ranks on the one GPU, its comms.csv and
#    timing logs checked by tests/torch/jobs/mfcl_check.py (bytes exact,
#    CUDA-event times positive, within each step, an async call's time
#    reaching its wait); then what the wrappers cost per call on CUDA with
#    nccl (bench/wrapper_cost.py).
# 6. Where torch 2.x's microseconds go on the direct path (issue 16's latency
#    floor): bench/torch_dispatch_cost.py, layer by layer against a Python
#    backend that does nothing.
# 7. CUDA IPC and cuMem POSIX-fd sharing between two processes on one GPU,
#    the driver opened at run time (issue 21's ground): bench/cuda_ipc_probe.c.
# (FSDP on torch 2.x, issue 16 item 5, is tests/torch/test_fsdp.py in step 1.)
# 8. collie's collectives on CUDA device memory (issue 21): the device
#    matrix (tests/gpu/device_matrix.cu, built with nvcc) at 1, 2 and 4
#    ranks on the one GPU; CUDA tensors through collie.torch and the
#    binding (tests/gpu/torch_cuda.py, 2 and 4 ranks) and the seed's training
#    loop on collie with CUDA tensors (wrappers_collie_cuda_2ranks).
#    device_hosts: the matrix on two "hosts" (COLLIE_HOST_ID) of 1 and 2
#    ranks, where device buffers go through pinned host memory, and the
#    pipeline's speed against staging whole.
#
# 9. Speed on device buffers: collie-bench --device cuda against torch's Gloo
#    on the same CUDA tensors (device_bench, gloo_bench).
#
# 10. collie.torch's C++ fast path built against torch 2.x, the torch suite
#    through it, and its cost (torch_fast; GPU_CHECK_STEPS=fast runs it alone).
#
# 11. CUDA graphs (issue 35, item 4): tests/gpu/cuda_graph.py at 2 and 4
#    ranks on the one GPU: torchcomms' Example 6 as written, five calls
#    captured and replayed 100 times against a CPU reference, replayed
#    latency against the uncaptured call, refusals at capture
#    (cuda_graph; GPU_CHECK_STEPS=graph runs it alone).
#
# 12. NCCL programs on collie (issue 39): libcollie-nccl.so preloaded.
#    nccl_tests: nccl-tests (NCCL's own, v2.16.9; its sources carried in the
#    ignored folder .fetched/nccl-tests, never committed) built here with
#    MPI=1 against the image's NCCL headers (the nvidia-nccl wheel) and
#    tests/nccl/mini_mpi (the few MPI calls it makes, over collie), its
#    ranks collierun's processes all on GPU 0 (NCCL_TESTS_DEVICE=0): six
#    tests at 2 and 4 ranks with -c 1, "Out of bounds values : 0 OK" each;
#    the library's exports checked against that nccl.h first. torch_nccl:
#    torch's backend="nccl" ProcessGroup (tests/gpu/torch_cuda.py with
#    TORCH_CUDA_CHECK_BACKEND=nccl: the collie backend's CUDA checks, and
#    the calls NCCL's adds) at 2 and 4 ranks on GPU 0. pynccl_cuda:
#    tests/nccl/pynccl_style.py (vLLM's kind of ctypes program) on CUDA
#    tensors. colocated: bench/colocated_weights.py (point 3), collie against
#    torch's CUDA IPC + copy and the copy bound, plain and expandable
#    allocations. GPU_CHECK_STEPS=nccl runs the four.
#
# GPU_CHECK_STEPS="build device_matrix ..." runs only the steps named (the
# names in the summary line); the build always runs. GPU_CHECK_STEPS=gpu
# runs issue 21's device checks alone (the matrix on one host and on two,
# the failures, speed against Gloo, CUDA tensors through the binding, the
# torch backend and the examples): 253 s on an H200 (2026-11-27), all passed.
# GPU_CHECK_TORCH_K="fsdp or profile" narrows the torch suite (pytest -k),
# and COLLIE_TORCH_TEST_SESSIONS its sessions (tests/torch/run.sh).
#
# Each step's output goes to $OUT/<step>.log (the last lines also to stdout);
# the summary line says which passed. Nothing here needs a GPU itself: the
# device machine is where torch 2.x is.
set -u
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
py=${PYTHON:-python3}
jobs=$(nproc 2>/dev/null || echo 4)
summary=""
[ "${GPU_CHECK_STEPS:-}" = fast ] && GPU_CHECK_STEPS="torch_fast"
[ "${GPU_CHECK_STEPS:-}" = graph ] && GPU_CHECK_STEPS="cuda_graph"
[ "${GPU_CHECK_STEPS:-}" = nccl ] && GPU_CHECK_STEPS="nccl_tests torch_nccl pynccl_cuda colocated"
[ "${GPU_CHECK_STEPS:-}" = gpu ] &&
  GPU_CHECK_STEPS="device_matrix device_hosts device_bench gloo_bench device_pull_bench torch_cuda examples_cuda cuda_graph"
step() { # name, command...
  name=$1
  shift
  case " build ${GPU_CHECK_STEPS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  start=$(date +%s)
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "=== $name: exit $rc in $(($(date +%s) - start)) s"
  tail -${GPU_CHECK_TAIL:-15} "$out/$name.log"
  summary="$summary $name=$rc"
}

"$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' | tee "$out/versions.log"
# The GPU steps' build leaves collie.torch's C++ fast path out (its torch
# steps then test the Python backend, as before): the fast path has a step
# and a build of its own (torch_fast), so a compile problem there costs
# only that step.
step build sh -c "cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_TORCH_EXT=OFF >/dev/null && cmake --build build-dev -j$jobs"
export OMP_NUM_THREADS=1
# The short new checks first (7, 6), so that a slow step cannot starve them.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_inc=$(dirname "$nvcc")/../include
step cuda_ipc_probe sh -c "cc -O2 -I$cuda_inc bench/cuda_ipc_probe.c -o build-dev/cuda_ipc_probe -ldl \
  && timeout 60 build-dev/cuda_ipc_probe"
# 12. NCCL programs with libcollie-nccl.so preloaded (issue 39).
nccl_so="$PWD/build-dev/nccl/libcollie-nccl.so"
nccl_home() { # an NCCL_HOME for nccl-tests: the image's NCCL headers, collie's library
  h=$("$py" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) || return 1
  [ -f "$h/include/nccl.h" ] || return 1
  d=$out/ncclhome
  rm -rf "$d" && mkdir -p "$d/lib" && cp -r "$h/include" "$d/include" &&
    ln -s "$nccl_so" "$d/lib/libnccl.so" && echo "$d"
}
nccl_tests() {
  src=.fetched/nccl-tests
  [ -d "$src" ] || { echo "nccl-tests' sources are not in $src: carry them"; return 1; }
  home=$(nccl_home) || { echo "no nvidia-nccl headers beside $py's torch"; return 1; }
  sh scripts/check_nccl_symbols.sh "$nccl_so" "$home/include/nccl.h" || return 1
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  bd=$out/nccl-tests-build
  make -C "$src" MPI=1 MPI_HOME="$PWD/build-dev/mini_mpi" NCCL_HOME="$home" \
    CUDA_HOME="$(dirname "$nvcc")/.." BUILDDIR="$bd" NVCC_GENCODE="-gencode=arch=compute_$cap,code=sm_$cap" \
    -j"$jobs" src.build >"$out/nccl_tests_make.log" 2>&1 || { tail -20 "$out/nccl_tests_make.log"; return 1; }
  rc=0
  for n in 2 4; do
    for t in all_reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
      log=$out/nccl_tests_${t}_$n.log
      LD_PRELOAD="$nccl_so" LD_LIBRARY_PATH="$PWD/build-dev/mini_mpi/lib" NCCL_TESTS_DEVICE=0 \
        timeout 120 build-dev/collierun -n $n --timeout 110 "$bd/${t}_perf" -b 8 -e 64M -f 8 -c 1 -w 2 -n 5 \
        >"$log" 2>&1
      r=$?
      grep -q "Out of bounds values : 0 OK" "$log" || r=1
      echo "nccl-tests ${t}_perf at $n ranks on one GPU: exit $r"
      grep -E "^ +[0-9]+ +[0-9]+ " "$log" | tail -3
      [ $r = 0 ] || { rc=1; tail -8 "$log"; }
    done
  done
  return $rc
}
step nccl_tests nccl_tests
torch_nccl() {
  for n in 2 4; do
    LD_PRELOAD="$nccl_so" TORCH_CUDA_CHECK_BACKEND=nccl timeout 200 build-dev/collierun -n $n --timeout 180 \
      "$py" tests/gpu/torch_cuda.py ||
      return 1
  done
}
step torch_nccl torch_nccl
step pynccl_cuda timeout 120 build-dev/collierun -n 2 --timeout 110 "$py" tests/nccl/pynccl_style.py \
  --lib "$nccl_so" --device cuda
# Issue 39 point 3: a trainer's weights pushed to inference processes on
# its GPU, collie against torch's CUDA IPC + copy (and NCCL 2.30's several
# ranks per GPU where torch's NCCL has it), against the copy bound; then
# the same with expandable segments (cuMem allocations legacy IPC cannot
# share). GPU_CHECK_STEPS=colocated runs it alone.
colocated() {
  for n in 2 3; do
    timeout 200 build-dev/collierun -n $n --timeout 180 "$py" bench/colocated_weights.py \
      --sizes-mb 100,1000,4000 --csv "$out/colocated_$n.csv" || return 1
  done
  timeout 200 build-dev/collierun -n 3 --timeout 180 "$py" bench/colocated_weights.py --expandable \
    --sizes-mb 100,1000 --ways copy,collie,ipc --csv "$out/colocated_expandable.csv"
}
step colocated colocated
# Where small staged copies spend their time (docs/gpu.md, "Not yet"): a
# round trip through pinned memory at 8 B-256 KiB, one process and two.
step copy_probe sh -c "cc -O2 -I$cuda_inc bench/cuda_copy_probe.c -o build-dev/cuda_copy_probe -ldl \
  && $nvcc -ptx bench/cuda_copy_probe_kernels.cu -o build-dev/cuda_copy_probe.ptx \
  && timeout 90 build-dev/cuda_copy_probe 1 build-dev/cuda_copy_probe.ptx \
  && timeout 90 build-dev/cuda_copy_probe 2 build-dev/cuda_copy_probe.ptx \
  && timeout 60 build-dev/cuda_copy_probe 2 build-dev/cuda_copy_probe.ptx lockstep \
  && timeout 60 build-dev/cuda_copy_probe 2 build-dev/cuda_copy_probe.ptx turns"
# The same probe under CUDA MPS (one server context for every process's
# work: no context switches between them), where the image has the daemon;
# it runs for this step only, its pipes under $out.
mps_probe() (
  command -v nvidia-cuda-mps-control >/dev/null || { echo "no nvidia-cuda-mps-control here"; return 1; }
  [ -x build-dev/cuda_copy_probe ] || cc -O2 -I"$cuda_inc" bench/cuda_copy_probe.c -o build-dev/cuda_copy_probe -ldl || return 1
  [ -f build-dev/cuda_copy_probe.ptx ] || "$nvcc" -ptx bench/cuda_copy_probe_kernels.cu -o build-dev/cuda_copy_probe.ptx || return 1
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps_pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps_log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || return 1
  timeout 90 build-dev/cuda_copy_probe 2 build-dev/cuda_copy_probe.ptx lockstep
  rc=$?
  echo quit | nvidia-cuda-mps-control
  sleep 1
  cat "$CUDA_MPS_LOG_DIRECTORY"/control.log 2>/dev/null | tail -5
  return $rc
)
step mps_probe mps_probe
# collie itself under MPS: the device matrix on the direct path and staged
# at 2 ranks, and small staged allreduces (whose copies back to the device
# switched contexts without MPS) against the direct path.
mps_collie() (
  command -v nvidia-cuda-mps-control >/dev/null || { echo "no nvidia-cuda-mps-control here"; return 1; }
  "$nvcc" -O2 -Iinclude tests/gpu/device_matrix.cu -Lbuild-dev -lcollie \
    -Xlinker -rpath="$PWD/build-dev" -o build-dev/device_matrix || return 1
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps_pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps_log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || return 1
  rc=0
  DEVICE_MATRIX_LABEL="MPS, direct" timeout 120 build-dev/collierun -n 2 --timeout 100 build-dev/device_matrix || rc=1
  COLLIE_CUDA_IPC=0 DEVICE_MATRIX_LABEL="MPS, staged" timeout 120 build-dev/collierun -n 2 --timeout 100 \
    build-dev/device_matrix || rc=1
  for ipc in 1 0; do
    COLLIE_CUDA_IPC=$ipc timeout 60 build-dev/collierun -n 2 --timeout 50 build-dev/collie-bench --device cuda \
      -o allreduce,scatter -b 8 -e 64K -f 8 -t 0.02 | grep -v '^#' | sed "s/^/MPS ipc=$ipc /" || rc=1
  done
  echo quit | nvidia-cuda-mps-control
  sleep 1
  return $rc
)
step mps_collie mps_collie
step dispatch_cost env COLLIE_LIBRARY="$PWD/build-dev/libcollie.so" timeout 120 "$py" bench/torch_dispatch_cost.py 20000 5
# 10. collie.torch's C++ fast path on torch 2.x (docs/torch.md, "The C++ fast
# path"): built against the image's torch with COLLIE_TORCH_EXT=ON (AUTO
# leaves it out on 2.x until this passes), then the whole torch suite through
# it, its cost layer by layer (torch's floor for a Python backend is the
# line to beat) and against the Python backend in one job.
torch_fast() (
  cmake -S . -B build-fast -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_TORCH_EXT=ON \
    -DCOLLIE_PYTHON="$(command -v "$py")" >/dev/null || return 1
  cmake --build build-fast -j"$jobs" || return 1
  export COLLIE_TORCH_FAST=1 COLLIE_LIBRARY="$PWD/build-fast/libcollie.so"
  rc=0
  PYTHON="$py" sh tests/torch/run.sh build-fast ${GPU_CHECK_TORCH_K:+-k "$GPU_CHECK_TORCH_K"} || rc=1
  timeout 120 "$py" bench/torch_dispatch_cost.py 20000 5 || rc=1
  timeout 180 build-fast/collierun -n 2 --timeout 170 "$py" bench/torch_fast_path.py --calls 20000 || rc=1
  return $rc
)
step torch_fast torch_fast
# 8. The device matrix: every rank on device 0. The direct path (CUDA IPC,
# collie's kernels) at 1, 2 and 4 ranks, then 9 ranks (more sources than a
# kernel pass takes), staged through the host (COLLIE_CUDA_IPC=0) at 2 and
# 4, then a timeout and a killed rank on device buffers (the others report
# it naming rank 0 in time, and give their device memory back).
device_matrix() {
  "$nvcc" -O2 -Iinclude tests/gpu/device_matrix.cu -Lbuild-dev -lcollie \
    -Xlinker -rpath="$PWD/build-dev" -o build-dev/device_matrix || return 1
  for n in 1 2 4; do
    timeout 240 build-dev/collierun -n $n --timeout 200 build-dev/device_matrix || return 1
  done
  DEVICE_MATRIX_QUICK=1 timeout 240 build-dev/collierun -n 9 --timeout 200 build-dev/device_matrix || return 1
  for n in 2 4; do
    COLLIE_CUDA_IPC=0 timeout 240 build-dev/collierun -n $n --timeout 200 build-dev/device_matrix || return 1
  done
  for how in timeout kill; do
    timeout 60 build-dev/collierun -n 3 --keep-going --timeout 50 build-dev/device_matrix $how \
      >"$out/failure_$how.log" 2>&1
    cat "$out/failure_$how.log"
    [ "$(grep -c 'reported as expected' "$out/failure_$how.log")" = 2 ] || return 1
  done
}
step device_matrix device_matrix
# Two "hosts" on the one machine (COLLIE_HOST_ID; tcp between them), 1 and
# 2 ranks each, every rank on device 0: device buffers across hosts, the
# pipeline through pinned host memory (chunks of 64 KiB, so the matrix's
# calls make many) and the staged forms; then the pipeline's speed against
# staging whole (COLLIE_CUDA_CHUNK=0), 2 x 2 ranks.
two_hosts() { # per-host ranks, log, command... (same on both "hosts")
  per=$1 log=$2
  shift 2
  port=$((29620 + per))
  COLLIE_JOB_TOKEN=0123456789abcdef0123456789abcdef COLLIE_HOST_ID=hostA timeout 240 build-dev/collierun \
    -n "$per" --nnodes 2 --node-rank 0 --master-port $port --timeout 200 "$@" >"$log.a" 2>&1 &
  a=$!
  COLLIE_JOB_TOKEN=0123456789abcdef0123456789abcdef COLLIE_HOST_ID=hostB timeout 240 build-dev/collierun \
    -n "$per" --nnodes 2 --node-rank 1 --master-port $port --timeout 200 "$@" >"$log.b" 2>&1
  rb=$?
  wait $a
  ra=$?
  cat "$log.a" "$log.b"
  [ $ra = 0 ] && [ $rb = 0 ]
}
device_hosts() {
  [ -x build-dev/device_matrix ] || "$nvcc" -O2 -Iinclude tests/gpu/device_matrix.cu -Lbuild-dev -lcollie \
    -Xlinker -rpath="$PWD/build-dev" -o build-dev/device_matrix || return 1
  for per in 1 2; do
    COLLIE_CUDA_IPC=0 COLLIE_CUDA_CHUNK=65536 DEVICE_MATRIX_LABEL="2 hosts x $per, pipelined" \
      two_hosts $per "$out/hosts_matrix_$per" build-dev/device_matrix || return 1
  done
  for chunk in 4194304 0; do
    COLLIE_CUDA_CHUNK=$chunk two_hosts 2 "$out/hosts_bench_$chunk" build-dev/collie-bench --device cuda \
      -o allreduce,broadcast,allgather,reduce_scatter -b 1M -e 256M -f 4 -t 0.03 --csv "$out/hosts_cuda_chunk$chunk.csv" || return 1
  done
}
step device_hosts device_hosts
# 9. Speed (issue 21, item 7): collie-bench --device cuda at 2 and 4 ranks on
# the one GPU (its header has the GPU's copy bandwidth and launch latency),
# the same staged through the host (COLLIE_CUDA_IPC=0), and torch's Gloo on
# the same CUDA tensors (bench/gpu_gloo.py), 8 B to 1 GiB (Gloo to 128 MiB:
# it takes seconds a call beyond), x8 apart.
device_bench() {
  for n in 2 4; do
    timeout 200 build-dev/collierun -n $n --timeout 190 build-dev/collie-bench --device cuda \
      -o allreduce,allgather,reduce_scatter,broadcast -b 8 -e 1G -f 8 -t 0.03 \
      --csv "$out/collie_cuda_$n.csv" || return 1
  done
  COLLIE_CUDA_IPC=0 timeout 200 build-dev/collierun -n 2 --timeout 190 build-dev/collie-bench \
    --device cuda -o allreduce,allgather,reduce_scatter,broadcast -b 8 -e 2M -f 8 -t 0.03 \
    --csv "$out/collie_cuda_staged_2.csv" || return 1
}
step device_bench device_bench
# reduce, gather, scatter and alltoall(v) on the direct path against staged
# (COLLIE_CUDA_IPC=0), 2 and 4 ranks on the one GPU, 8 B to 16 MiB; the
# table printed: the default's algorithm and time, staged's, their ratio.
device_pull_bench() {
  for n in 2 4; do
    for ipc in 1 0; do
      COLLIE_CUDA_IPC=$ipc timeout 120 build-dev/collierun -n $n --timeout 110 build-dev/collie-bench \
        --device cuda -o reduce,gather,scatter,alltoall,alltoallv,sendrecv -b 8 -e 16M -f 4 -t 0.02 \
        --csv "$out/pull_${n}_$ipc.csv" >/dev/null || return 1
    done
    awk -F, -v n=$n 'FNR == 1 { next } NR == FNR { t[$2 "/" $6] = $8; a[$2 "/" $6] = $3; next }
      ($2 "/" $6) in t { k = $2 "/" $6
        printf "pull %d ranks %-18s %-9s %10.2f us  %-18s %10.2f us %7.1fx\n", n, k, a[k], t[k], $3, $8, $8 / t[k] }' \
      "$out/pull_${n}_1.csv" "$out/pull_${n}_0.csv"
  done
}
step device_pull_bench device_pull_bench
gloo_bench() { # a run cut short keeps its CSV lines so far; both sizes run
  rc=0
  for n in 2 4; do
    timeout 85 build-dev/collierun -n $n --timeout 75 "$py" bench/gpu_gloo.py $((128 << 20)) \
      "$out/gloo_cuda_$n.csv" || rc=1
  done
  return $rc
}
step gloo_bench gloo_bench
torch_cuda() {
  for n in 2 4; do
    COLLIE_LIBRARY="$PWD/build-dev/libcollie.so" timeout 200 build-dev/collierun -n $n --timeout 180 \
      "$py" tests/gpu/torch_cuda.py || return 1
  done
}
step torch_cuda torch_cuda
# The examples of examples/python as written, their arrays torch CUDA
# tensors (--device cuda), 2 and 4 ranks on the one GPU.
examples_cuda() {
  for n in 2 4; do
    for e in allreduce allgather broadcast sendrecv_ring batch_p2p; do
      COLLIE_LIBRARY="$PWD/build-dev/libcollie.so" timeout 60 build-dev/collierun -n $n --timeout 50 \
        "$py" examples/python/$e.py --device cuda || return 1
    done
  done
}
step examples_cuda examples_cuda
cuda_graph() {
  for n in 2 4; do
    COLLIE_LIBRARY="$PWD/build-dev/libcollie.so" PYTHONPATH="$PWD/python" timeout 200 \
      build-dev/collierun -n $n --timeout 180 "$py" tests/gpu/cuda_graph.py || return 1
  done
}
step cuda_graph cuda_graph
if [ -n "${GPU_CHECK_TORCH_K:-}" ]; then
  step torch_tests env PYTHON="$py" sh tests/torch/run.sh build-dev -q -k "$GPU_CHECK_TORCH_K"
else
  step torch_tests env PYTHON="$py" sh tests/torch/run.sh build-dev -q
fi
for be in gloo collie; do
  step "torchrun_$be" env PYTHONPATH="$PWD/python" COLLIE_LIBRARY="$PWD/build-dev/libcollie.so" \
    timeout 300 "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
    examples/python/train_ddp_torch.py --backend "$be" --epochs 2
done
step latency env TORCH_COMPARE_PYTHON="$py" TORCH_COMPARE_NRANKS=2 timeout 120 \
  sh bench/torch_compare.sh build-dev --latency
# 4. The profiler with nccl on the GPU, world size 1 (issue 17).
step profile_nccl env PYTHONPATH="$PWD/python" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=29533 timeout 120 "$py" -m collie.profile --backend nccl --profile-dir "$out" --csv "$out/nccl.csv"
echo "--- the profile it wrote:"
cat "$out"/profile_nccl_world1_*.txt 2>/dev/null | head -20
# 5. The wrappers on CUDA tensors (issue 17, item 7).
export PYTHONPATH="$PWD/python" COLLIE_LIBRARY="$PWD/build-dev/libcollie.so"
mfcl() { # backend nranks dir
  d=$3
  rm -rf "$d" && mkdir -p "$d"
  t0=$(date +%s)
  if [ "$2" = 1 ]; then
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29534 \
      timeout 120 "$py" tests/torch/jobs/mfcl_snippet.py "$1" "$d" cuda || return 1
  else
    timeout 120 build-dev/collierun -n "$2" "$py" tests/torch/jobs/mfcl_snippet.py "$1" "$d" cuda || return 1
  fi
  "$py" tests/torch/jobs/mfcl_check.py "$d" "$1" "$2" $(($(date +%s) - t0 + 1)) && cat "$d/comms.csv"
}
step wrappers_nccl mfcl nccl 1 "$out/mfcl_nccl"
step wrappers_gloo_cuda_2ranks mfcl gloo 2 "$out/mfcl_gloo"
step wrappers_collie_cuda_2ranks mfcl collie 2 "$out/mfcl_collie"
step wrapper_cost_nccl timeout 120 "$py" bench/wrapper_cost.py 5000 3 nccl cuda
echo "gpu_check:$summary"
