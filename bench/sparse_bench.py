#!/usr/bin/python3
"""sparse_bench.py - sparse allreduce (docs/sparse.md) against the dense
allreduce and against Gloo's sparse allreduce, at several densities.

    build/collierun -n 4 /usr/bin/python3 bench/sparse_bench.py
    COLLIE_TRANSPORT=tcp build/collierun -n 4 /usr/bin/python3 bench/sparse_bench.py --dim 4M
    sh bench/sparse_bench.sh build        (2, 4 and 8 ranks, shm and tcp)

A gradient of --dim float32 elements (default 1M: 4 MiB dense); each rank
keeps k = density x dim entries (its own random indices, so the ranks'
sets overlap little). Per density and variant, in turns within each round
(only ratios of one run mean something on this shared machine): the
median time per call (rank 0's; every call is a collective), and the bytes
one rank sends per call as the algorithm moves them:

  collie dense       comm.all_reduce of the whole float32 gradient
                     (the ring's 2 (p-1)/p x 4 dim)
  collie topk_ag     comm.sparse_all_reduce(mode="topk_allgather"): exact,
                     (p-1) k (8 + 4)
  collie gtopk       mode="gtopk": k entries kept, log2 p rounds of k (8 + 4)
  gloo sparse        dist.all_reduce of a sparse COO tensor on Gloo (its
                     allgather of indices and values: about (p-1) k (8 + 4))
"""
import argparse
import hashlib
import importlib.util
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("collie") is None:  # this tree's binding, not installed
    sys.path.insert(0, os.path.join(ROOT, "python"))
import collie  # noqa: E402

UNITS = {"K": 1 << 10, "M": 1 << 20}


def parse_count(s):
    s = s.strip().upper()
    return int(float(s[:-1]) * UNITS[s[-1]]) if s[-1] in UNITS else int(s)


def env_setup():
    os.environ.setdefault("RANK", os.environ.get("COLLIE_RANK", "0"))
    os.environ.setdefault("WORLD_SIZE", os.environ.get("COLLIE_WORLD_SIZE", "1"))
    store = os.environ.get("COLLIE_STORE", "")
    os.environ.setdefault("MASTER_ADDR", store[6:].rsplit(":", 1)[0] if store.startswith("tcp://") else "127.0.0.1")
    token = os.environ.get("COLLIE_JOB_TOKEN", "sparse")
    os.environ.setdefault("MASTER_PORT", str(20000 + int(hashlib.sha1(token.encode()).hexdigest(), 16) % 20000))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dim", default="1M", help="gradient elements (default 1M)")
    ap.add_argument("--densities", default="0.001,0.01,0.1", help="fractions kept (default 0.001,0.01,0.1)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (default 5); the median is shown")
    a = ap.parse_args()
    dim = parse_count(a.dim)
    env_setup()
    dist.init_process_group("gloo")
    rank, p = dist.get_rank(), dist.get_world_size()
    comm = collie.new_comm(name="sparse_bench")
    torch.set_num_threads(1)
    dense = np.random.default_rng(rank).standard_normal(dim).astype(np.float32)
    if rank == 0:
        print("# sparse_bench: %d ranks, transport %s, dim %d (%.1f MiB dense), %d rounds (median)" % (
            p, os.environ.get("COLLIE_TRANSPORT", "auto"), dim, dim * 4 / 2**20, a.rounds))
        print("# %-9s %-15s %12s %14s %14s" % ("density", "variant", "ms/call", "sent KB/rank", "vs dense"))
    for dens in [float(x) for x in a.densities.split(",")]:
        k = max(1, int(dim * dens))
        rng = np.random.default_rng(1000 + rank)
        idx = np.sort(rng.choice(dim, size=k, replace=False)).astype(np.int64)
        val = dense[idx].copy()
        sp = torch.sparse_coo_tensor(torch.from_numpy(idx).view(1, -1), torch.from_numpy(val), (dim,))
        rounds = int(np.ceil(np.log2(p))) if p > 1 else 0  # log2 q rounds, + a fold where p is not 2^n

        def run_dense():
            comm.all_reduce(dense.copy())

        def run_ag():
            comm.sparse_all_reduce(idx, val, dim, mode="topk_allgather")

        def run_gtopk():
            comm.sparse_all_reduce(idx, val, dim, mode="gtopk")

        def run_gloo():
            dist.all_reduce(sp.clone())

        variants = [
            ("collie dense", run_dense, 2 * (p - 1) / p * 4 * dim),
            ("collie topk_ag", run_ag, (p - 1) * k * 12),
            ("collie gtopk", run_gtopk, rounds * k * 12),
            ("gloo sparse", run_gloo, (p - 1) * k * 12),
        ]
        times = {name: [] for name, _, _ in variants}
        for rd in range(a.rounds + 1):
            order = variants if rd % 2 == 0 else list(reversed(variants))
            for name, fn, _ in order:
                dist.barrier()
                t0 = time.perf_counter()
                fn()
                if rd > 0:
                    times[name].append(time.perf_counter() - t0)
        if rank == 0:
            base = np.median(times["collie dense"])
            for name, _, sent in variants:
                med = np.median(times[name])
                print("  %-9s %-15s %12.2f %14.1f %13.2fx" % ("%g%%" % (dens * 100), name, med * 1e3, sent / 1e3,
                                                              base / med))
            sys.stdout.flush()
    comm.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
