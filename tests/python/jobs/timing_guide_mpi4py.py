"""timing_guide_mpi4py.py LOG_DIR - the timing logger integration guide's
calls in an mpi4py trainer with no collie communicator (run under mpirun):
record_mpi_operation around comm.Allreduce with explicit iterations, and the
guide's record_timing call. Prints `ok <rank> <sum>`."""

import sys

import numpy as np
from mpi4py import MPI

from collie.timing import init_timing_logger, shutdown_timing_logger

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
logger = init_timing_logger(rank, sys.argv[1])
x = np.ones(1000, dtype=np.float32)
y = np.empty_like(x)
for it in range(3):
    with logger.record_mpi_operation("ALLREDUCE", x.nbytes, "layer1", "dense", iteration=it, epoch=0):
        comm.Allreduce(x, y, op=MPI.SUM)
logger.record_timing(operation="ALLREDUCE", elapsed_ms=5.234, layer_name="layer1", message_size=110280000,
                     phase="dense", iteration=100, epoch=0)
shutdown_timing_logger()
sys.stdout.write("ok %d %.1f\n" % (rank, float(y[0])))  # one write: the ranks share the pipe
sys.stdout.flush()
