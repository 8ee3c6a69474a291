#!/usr/bin/python3
"""wire_bench.py - the compressed allreduce (docs/compression.md) against
plain float32 and against DDP's fp16 compression hook, over tcp.

    COLLIE_TRANSPORT=tcp build/collierun -n 4 /usr/bin/python3 bench/wire_bench.py
    ... bench/wire_bench.py --sizes 256K,4M,32M --rounds 7
    sh scripts/testbed.sh --hosts 1,1 --rate 1gbit -- /usr/bin/python3 bench/wire_bench.py

One job holds Gloo (torch.distributed's default group) and a collie
communicator side by side; every round runs each variant once per size, in
turn, so all see the machine at nearly the same moment (only ratios of one
run mean something here). Variants, all on float32 gradients of `size`
bytes, the result averaged over ranks:

  gloo fp32         dist.all_reduce of the float32 tensor, then / world
  gloo fp16 hook    what torch's fp16_compress_hook does: cast to float16,
                    / world, dist.all_reduce in float16 (Gloo sums in
                    float16), cast back
  collie fp32       comm.all_reduce(op=AVG)
  collie float16    comm.all_reduce(op=AVG, wire="float16")
  collie bfloat16   comm.all_reduce(op=AVG, wire="bfloat16")

Each line: median time per call over rounds (rank 0's, each call is a
collective), the bytes one rank sends per call as its algorithm moves them
(ring: 2 (n-1)/n S; the compressed exchange and the fp16 hook: half), and
the error against the exact average in double: max |r - avg| / (sum|x| / n),
in units of 2^-11 (float16's unit roundoff). Data: uniform in [-1, 1),
different per rank.
"""
import argparse
import hashlib
import os
import sys
import time

import importlib.util

import numpy as np
import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("collie") is None:  # this tree's binding, not installed
    sys.path.insert(0, os.path.join(ROOT, "python"))
import collie  # noqa: E402

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s):
    s = s.strip().upper()
    if s[-1] in UNITS:
        return int(float(s[:-1]) * UNITS[s[-1]])
    return int(s)


def env_setup():
    """torch's variables from collierun's when the launcher set only those."""
    os.environ.setdefault("RANK", os.environ.get("COLLIE_RANK", "0"))
    os.environ.setdefault("WORLD_SIZE", os.environ.get("COLLIE_WORLD_SIZE", "1"))
    store = os.environ.get("COLLIE_STORE", "")
    host = store[6:].rsplit(":", 1)[0] if store.startswith("tcp://") else "127.0.0.1"
    os.environ.setdefault("MASTER_ADDR", host)  # rank 0's host, where collierun serves the store
    if "TESTBED_HOST" in os.environ:  # scripts/testbed.sh: Gloo must use the hosts' link
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    token = os.environ.get("COLLIE_JOB_TOKEN", "wire")
    port = 20000 + int(hashlib.sha1(token.encode()).hexdigest(), 16) % 20000
    os.environ.setdefault("MASTER_PORT", str(port))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256K,4M,32M", help="bytes of float32 per call (default 256K,4M,32M)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7); the median is shown")
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    env_setup()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = collie.new_comm(name="wire_bench")
    torch.set_num_threads(1)

    def gloo_fp32(t):
        dist.all_reduce(t)
        t.div_(world)

    def gloo_fp16_hook(t):
        h = t.to(torch.float16).div_(world)
        dist.all_reduce(h)
        t.copy_(h)

    def collie_var(wire):
        def run(t):
            comm.all_reduce(t, collie.ReduceOp.AVG, wire=wire)

        return run

    variants = [
        ("gloo fp32", gloo_fp32, 1.0),
        ("gloo fp16 hook", gloo_fp16_hook, 0.5),
        ("collie fp32", collie_var(None), 1.0),
        ("collie float16", collie_var("float16"), 0.5),
        ("collie bfloat16", collie_var("bfloat16"), 0.5),
    ]
    if rank == 0:
        print("# wire_bench: %d ranks, transport %s, %d rounds (median)" % (
            world, os.environ.get("COLLIE_TRANSPORT", "auto"), a.rounds))
        print("# %-16s %10s %12s %14s %12s %10s" % ("variant", "size", "ms/call", "sent MB/rank", "vs collie fp32", "max err/u"))
    for size in sizes:
        n = size // 4
        data = [np.random.default_rng(r * 7919 + n).uniform(-1, 1, n).astype(np.float32) for r in range(world)]
        exact = np.mean([d.astype(np.float64) for d in data], axis=0)
        scale = np.mean([np.abs(d.astype(np.float64)) for d in data], axis=0)
        mine = torch.from_numpy(data[rank])
        times = {name: [] for name, _, _ in variants}
        errs = {}
        for rd in range(a.rounds + 1):
            order = variants if rd % 2 == 0 else list(reversed(variants))
            for name, fn, _ in order:
                t = mine.clone()
                dist.barrier()
                t0 = time.perf_counter()
                fn(t)
                dt = time.perf_counter() - t0
                if rd > 0:  # round 0 warms up
                    times[name].append(dt)
                if name not in errs:
                    err = np.abs(t.numpy().astype(np.float64) - exact) / np.maximum(scale, 1e-30)
                    errs[name] = float(err.max()) / 2.0**-11
        if rank == 0:
            base = np.median(times["collie fp32"])
            for name, _, frac in variants:
                med = np.median(times[name])
                sent = 2 * (world - 1) / world * size * frac / 1e6
                print("  %-16s %10s %12.2f %14.2f %12.2fx %10.2f" % (
                    name, "%dK" % (size >> 10) if size < 1 << 20 else "%dM" % (size >> 20),
                    med * 1e3, sent, base / med, errs[name]))
            sys.stdout.flush()
    comm.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
