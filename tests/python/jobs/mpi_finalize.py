"""mpi_finalize.py finalize|exit|abort - a collie.MPI program's end: with
MPI.Finalize() (then COMM_WORLD is unusable), leaving COMM_WORLD and a Dup
to the exit cleanup, or rank 1 calling Abort(3) while the others wait in a
Barrier (which fails naming it). Prints `ok <rank> <size> <how>`."""

import sys

import numpy as np

from collie import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
x = np.array([rank + 1.0])
comm.Allreduce(MPI.IN_PLACE, x)
assert x[0] == size * (size + 1) / 2
d = comm.Dup()
assert d.allreduce(1) == size
if sys.argv[1] == "abort":
    if rank == 1:
        comm.Abort(3)
    try:
        comm.Barrier()
    except MPI.Exception as e:
        assert "Barrier" in str(e) and "MPI_Abort(errorcode=3) on rank 1" in str(e), e
    else:
        raise AssertionError("Barrier after a peer's Abort did not raise")
if sys.argv[1] == "finalize":
    MPI.Finalize()
    MPI.Finalize()  # idempotent
    assert MPI.Is_finalized()
    try:
        comm.Barrier()
    except MPI.Exception as e:
        assert e.Get_error_code() == MPI.ERR_COMM, e
    else:
        raise AssertionError("Barrier after Finalize did not raise")
sys.stdout.write("ok %d %d %s\n" % (rank, size, sys.argv[1]))
sys.stdout.flush()
