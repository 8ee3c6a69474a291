"""Lesson 4: collectives built from point-to-point messages, each checked
against the library's own collective:
  - broadcast: naive (the root sends to everyone) and binomial tree;
  - reduce: naive (everyone sends to the root);
  - allreduce: ring (reduce-scatter then allgather on numpy chunks of
    uneven sizes) and recursive doubling (power-of-two sizes; the ranks
    beyond the largest power of two fold into it first and get the result
    back at the end);
  - gather and scatter: naive;
  - alltoall: pairwise exchange.

    mpirun -n 4 python3 p2p_collectives.py
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
out = []


def check(cond, what):
    if not cond:
        sys.stderr.write("rank %d: check failed: %s\n" % (rank, what))
        sys.stderr.flush()
        comm.Abort(1)


def fmt(a):
    return " ".join("%.4f" % v for v in np.ravel(a))


# --- broadcast -----------------------------------------------------------------
def naive_bcast(buf, root):
    if rank == root:
        for r in range(size):
            if r != root:
                comm.Send(buf, dest=r, tag=10)
    else:
        comm.Recv(buf, source=root, tag=10)


def tree_bcast(buf, root):
    vrank = (rank - root) % size          # the root is virtual rank 0
    mask = 1
    while mask < size:                    # receive from the parent...
        if vrank & mask:
            comm.Recv(buf, source=(vrank - mask + root) % size, tag=11)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:                       # ... then send to the children
        if vrank + mask < size:
            comm.Send(buf, dest=(vrank + mask + root) % size, tag=11)
        mask >>= 1


for root in range(size):
    want = np.linspace(root, root + 1, 7)
    a = want.copy() if rank == root else np.zeros(7)
    b = want.copy() if rank == root else np.zeros(7)
    ref = want.copy() if rank == root else np.zeros(7)
    naive_bcast(a, root)
    tree_bcast(b, root)
    comm.Bcast(ref, root=root)
    check(np.allclose(a, ref), "naive bcast from %d" % root)
    check(np.allclose(b, ref), "tree bcast from %d" % root)
    out.append("%d bcast from %d: %s" % (rank, root, fmt(b)))


# --- reduce --------------------------------------------------------------------
def naive_reduce(sendbuf, root):
    if rank != root:
        comm.Send(sendbuf, dest=root, tag=12)
        return None
    total = sendbuf.copy()
    tmp = np.empty_like(sendbuf)
    for r in range(size):
        if r != root:
            comm.Recv(tmp, source=r, tag=12)
            total += tmp
    return total


x = np.arange(5, dtype=np.float64) * (rank + 1)
mine = naive_reduce(x, 0)
ref = np.empty_like(x) if rank == 0 else None
comm.Reduce(x, ref, op=MPI.SUM, root=0)
if rank == 0:
    check(np.allclose(mine, ref), "naive reduce")
    out.append("0 reduce: %s" % fmt(mine))


# --- ring allreduce ------------------------------------------------------------
def ring_allreduce(sendbuf):
    data = sendbuf.copy()
    chunks = np.array_split(np.arange(len(data)), size)   # uneven sizes are fine
    right, left = (rank + 1) % size, (rank - 1) % size
    # reduce-scatter: after size-1 steps rank r owns the sum of chunk (r+1) % size
    for step in range(size - 1):
        send_idx = chunks[(rank - step) % size]
        recv_idx = chunks[(rank - step - 1) % size]
        incoming = np.empty(len(recv_idx), dtype=data.dtype)
        comm.Sendrecv(np.ascontiguousarray(data[send_idx]), dest=right, sendtag=13,
                      recvbuf=incoming, source=left, recvtag=13)
        data[recv_idx] += incoming
    # allgather: pass the finished chunks around
    for step in range(size - 1):
        send_idx = chunks[(rank - step + 1) % size]
        recv_idx = chunks[(rank - step) % size]
        incoming = np.empty(len(recv_idx), dtype=data.dtype)
        outgoing = np.ascontiguousarray(data[send_idx])
        reqs = [comm.Irecv(incoming, source=left, tag=14), comm.Isend(outgoing, dest=right, tag=14)]
        MPI.Request.Waitall(reqs)
        data[recv_idx] = incoming
    return data


for n in (1, size - 1, 10, 1001):
    v = np.cos(np.arange(n) * 0.1 + rank)
    mine = ring_allreduce(v)
    ref = np.empty_like(v)
    comm.Allreduce(v, ref, op=MPI.SUM)
    check(np.allclose(mine, ref), "ring allreduce of %d" % n)
    out.append("%d ring allreduce of %d: sum %.6f first %.6f" % (rank, n, mine.sum(), mine[0] if n else 0.0))


# --- recursive-doubling allreduce ------------------------------------------------
def rd_allreduce(sendbuf):
    data = sendbuf.copy()
    tmp = np.empty_like(data)
    p2 = 1
    while p2 * 2 <= size:
        p2 *= 2
    # the extra ranks hand their data to a partner inside the power of two
    if rank >= p2:
        comm.Send(data, dest=rank - p2, tag=15)
    elif rank + p2 < size:
        comm.Recv(tmp, source=rank + p2, tag=15)
        data += tmp
    if rank < p2:
        mask = 1
        while mask < p2:
            partner = rank ^ mask
            comm.Sendrecv(data, dest=partner, sendtag=16, recvbuf=tmp, source=partner, recvtag=16)
            data += tmp
            mask <<= 1
    # and get the result back
    if rank >= p2:
        comm.Recv(data, source=rank - p2, tag=17)
    elif rank + p2 < size:
        comm.Send(data, dest=rank + p2, tag=17)
    return data


v = np.arange(12, dtype=np.int64) * (rank + 1)
mine = rd_allreduce(v)
ref = np.empty_like(v)
comm.Allreduce(v, ref, op=MPI.SUM)
check(np.array_equal(mine, ref), "recursive doubling allreduce")
out.append("%d rd allreduce: %s" % (rank, " ".join(map(str, mine))))


# --- gather and scatter ------------------------------------------------------------
def naive_gather(sendbuf, root):
    if rank != root:
        comm.Send(sendbuf, dest=root, tag=18)
        return None
    res = np.empty((size,) + sendbuf.shape, dtype=sendbuf.dtype)
    res[rank] = sendbuf
    for r in range(size):
        if r != root:
            comm.Recv(res[r], source=r, tag=18)
    return res


def naive_scatter(sendbuf, root, n):
    recv = np.empty(n, dtype=np.float64)
    if rank == root:
        for r in range(size):
            if r == root:
                recv[:] = sendbuf[r]
            else:
                comm.Send(sendbuf[r], dest=r, tag=19)
    else:
        comm.Recv(recv, source=root, tag=19)
    return recv


root = size - 1
g = np.array([rank, rank * rank, -rank], dtype=np.int32)
mine = naive_gather(g, root)
ref = np.empty((size, 3), dtype=np.int32) if rank == root else None
comm.Gather(g, ref, root=root)
if rank == root:
    check(np.array_equal(mine, ref), "naive gather")
    out.append("%d gather: %s" % (rank, " ".join(map(str, mine.ravel()))))

table = np.arange(size * 4, dtype=np.float64).reshape(size, 4) / 8.0 if rank == 0 else None
mine = naive_scatter(table, 0, 4)
ref = np.empty(4)
comm.Scatter(table, ref, root=0)
check(np.array_equal(mine, ref), "naive scatter")
out.append("%d scatter: %s" % (rank, fmt(mine)))


# --- pairwise alltoall ------------------------------------------------------------
def pairwise_alltoall(sendbuf):
    recv = np.empty_like(sendbuf)
    for step in range(size):
        dst = (rank + step) % size
        src = (rank - step) % size
        comm.Sendrecv(sendbuf[dst], dest=dst, sendtag=20, recvbuf=recv[src], source=src, recvtag=20)
    return recv


blocks = np.array([[100 * rank + 10 * d + k for k in range(2)] for d in range(size)], dtype=np.int64)
mine = pairwise_alltoall(blocks)
ref = np.empty_like(blocks)
comm.Alltoall(blocks, ref)
check(np.array_equal(mine, ref), "pairwise alltoall")
out.append("%d alltoall: %s" % (rank, " ".join(map(str, mine.ravel()))))

sys.stdout.write("".join(line + "\n" for line in out))
sys.stdout.flush()
