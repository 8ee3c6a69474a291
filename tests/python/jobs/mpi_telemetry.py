"""mpi_telemetry.py - a collie.MPI program's telemetry (run by
test_mpi_telemetry.py under collierun at 2 ranks, with COLLIE_LOG_DIR,
COLLIE_TIMING_LOG and a short COLLIE_TIMEOUT_MS): three training steps
marked with comm.collie.step, each an Allreduce, a Send/Recv ring, a Bcast
of mpi4py's [buf, TYPE] form and an Isend/Irecv pair (the fast path's
calls and the Python code's); then on a Dup rank 1 receives a message rank
0 never sends: the receive fails at the deadline, naming rank 0, and rank 1
dumps its flight record. Prints `ok <rank> <error>`."""

import sys
import time

import numpy as np

from collie import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
for it in (1, 2, 3):
    with comm.collie.step(it, epoch=0):
        g = np.full(256, rank + 1.0)  # 2 KiB
        comm.Allreduce(MPI.IN_PLACE, g, op=MPI.SUM)
        assert g[0] == size * (size + 1) / 2
        got = np.zeros(64)
        if rank % 2 == 0:
            comm.Send(np.full(64, float(rank)), right, tag=it)
            comm.Recv(got, left, tag=it)
        else:
            comm.Recv(got, left, tag=it)
            comm.Send(np.full(64, float(rank)), right, tag=it)
        assert got[0] == left
        b = np.arange(16, dtype="i") if rank == 0 else np.zeros(16, "i")
        comm.Bcast([b, MPI.INT], root=0)
        assert b.tolist() == list(range(16))
        r = comm.Irecv(got, left, tag=10 + it)
        s = comm.Isend(np.full(64, 2.0 * rank), right, tag=10 + it)
        MPI.Request.Waitall([r, s])
        assert got[0] == 2.0 * left
comm.Barrier()
d = comm.Dup()
err = "-"
if rank == 1:
    try:
        d.Recv(np.zeros(4), 0, tag=99)
    except MPI.Exception as e:
        err = "timeout" if "timed out" in str(e) and "rank 0" in str(e) and "Recv" in str(e) else str(e)
    else:
        err = "no error"
else:
    time.sleep(2.5)  # past rank 1's failed receive: the closing barriers then meet in time
sys.stdout.write("ok %d %s\n" % (rank, err))
sys.stdout.flush()
