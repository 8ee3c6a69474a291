"""train_dp.py - data-parallel training of a small numpy MLP with bucketed,
asynchronous gradient all-reduce, comms.csv and timing logs.

    collierun -n 4 /usr/bin/python3 examples/python/train_dp.py --log-dir logs
    /usr/bin/python3 examples/python/train_dp.py --single          # the same training, one process

The model is a 2-layer MLP (tanh) regressing synthetic data. Every step takes
the same global batch on every rank; each rank computes the gradient of its
shard (a 1/size slice of the batch). As in PyTorch DDP, the gradients live in
flat buckets (25 MiB by default, --bucket-mb), filled in the order backward
produces them (last layer first); as soon as a bucket is complete it is
all-reduced asynchronously while the gradient of the next bucket is being
computed. After the last bucket the optimizer waits for all of them and
applies SGD. The sum of the shards' gradients (scaled by 1/global batch) is
the full batch's gradient, so the loss curve matches single-process training
on the same data up to float rounding.

With --log-dir, rank 0 writes LOGDIR/comms.csv (one row per step, bytes per
payload category) and every rank LOGDIR/timing-rank{i}.csv (each all-reduce,
and the FORWARD/BACKWARD/OPTIMIZER regions).
"""

import argparse
import json
import sys

import numpy as np

from _common import collie, communicator
from collie import distributed as dist
from collie import timing


class MLP:
    """Parameters of d_in -> hidden (tanh) -> 1."""

    def __init__(self, d_in, hidden, seed=1):
        rng = np.random.default_rng(seed)
        self.params = {
            "w1": (rng.standard_normal((d_in, hidden)) / np.sqrt(d_in)).astype(np.float32),
            "b1": np.zeros(hidden, dtype=np.float32),
            "w2": (rng.standard_normal((hidden, 1)) / np.sqrt(hidden)).astype(np.float32),
            "b2": np.zeros(1, dtype=np.float32),
        }
        # Backward produces gradients in this order (last layer first).
        self.backward_order = ["w2", "b2", "w1", "b1"]


def make_data(n, d_in, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    w = rng.standard_normal((d_in, 8)).astype(np.float32) / np.sqrt(d_in)
    v = rng.standard_normal((8, 1)).astype(np.float32)
    y = (np.tanh(x @ w) @ v + 0.05 * rng.standard_normal((n, 1))).astype(np.float32)
    return x, y


class Buckets:
    """Flat gradient buckets; each parameter's gradient is a view into one
    (zero-copy for the all-reduce), assigned in backward order."""

    def __init__(self, model, bucket_bytes):
        self.of = {}  # param -> bucket index
        self.views = {}
        groups, cur, cur_bytes = [], [], 0
        for name in model.backward_order:
            nbytes = model.params[name].nbytes
            if cur and cur_bytes + nbytes > bucket_bytes:
                groups.append(cur)
                cur, cur_bytes = [], 0
            cur.append(name)
            cur_bytes += nbytes
        groups.append(cur)
        self.members = groups
        self.flat = []
        for b, names in enumerate(groups):
            total = sum(model.params[n].size for n in names)
            flat = np.zeros(total, dtype=np.float32)
            off = 0
            for n in names:
                p = model.params[n]
                self.views[n] = flat[off:off + p.size].reshape(p.shape)
                self.of[n] = b
                off += p.size
            self.flat.append(flat)

    def __len__(self):
        return len(self.flat)


def train(comm=None, steps=40, batch=256, d_in=32, hidden=64, lr=0.1, bucket_bytes=25 << 20, n_samples=4096,
          log=False, verbose=True):
    """Trains and returns the list of global losses (one per step, before the
    step's update). comm None: single process, no communication."""
    rank, size = (comm.get_rank(), comm.get_size()) if comm is not None else (0, 1)
    if batch % size:
        raise SystemExit("train_dp: batch %d is not divisible by %d ranks" % (batch, size))
    x, y = make_data(n_samples, d_in)
    model = MLP(d_in, hidden)
    P = model.params
    buckets = Buckets(model, bucket_bytes)
    logger = timing.get_timing_logger() if log else None
    shard = batch // size
    order = np.random.default_rng(7).permutation(n_samples)
    losses = []
    loss_buf = np.zeros(1, dtype=np.float64)
    steps_per_epoch = n_samples // batch

    def region(name, nbytes=0):
        if logger is None:
            import contextlib

            return contextlib.nullcontext()
        return logger.record_mpi_operation(name, nbytes, "mlp", "compute")

    for step in range(steps):
        epoch = step // steps_per_epoch
        i0 = (step % steps_per_epoch) * batch
        idx = order[i0 + rank * shard:i0 + (rank + 1) * shard]
        xs, ys = x[idx], y[idx]
        ctx = comm.step(step + 1, epoch) if (comm is not None and log) else _null()
        with ctx:
            with region("FORWARD", xs.nbytes):
                h = np.tanh(xs @ P["w1"] + P["b1"])
                pred = h @ P["w2"] + P["b2"]
                err = pred - ys
                loss_buf[0] = float(np.sum(err.astype(np.float64) ** 2))
            works = [None] * len(buckets)
            pending = [len(m) for m in buckets.members]

            def produced(name):
                b = buckets.of[name]
                pending[b] -= 1
                if pending[b] == 0 and comm is not None:
                    # The bucket is complete: all-reduce it while backward goes on.
                    works[b] = comm.all_reduce(buckets.flat[b], collie.ReduceOp.SUM, async_op=True,
                                               category=collie.PayloadCategory.OTHER, label="bucket%d" % b,
                                               phase="dense")

            with region("BACKWARD"):
                g = buckets.views
                dpred = (2.0 / batch) * err  # d(sum err^2 / batch) / dpred, this shard's rows
                np.matmul(h.T, dpred, out=g["w2"])
                produced("w2")
                g["b2"][...] = dpred.sum(axis=0)
                produced("b2")
                dh = (dpred @ P["w2"].T) * (1.0 - h * h)
                np.matmul(xs.T, dh, out=g["w1"])
                produced("w1")
                g["b1"][...] = dh.sum(axis=0)
                produced("b1")
            if comm is not None:
                comm.all_reduce(loss_buf, label="loss")
            with region("OPTIMIZER"):
                for w in works:
                    if w is not None:
                        w.wait()
                for name, p in P.items():
                    p -= lr * buckets.views[name]
        losses.append(loss_buf[0] / batch)
        if verbose and rank == 0 and (step % 10 == 0 or step == steps - 1):
            print("step %3d  loss %.6f" % (step + 1, losses[-1]), flush=True)
    return losses


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main(comm=None, argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="gradient bucket size in MiB (default 25)")
    ap.add_argument("--log-dir", help="write comms.csv (rank 0) and timing-rank{i}.csv here")
    ap.add_argument("--single", action="store_true", help="train in this one process, without collie")
    ap.add_argument("--json", help="rank 0 writes the losses here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    bucket_bytes = max(1, int(a.bucket_mb * (1 << 20)))
    kw = dict(steps=a.steps, batch=a.batch, lr=a.lr, bucket_bytes=bucket_bytes, verbose=not a.quiet)
    if a.single:
        losses = train(None, **kw)
        rank = 0
    else:
        if a.log_dir and comm is None:
            # comms.csv goes where the config says; it must be set before the comm exists.
            dist.configure({"runtime": {"comms_log": {"enabled": True, "dir": a.log_dir}}})
        with communicator(comm, "train_dp") as c:
            rank = c.get_rank()
            if a.log_dir:
                timing.init_timing_logger(rank, a.log_dir, group=c)
            try:
                losses = train(c, log=bool(a.log_dir), **kw)
            finally:
                if a.log_dir:
                    timing.shutdown_timing_logger()
    if rank == 0:
        if not a.quiet:
            print("train_dp: loss %.6f -> %.6f in %d steps" % (losses[0], losses[-1], len(losses)), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"losses": losses}, f)
    return losses


if __name__ == "__main__":
    main(argv=sys.argv[1:])
