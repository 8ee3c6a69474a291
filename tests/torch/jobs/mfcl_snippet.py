"""mfcl_snippet.py BACKEND OUTDIR [DEVICE] - a training loop as the seed's MFCL users
wrote it: torch.distributed on BACKEND (gloo or collie), its collectives
called through collie.distributed's wrappers with payload categories, one
comms.csv row per step, configured by the run's config mapping, plus the
timing logger. Rank 0 writes OUTDIR/expect.json: what each step's row must
say (bytes from the doc's wire model, computed here) and the wall time each
step took, for the test to check the files against.

Steps: an all_reduce of gradients, an all_gather of features, a broadcast of
moments from rank 0, an async all_reduce of top-k indices waited on after a
sleep of SLEEP_S (its time runs to the wait), and, where the backend has it
(gloo has no reduce_scatter), a reduce_scatter; every result checked.
DEVICE "cuda" puts every tensor on the rank's GPU (LOCAL_RANK % devices),
for scripts/gpu_check.sh; jobs/mfcl_check.py checks the files.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

backend, outdir = sys.argv[1], sys.argv[2]
device = torch.device("cpu")
if len(sys.argv) > 3 and sys.argv[3] == "cuda":
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
if backend == "collie":
    import collie.torch  # noqa: F401  (registers the backend)

import collie.distributed as cd  # noqa: E402
from collie.distributed import PayloadCategory, all_gather, all_reduce, broadcast, reduce_scatter  # noqa: E402
from collie.timing import init_timing_logger, shutdown_timing_logger  # noqa: E402

STEPS, SLEEP_S = 4, 0.03
cd.configure({"runtime": {"comms_log": {"enabled": True, "dir": outdir}}, "model": {"layers": 3}})
dist.init_process_group(backend)
rank, p = dist.get_rank(), dist.get_world_size()
logger = init_timing_logger(rank, os.path.join(outdir, "timing"))
has_rs = backend != "gloo"


def allreduce_wire(nbytes):
    return 2 * (p - 1) * nbytes // p


expect = []
for s in range(1, STEPS + 1):
    epoch = (s - 1) // 2
    g = torch.full((1000,), float(rank + 1), device=device)  # 4000 bytes
    feats = [torch.zeros(250, device=device) for _ in range(p)]  # 1000-byte shards
    mu = torch.full((64,), float(rank), device=device)  # 256 bytes
    idx = torch.ones(32, dtype=torch.int64, device=device)  # 256 bytes
    dist.barrier()
    t0 = time.monotonic()
    with cd.step(s, epoch):
        all_reduce(g, category=PayloadCategory.OTHER, label="layer1", phase="dense")
        all_gather(feats, torch.full((250,), float(rank), device=device),
                   category=PayloadCategory.FEATURES_ALLGATHER)
        broadcast(mu, src=0, category=PayloadCategory.MOMENTS_MU)
        w = all_reduce(idx, async_op=True, category=PayloadCategory.TOPR_INDICES)
        time.sleep(SLEEP_S)
        w.wait()
        if has_rs:
            out = torch.zeros(100, device=device)
            reduce_scatter(out, [torch.full((100,), float(q), device=device) for q in range(p)],
                           category=PayloadCategory.OTHER)
            assert torch.equal(out, torch.full((100,), float(rank * p), device=device)), out[:4]
    wall_ms = (time.monotonic() - t0) * 1e3
    g, feats, mu, idx = g.cpu(), [f.cpu() for f in feats], mu.cpu(), idx.cpu()
    assert torch.equal(g, torch.full((1000,), float(p * (p + 1) // 2)))
    assert all(torch.equal(feats[q], torch.full((250,), float(q))) for q in range(p))
    assert torch.equal(mu, torch.zeros(64)) and torch.equal(idx, torch.full((32,), p, dtype=torch.int64))
    ar = allreduce_wire(4000) + allreduce_wire(256)
    row = {"step": s, "epoch": epoch, "world_size": p, "bytes_all_reduce": ar, "bytes_all_gather": (p - 1) * 1000,
           "bytes_reduce_scatter": (p - 1) * 400 if has_rs else 0, "bytes_broadcast": 256,
           "bytes_features_allgather": (p - 1) * 1000, "bytes_moments_mu": 256,
           "bytes_topr_indices": allreduce_wire(256),
           "bytes_other": allreduce_wire(4000) + ((p - 1) * 400 if has_rs else 0), "wall_ms": wall_ms}
    row["bytes_total"] = ar + row["bytes_all_gather"] + row["bytes_reduce_scatter"] + 256
    expect.append(row)

# Outside any step: charged nowhere.
all_reduce(torch.ones(8, device=device))
shutdown_timing_logger()
dist.destroy_process_group()
if rank == 0:
    with open(os.path.join(outdir, "expect.json"), "w") as f:
        json.dump({"rows": expect, "sleep_ms": SLEEP_S * 1e3, "has_rs": has_rs, "device": str(device)}, f)
print("mfcl ok", rank)
