"""Lesson 3: rings. Pass data around a ring of ranks four ways:
  - a token that every rank adds itself to, with blocking Send/Recv;
  - a ring shift with blocking Send/Recv, even ranks sending first and odd
    ranks receiving first so that nobody waits for a send that cannot start
    (large arrays, which MPI does not buffer);
  - the same with nonblocking Isend/Irecv and Waitall, circulated size-1
    times so that every rank sums everyone's array (checked against
    Allreduce);
  - a Sendrecv ring shift, and Sendrecv_replace.

    mpirun -n 4 python3 rings.py
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
right = (rank + 1) % size
left = (rank - 1) % size
out = []


def check(cond, what):
    if not cond:
        sys.stderr.write("rank %d: check failed: %s\n" % (rank, what))
        sys.stderr.flush()
        comm.Abort(1)


# --- 1. the token ------------------------------------------------------------
token = np.zeros(1, dtype=np.int64)
if rank == 0:
    token[0] = 1000
    comm.Send(token, dest=right, tag=0)
    comm.Recv(token, source=left, tag=0)
    check(token[0] == 1000 + sum(range(size)), "token came back as %d" % token[0])
    out.append("0 token %d" % token[0])
else:
    comm.Recv(token, source=left, tag=0)
    token[0] += rank
    comm.Send(token, dest=right, tag=0)

# --- 2. blocking ring shift, even/odd ordering ---------------------------------
N = 200000                     # 1.6 MB: too big for MPI to buffer
mine = np.arange(N, dtype=np.float64) + rank * N
theirs = np.empty(N, dtype=np.float64)
if rank % 2 == 0:
    comm.Send(mine, dest=right, tag=1)
    comm.Recv(theirs, source=left, tag=1)
else:
    comm.Recv(theirs, source=left, tag=1)
    comm.Send(mine, dest=right, tag=1)
check(np.array_equal(theirs, np.arange(N, dtype=np.float64) + left * N), "blocking shift from %d" % left)
out.append("%d blocking got from %d: first %.1f last %.1f" % (rank, left, theirs[0], theirs[-1]))

# --- 3. nonblocking ring: everyone's sum ---------------------------------------
M = 1000
data = np.sin(np.arange(M) + rank).astype(np.float64)
acc = data.copy()
sendbuf = data.copy()
recvbuf = np.empty(M, dtype=np.float64)
for step in range(size - 1):
    reqs = [comm.Irecv(recvbuf, source=left, tag=2),
            comm.Isend(sendbuf, dest=right, tag=2)]
    MPI.Request.Waitall(reqs)
    acc += recvbuf
    sendbuf, recvbuf = recvbuf, sendbuf   # pass on what came in
ref = np.empty(M, dtype=np.float64)
comm.Allreduce(data, ref, op=MPI.SUM)
check(np.allclose(acc, ref), "ring sum differs from Allreduce by %g" % np.max(np.abs(acc - ref)))
out.append("%d ring sum %.6f" % (rank, round(float(acc.sum()), 6)))

# --- 4. Sendrecv ring shift ----------------------------------------------------
s = np.array([rank * 10 + i for i in range(3)], dtype=np.int32)
r = np.zeros(3, dtype=np.int32)
st = MPI.Status()
comm.Sendrecv(s, dest=right, sendtag=3, recvbuf=r, source=left, recvtag=3, status=st)
check(st.Get_source() == left and st.Get_tag() == 3, "Sendrecv status %d/%d" % (st.Get_source(), st.Get_tag()))
check(r.tolist() == [left * 10 + i for i in range(3)], "Sendrecv payload %r" % r)
out.append("%d sendrecv got %s" % (rank, r.tolist()))

# ... and the other way round, from ANY_SOURCE
comm.Sendrecv(s, dest=left, sendtag=4, recvbuf=r, source=MPI.ANY_SOURCE, recvtag=4, status=st)
check(st.Get_source() == right, "Sendrecv from ANY_SOURCE came from %d" % st.Get_source())
out.append("%d sendrecv back got %s from %d" % (rank, r.tolist(), st.Get_source()))

# --- 5. Sendrecv_replace: one buffer, shifted twice to the right ----------------
buf = np.full(4, float(rank))
for _ in range(2):
    comm.Sendrecv_replace(buf, dest=right, sendtag=5, source=left, recvtag=5)
check(np.all(buf == float((rank - 2) % size)), "Sendrecv_replace got %r" % buf)
out.append("%d replace holds %.1f" % (rank, buf[0]))

sys.stdout.write("".join(line + "\n" for line in out))
sys.stdout.flush()
