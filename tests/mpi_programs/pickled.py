"""Lesson 5: Python objects. The lowercase methods pickle any object:
send/recv of dicts (also nonblocking isend/irecv, and sendrecv around the
ring), and bcast, scatter, gather, allgather, alltoall, reduce and
allreduce of lists, tuples and dicts.

    mpirun -n 4 python3 pickled.py
"""
import sys

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


def show(obj):
    """A dict printed with its keys sorted (same text everywhere)."""
    if isinstance(obj, dict):
        return "{" + ", ".join("%r: %s" % (k, show(obj[k])) for k in sorted(obj)) + "}"
    return repr(obj)


# --- send / recv of dicts ------------------------------------------------------
if rank == 0:
    for r in range(1, size):
        comm.send({"to": r, "task": "square", "numbers": list(range(r + 2))}, dest=r, tag=21)
    answers = {}
    for _ in range(1, size):
        st = MPI.Status()
        msg = comm.recv(source=MPI.ANY_SOURCE, tag=22, status=st)
        check(msg["from"] == st.Get_source(), "answer from %d says %r" % (st.Get_source(), msg))
        answers[msg["from"]] = msg["squares"]
    for r in sorted(answers):
        out.append("0 answer from %d: %s" % (r, answers[r]))
else:
    job = comm.recv(source=0, tag=21)
    check(job["to"] == rank, "job for %r" % job["to"])
    comm.send({"from": rank, "squares": [x * x for x in job["numbers"]]}, dest=0, tag=22)
    out.append("%d job %s" % (rank, show(job)))

# --- nonblocking: isend / irecv --------------------------------------------------
right, left = (rank + 1) % size, (rank - 1) % size
req_r = comm.irecv(source=left, tag=23)
req_s = comm.isend(("hello", rank, {"pi": 3.25}), dest=right, tag=23)
got = req_r.wait()
req_s.wait()
check(got == ("hello", left, {"pi": 3.25}), "irecv got %r" % (got,))
out.append("%d irecv %r" % (rank, got))

# --- sendrecv around the ring -------------------------------------------------------
got = comm.sendrecv({"rank": rank, "tags": ["a", "b"][: rank % 3]}, dest=right, sendtag=24, source=left, recvtag=24)
check(got["rank"] == left, "sendrecv got %r" % (got,))
out.append("%d sendrecv %s" % (rank, show(got)))

# --- collectives of objects -----------------------------------------------------------
config = {"lr": 0.125, "layers": [64, 32, 10], "name": "mlp"} if rank == 0 else None
config = comm.bcast(config, root=0)
check(config["layers"] == [64, 32, 10], "bcast %r" % (config,))
out.append("%d bcast %s" % (rank, show(config)))

work = [{"id": i, "items": list(range(i))} for i in range(size)] if rank == size - 1 else None
item = comm.scatter(work, root=size - 1)
check(item["id"] == rank, "scatter %r" % (item,))
out.append("%d scatter %s" % (rank, show(item)))

results = comm.gather((rank, "r%d" % rank, rank ** 2), root=0)
if rank == 0:
    check(results == [(r, "r%d" % r, r ** 2) for r in range(size)], "gather %r" % (results,))
    out.append("0 gather %r" % (results,))
else:
    check(results is None, "gather off the root returned %r" % (results,))

everyone = comm.allgather({"rank": rank, "even": rank % 2 == 0})
check([d["rank"] for d in everyone] == list(range(size)), "allgather %r" % (everyone,))
out.append("%d allgather %s" % (rank, [show(d) for d in everyone]))

letters = comm.alltoall(["%d->%d" % (rank, d) for d in range(size)])
check(letters == ["%d->%d" % (s, rank) for s in range(size)], "alltoall %r" % (letters,))
out.append("%d alltoall %r" % (rank, letters))

total = comm.reduce(rank + 1, op=MPI.SUM, root=0)
biggest = comm.reduce((rank * 7) % size, op=MPI.MAX, root=size - 1)
if rank == 0:
    check(total == size * (size + 1) // 2, "reduce SUM %r" % (total,))
    out.append("0 reduce sum %r" % (total,))
if rank == size - 1:
    out.append("%d reduce max %r" % (rank, biggest))

listsum = comm.allreduce([rank], op=MPI.SUM)            # lists add up by concatenation
check(listsum == list(range(size)), "allreduce of lists %r" % (listsum,))
prod = comm.allreduce(rank + 2, op=MPI.PROD)
low = comm.allreduce(10 - rank, op=MPI.MIN)
out.append("%d allreduce %r prod %r min %r" % (rank, listsum, prod, low))

# who has the best score? (value, rank) pairs with MAXLOC / MINLOC
score = (rank * 5) % 3 + 0.5
best = comm.allreduce((score, rank), op=MPI.MAXLOC)
worst = comm.allreduce((score, rank), op=MPI.MINLOC)
check(best[0] == max((r * 5) % 3 + 0.5 for r in range(size)), "MAXLOC %r" % (best,))
merged = comm.allreduce({rank: score}, op=lambda a, b: {**a, **b})   # any function of two objects
check(sorted(merged) == list(range(size)), "merged %r" % (merged,))
out.append("%d maxloc %r minloc %r merged %s" % (rank, best, worst, show(merged)))

sys.stdout.write("".join(line + "\n" for line in out))
sys.stdout.flush()
