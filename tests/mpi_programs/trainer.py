"""Lesson 6: data-parallel training with a timing log.

Every rank holds the same small model (a two-layer MLP in numpy) and its own
shard of the data. Each iteration it computes its gradients, sums them over
the ranks with comm.Allreduce, one layer at a time, timed by the timing
logger (collie.timing: rows in LOG_DIR/timing-rank{rank}.csv), averages
them and takes an SGD step, so every rank keeps the same parameters.

    mpirun -n 4 python3 trainer.py LOG_DIR

Rank 0 prints the layers it all-reduces (in order: index, name and bytes), the loss of every
iteration and the final parameters.
"""
import sys

import numpy as np
from mpi4py import MPI

from collie.timing import init_timing_logger, shutdown_timing_logger

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
log_dir = sys.argv[1]
logger = init_timing_logger(rank, log_dir)

IN, HIDDEN, OUT, BATCH = 6, 8, 3, 16
ITERATIONS, LR = 5, 0.1


def check(cond, what):
    if not cond:
        sys.stderr.write("rank %d: check failed: %s\n" % (rank, what))
        sys.stderr.flush()
        comm.Abort(1)


# The same initial parameters everywhere: rank 0 draws them, everyone gets them.
params = {
    "fc1.weight": np.zeros((IN, HIDDEN)),
    "fc1.bias": np.zeros(HIDDEN),
    "fc2.weight": np.zeros((HIDDEN, OUT)),
    "fc2.bias": np.zeros(OUT),
}
if rank == 0:
    init = np.random.default_rng(0)
    for name, p in params.items():
        p[...] = init.normal(0.0, 0.5, p.shape)
for p in params.values():
    comm.Bcast(p, root=0)

# This rank's shard of a regression problem y = tanh(x A) B.
data = np.random.default_rng(100 + rank)
x = data.normal(size=(BATCH, IN))
teacher = np.random.default_rng(7)
A, B = teacher.normal(size=(IN, 4)), teacher.normal(size=(4, OUT))
y = np.tanh(x @ A) @ B


def forward_backward(p):
    h_pre = x @ p["fc1.weight"] + p["fc1.bias"]
    h = np.tanh(h_pre)
    pred = h @ p["fc2.weight"] + p["fc2.bias"]
    err = pred - y
    loss = float(np.mean(err ** 2))
    d_pred = 2.0 * err / err.size
    grads = {
        "fc2.weight": h.T @ d_pred,
        "fc2.bias": d_pred.sum(axis=0),
    }
    d_h = (d_pred @ p["fc2.weight"].T) * (1.0 - h ** 2)
    grads["fc1.weight"] = x.T @ d_h
    grads["fc1.bias"] = d_h.sum(axis=0)
    return loss, grads


out = []
if rank == 0:
    for i, (name, p) in enumerate(params.items()):
        out.append("0 layer %d %s %d" % (i, name, p.nbytes))
for it in range(ITERATIONS):
    loss, grads = forward_backward(params)
    for name in params:                       # the order of the backward pass does not matter here
        grad = np.ascontiguousarray(grads[name])
        result = np.empty_like(grad)
        with logger.record_mpi_operation("ALLREDUCE", message_size=grad.nbytes, layer_name=name,
                                         phase="dense", iteration=it, epoch=0):
            comm.Allreduce(grad, result, op=MPI.SUM)
        params[name] -= LR * result / size
    total = comm.allreduce(loss, op=MPI.SUM)
    if rank == 0:
        out.append("0 iteration %d loss %.6f" % (it, total / size))

shutdown_timing_logger()

# Every rank must hold rank 0's parameters.
flat = np.concatenate([p.ravel() for p in params.values()])
ref = flat.copy()
comm.Bcast(ref, root=0)
check(np.allclose(flat, ref, rtol=0, atol=1e-12), "parameters drifted from rank 0's by %g" % np.max(np.abs(flat - ref)))
out.append("%d parameters agree with rank 0" % rank)
if rank == 0:
    for name, p in params.items():
        out.append("0 final %s %s" % (name, " ".join("%.6f" % v for v in p.ravel())))

sys.stdout.write("".join(line + "\n" for line in out))
sys.stdout.flush()
