"""elastic.py - training that loses a rank and goes on with the survivors
(shrink and continue, collie_comm_shrink).

    collierun -n 4 --keep-going /usr/bin/python3 examples/python/elastic.py --kill-rank 2 --kill-step 10
    /usr/bin/python3 examples/python/elastic.py --single           # the same training, one process

Full-batch gradient descent on a least-squares problem: every rank holds the
whole (synthetic) data set and takes the rows i with i % size == rank; the
all-reduced sum of the shards' gradients is the full gradient, whatever the
number of ranks. At --kill-step the --kill-rank process kills itself with
SIGKILL in the middle of the step. The others' all-reduce fails
(collie.RemoteError naming the dead rank); they call comm.shrink(), get a
communicator of the ranks still alive, take their rows anew and redo the
step. So the weights follow single-process training exactly (up to float
rounding), before and after the loss: the test checks that.

collierun --keep-going lets the job go on when a rank dies (without it the
launcher stops every rank). collierun serves the job's store itself, so
the job survives the death of any rank, rank 0 included (--kill-rank 0).
Under another launcher, where rank 0 serves the store, give the job a file
store (COLLIE_STORE=file:///shared/dir) for that.
"""

import argparse
import json
import os
import signal
import sys

import numpy as np

from _common import collie


def make_data(n=512, d=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    y = x @ w_true + 0.01 * rng.standard_normal(n)
    return x, y


def gradient(x, y, w, rank, size):
    """This rank's share of the full gradient of 1/2n |xw - y|^2, and of the loss."""
    xs, ys = x[rank::size], y[rank::size]
    r = xs @ w - ys
    out = np.empty(len(w) + 1)
    out[:-1] = xs.T @ r / len(y)
    out[-1] = 0.5 * (r @ r) / len(y)
    return out


def train(comm, steps=30, lr=0.5, kill_rank=-1, kill_step=-1, verbose=True):
    """Returns (losses, final weights, sizes per step); comm None trains alone."""
    x, y = make_data()
    w = np.zeros(x.shape[1])
    losses, sizes = [], []
    step = 0
    me = comm.rank if comm is not None else 0  # the rank at the start: ranks change on a shrink
    while step < steps:
        rank, size = (comm.rank, comm.size) if comm is not None else (0, 1)
        g = gradient(x, y, w, rank, size)
        if comm is not None and step == kill_step and me == kill_rank:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash in the middle of the step
        if comm is not None:
            try:
                comm.all_reduce(g, collie.ReduceOp.SUM)
            except collie.CollieError as e:
                # A peer died (or froze): go on with the ranks still alive.
                if verbose:
                    print("rank %d: step %d failed (%s); shrinking" % (rank, step, str(e).split(":")[0]),
                          flush=True)
                old, comm = comm, comm.shrink()
                old.finalize()
                if verbose:
                    print("rank %d -> rank %d of %d" % (rank, comm.rank, comm.size), flush=True)
                continue  # the same step again, sharded over the survivors
        w -= lr * g[:-1]
        losses.append(float(g[-1]))
        sizes.append(size)
        if verbose and rank == 0 and step % 10 == 0:
            print("step %d: loss %.6f on %d ranks" % (step, g[-1], size), flush=True)
        step += 1
    return losses, w, sizes, comm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--kill-rank", type=int, default=-1, help="rank that dies (default: none)")
    ap.add_argument("--kill-step", type=int, default=10)
    ap.add_argument("--single", action="store_true", help="train in this process alone")
    ap.add_argument("--json", help="rank 0 (of the survivors) writes losses and weights here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.single:
        losses, w, sizes, _ = train(None, a.steps, verbose=not a.quiet)
        rank = 0
    else:
        comm = collie.new_comm(name="elastic")
        losses, w, sizes, comm = train(comm, a.steps, kill_rank=a.kill_rank, kill_step=a.kill_step,
                                       verbose=not a.quiet)
        rank = comm.rank
        comm.finalize()
    if rank == 0:
        print("elastic: %d steps, loss %.3g -> %.3g, ranks %d -> %d" % (len(losses), losses[0], losses[-1],
                                                                      sizes[0], sizes[-1]))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"losses": losses, "w": list(w), "sizes": sizes}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
