"""Lesson 1: hello, ranks. Every rank learns its rank, the world's size and
its processor name, waits at a barrier, and says hello.

    mpirun -n 4 python3 hello.py
"""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
name = MPI.Get_processor_name()

if not isinstance(name, str) or not name:
    sys.exit("rank %d: Get_processor_name() returned %r" % (rank, name))
if comm.rank != rank or comm.size != size:
    sys.exit("rank %d: comm.rank/comm.size disagree with Get_rank()/Get_size()" % rank)
if not 0 <= rank < size:
    sys.exit("rank %d: not in 0..%d" % (rank, size - 1))

# Every rank runs on this one machine: they all have the same processor name
# (which one is the library's business, so it is not printed).
names = comm.allgather(name)
if names != [name] * size:
    sys.exit("rank %d: processor names differ: %r" % (rank, names))

t0 = MPI.Wtime()
comm.Barrier()
t1 = MPI.Wtime()
if not t1 >= t0:
    sys.exit("rank %d: Wtime went backwards (%r then %r)" % (rank, t0, t1))

# One write per line, so that the ranks' lines never mix.
sys.stdout.write("%d hello from rank %d of %d (left %d, right %d)\n"
                 % (rank, rank, size, (rank - 1) % size, (rank + 1) % size))
sys.stdout.flush()

comm.Barrier()
if rank == 0:
    sys.stdout.write("0 everyone passed the barrier: %d ranks\n" % size)
    sys.stdout.flush()
