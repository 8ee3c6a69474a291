"""Lesson 2: tags are channels. Different tags are independent streams:
rank 0 sends on tags 1, 2 and 3 in that order, and rank 1 receives them in
the order 3, 1, 2. Then a message whose size the receiver does not know
(Probe and Status.Get_count), and messages from whoever sends first
(ANY_SOURCE with Status.Get_source and Get_count, ANY_TAG with Get_tag).

    mpirun -n 4 python3 tags.py
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
lines = []


def check(cond, what):
    if not cond:
        sys.stderr.write("rank %d: check failed: %s\n" % (rank, what))
        sys.stderr.flush()
        comm.Abort(1)


TAG_A, TAG_B, TAG_C = 1, 2, 3

# --- tags as channels --------------------------------------------------------
if rank == 0:
    a = np.arange(5, dtype=np.int32)                   # tag 1: five ints
    b = np.array([0.5, 1.5, 2.5], dtype=np.float64)    # tag 2: three doubles
    c = np.arange(10, 20, dtype=np.int64)              # tag 3: ten longs
    comm.Send(a, dest=1, tag=TAG_A)
    comm.Send(b, dest=1, tag=TAG_B)
    comm.Send(c, dest=1, tag=TAG_C)
elif rank == 1:
    a = np.zeros(5, dtype=np.int32)
    b = np.zeros(3, dtype=np.float64)
    c = np.zeros(10, dtype=np.int64)
    st = MPI.Status()
    comm.Recv(c, source=0, tag=TAG_C, status=st)       # the last one sent, first
    check(st.Get_tag() == TAG_C and st.Get_source() == 0, "status of tag 3")
    check(st.Get_count(MPI.INT64_T) == 10, "count of tag 3: %d" % st.Get_count(MPI.INT64_T))
    comm.Recv(a, source=0, tag=TAG_A, status=st)
    check(st.Get_tag() == TAG_A and st.Get_count(MPI.INT) == 5, "status of tag 1")
    comm.Recv(b, source=0, tag=TAG_B, status=st)
    check(st.Get_tag() == TAG_B and st.Get_count(MPI.DOUBLE) == 3, "status of tag 2")
    check(a.tolist() == list(range(5)), "tag 1 payload %r" % a)
    check(b.tolist() == [0.5, 1.5, 2.5], "tag 2 payload %r" % b)
    check(c.tolist() == list(range(10, 20)), "tag 3 payload %r" % c)
    lines.append("1 tag3 %s" % " ".join(map(str, c)))
    lines.append("1 tag1 %s" % " ".join(map(str, a)))
    lines.append("1 tag2 %s" % " ".join("%.2f" % v for v in b))

# --- a message of unknown size: Probe, then Recv what the status says ------
if rank == 0:
    n = 7 + 3 * size
    comm.Send(np.arange(n, dtype=np.int32) * 2, dest=1, tag=4)
elif rank == 1:
    st = MPI.Status()
    comm.Probe(source=0, tag=4, status=st)
    n = st.Get_count(MPI.INT)
    check(st.Get_source() == 0 and st.Get_tag() == 4, "probe status")
    check(n == 7 + 3 * size, "probed count %d" % n)
    buf = np.empty(n, dtype=np.int32)
    comm.Recv(buf, source=st.Get_source(), tag=st.Get_tag())
    check(buf.tolist() == [2 * i for i in range(n)], "probed payload")
    lines.append("1 probed %d ints, sum %d" % (n, int(buf.sum())))

# --- whoever comes first: ANY_SOURCE ----------------------------------------
# Every rank but 0 sends rank+1 doubles of value rank*10 on tag 5; rank 0
# takes them in arrival order into a buffer big enough for any of them.
if rank != 0:
    comm.Send(np.full(rank + 1, rank * 10.0), dest=0, tag=5)
else:
    got = {}
    buf = np.zeros(size + 1)
    for _ in range(size - 1):
        st = MPI.Status()
        comm.Recv(buf, source=MPI.ANY_SOURCE, tag=5, status=st)
        src = st.Get_source()
        cnt = st.Get_count(MPI.DOUBLE)
        check(src not in got, "two messages from %d" % src)
        check(cnt == src + 1, "count %d from %d" % (cnt, src))
        check(np.all(buf[:cnt] == src * 10.0), "payload from %d" % src)
        got[src] = cnt
    for src in sorted(got):
        lines.append("0 from %d: %d doubles" % (src, got[src]))

# --- ANY_TAG: the tag comes with the status ---------------------------------
# Each rank sends one int to its right neighbour with the tag 100 + rank.
right, left = (rank + 1) % size, (rank - 1) % size
req = comm.Isend(np.array([rank], dtype=np.int32), dest=right, tag=100 + rank)
val = np.zeros(1, dtype=np.int32)
st = MPI.Status()
comm.Recv(val, source=left, tag=MPI.ANY_TAG, status=st)
req.Wait()
check(st.Get_tag() == 100 + left and int(val[0]) == left, "ANY_TAG from %d: tag %d" % (left, st.Get_tag()))
lines.append("%d any-tag got %d with tag %d" % (rank, int(val[0]), st.Get_tag()))

# --- the same tag twice: messages of one channel never overtake -------------
if rank == 0:
    for i in range(4):
        comm.Send(np.array([i * i], dtype=np.int32), dest=size - 1, tag=6)
if rank == size - 1:
    seen = []
    for i in range(4):
        x = np.zeros(1, dtype=np.int32)
        comm.Recv(x, source=0, tag=6)
        seen.append(int(x[0]))
    check(seen == [0, 1, 4, 9], "tag 6 order %r" % seen)
    lines.append("%d in order %s" % (rank, seen))

comm.Barrier()
if lines:
    sys.stdout.write("".join(l + "\n" for l in lines))
    sys.stdout.flush()
