"""mpi4py_compare.py IMPL [MAX_BYTES [SECONDS]] - one mpi4py program, run on
collie (IMPL collie: `from collie import MPI`, under collierun) or on an MPI
(IMPL openmpi or mpich: `from mpi4py import MPI`, under that MPI's mpiexec),
printing the same CSV lines for each (bench/mpi4py_compare.sh runs them side
by side; docs/performance.md has the table):

    impl,test,nranks,bytes,time_us

test is pingpong (ranks 0 and 1: half a round trip of Send/Recv, the
other ranks wait), or a collective through numpy buffers: Allreduce (SUM,
float32), Bcast, Allgather, Alltoall, Reduce_scatter_block, Barrier. bytes
as nccl-tests counts them (the larger of a rank's send and receive buffer).
time_us is the median over 5 batches of the time per call, each batch about
SECONDS / 5 long (calibrated on rank 0, told to every rank)."""

import sys
import time

import numpy as np

IMPL = sys.argv[1] if len(sys.argv) > 1 else "collie"
if IMPL == "collie":
    from collie import MPI  # type: ignore[attr-defined]
else:
    from mpi4py import MPI  # type: ignore[no-redef]

MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 4 << 20
SECS = float(sys.argv[3]) if len(sys.argv) > 3 else 0.25

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def sizes():
    b = 8
    while b <= MAX:
        yield b
        b *= 4


def timed(fn, n):
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def measure(fn, per_call=1.0):
    """Median seconds per call of fn (per_call: calls fn stands for)."""
    fn()
    t = timed(fn, 3)
    n = np.array([max(3, min(100000, int(SECS / 5 / max(t, 1e-7))))], dtype=np.int64)
    comm.Bcast(n, root=0)
    runs = sorted(timed(fn, int(n[0])) for _ in range(5))
    return runs[2] / per_call


def report(test, nbytes, secs):
    if rank == 0:
        sys.stdout.write("%s,%s,%d,%d,%.3f\n" % (IMPL, test, size, nbytes, secs * 1e6))
        sys.stdout.flush()


def pingpong():
    for b in sizes():
        buf = np.zeros(b, dtype=np.uint8)

        def once():
            if rank == 0:
                comm.Send(buf, dest=1, tag=1)
                comm.Recv(buf, source=1, tag=1)
            elif rank == 1:
                comm.Recv(buf, source=0, tag=1)
                comm.Send(buf, dest=0, tag=1)

        report("pingpong", b, measure(once, per_call=2.0))


def collectives():
    for b in sizes():
        n = max(b // 4, size)  # float32 elements of the larger buffer
        n -= n % size
        x = np.ones(n, dtype=np.float32)
        y = np.empty_like(x)
        blk = n // size
        part = np.ones(blk, dtype=np.float32)
        out = np.empty(blk, dtype=np.float32)
        report("allreduce", n * 4, measure(lambda: comm.Allreduce(x, y, op=MPI.SUM)))
        report("bcast", n * 4, measure(lambda: comm.Bcast(x, root=0)))
        report("allgather", n * 4, measure(lambda: comm.Allgather(part, y)))
        report("alltoall", n * 4, measure(lambda: comm.Alltoall(x, y)))
        report("reduce_scatter", n * 4, measure(lambda: comm.Reduce_scatter_block(x, out, op=MPI.SUM)))
    report("barrier", 0, measure(comm.Barrier))


if size >= 2:
    pingpong()
collectives()
comm.Barrier()
