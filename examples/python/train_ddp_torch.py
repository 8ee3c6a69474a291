"""train_ddp_torch.py - data-parallel training with torch's DistributedDataParallel
on CPU, over collie as a torch.distributed backend (or gloo, to compare).

    build/collierun -n 4 /usr/bin/python3 examples/python/train_ddp_torch.py                 # collie
    build/collierun -n 4 /usr/bin/python3 examples/python/train_ddp_torch.py --backend gloo
    torchrun --nproc-per-node 4 examples/python/train_ddp_torch.py --backend gloo            # torch 2.x
    build/collierun -n 2 /usr/bin/python3 examples/python/train_ddp_torch.py --hook fp16 --log-dir logs

The program is plain PyTorch: `import collie.torch` registers the "collie"
backend, and init_process_group(backend) reads RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT from the environment (env://), which torchrun and collierun
both set. (A collierun that sets only COLLIE_RANK/COLLIE_WORLD_SIZE is
handled too: MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to
--master-port or a port derived from the job's token.)

The task: classify points of R^16 into 4 classes drawn by a fixed random
"teacher" network, with a small MLP (16 -> 64 -> 64 -> 4) and SGD. A
DistributedSampler gives each rank its share of a TensorDataset; DDP
averages the gradients across ranks during backward. Rank 0 prints the
global loss (averaged over ranks) as it goes down, and the accuracy per epoch.

--hook fp16|bf16 registers one of torch's DDP communication hooks
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks): the gradient
buckets travel as float16 / bfloat16 (gloo in torch 1.13 cannot all-reduce
bfloat16; collie can. DDP itself refuses the bf16 hook without CUDA
and NCCL, by its name: this program registers it under another).

With the collie backend each step runs inside
`with collie.torch.step(step, epoch):`, so rank 0's comms.csv (in --log-dir,
else COLLIE_LOG_DIR, else the working directory) gets one row per step with
the bytes and time of its collectives (docs/telemetry.md).

At the end every rank's parameters must be identical (DDP's promise): the
ranks all-gather a checksum of their parameters, and the program exits 1 if
any rank's differs.
"""

import argparse
import contextlib
import datetime
import hashlib
import os
import sys


def launcher_env(master_port=None):
    """torchrun and a current collierun set RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT; an older collierun only COLLIE_RANK and COLLIE_WORLD_SIZE."""
    e = os.environ
    if "RANK" not in e or "WORLD_SIZE" not in e:
        if "COLLIE_RANK" not in e or "COLLIE_WORLD_SIZE" not in e:
            sys.exit("train_ddp_torch: no RANK/WORLD_SIZE: run under torchrun or collierun, e.g.\n"
                     "  build/collierun -n 4 /usr/bin/python3 examples/python/train_ddp_torch.py")
        e["RANK"], e["WORLD_SIZE"] = e["COLLIE_RANK"], e["COLLIE_WORLD_SIZE"]
        e.setdefault("LOCAL_RANK", e.get("COLLIE_LOCAL_RANK", e["RANK"]))
        e.setdefault("LOCAL_WORLD_SIZE", e.get("COLLIE_LOCAL_SIZE", e["WORLD_SIZE"]))
    e.setdefault("MASTER_ADDR", "127.0.0.1")
    if master_port:
        e["MASTER_PORT"] = str(master_port)
    elif not e.get("MASTER_PORT"):
        token = e.get("COLLIE_JOB_TOKEN") or e.get("COLLIE_STORE")
        if not token:
            sys.exit("train_ddp_torch: MASTER_PORT is not set: pass --master-port PORT (the same on every rank)")
        # The same on every rank of the job; below the kernel's ephemeral ports.
        e["MASTER_PORT"] = str(20000 + int(hashlib.sha256(token.encode()).hexdigest()[:8], 16) % 10000)


def import_collie_torch():
    """collie.torch, from this source tree when collie is not installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)  # for _common, also when this file is run through runpy
    try:
        from _common import collie  # noqa: F401  (puts python/ on sys.path when needed)
        import collie.torch
    except Exception as exc:
        sys.exit("train_ddp_torch: --backend collie needs collie.torch (python/collie/torch/), and "
                 "'import collie.torch' failed: %s: %s\n  run with --backend gloo meanwhile" % (type(exc).__name__, exc))
    return collie.torch


def make_data(torch, n, d_in, classes, seed=0):
    """Points and the labels a fixed random teacher network gives them."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w1 = torch.randn(d_in, 32, generator=g) / d_in ** 0.5
    w2 = torch.randn(32, classes, generator=g) / 32 ** 0.5
    y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)
    return x, y


def param_checksum(torch, model):
    """Three float64 numbers that differ when any parameter differs (in
    practice): the sum, the sum of squares and a position-weighted sum."""
    flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])
    pos = torch.arange(1, flat.numel() + 1, dtype=torch.float64) / flat.numel()
    return torch.stack([flat.sum(), (flat * flat).sum(), (flat * pos).sum()])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("collie", "gloo"), default="collie",
                    help="torch.distributed backend (default collie)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="steps per epoch (at most the sampler's batches)")
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=8192, help="dataset size (all ranks together)")
    ap.add_argument("--hook", choices=("none", "fp16", "bf16"), default="none",
                    help="DDP communication hook compressing the gradients (default none)")
    ap.add_argument("--log-dir", help="collie backend: where rank 0 writes comms.csv (COLLIE_LOG_DIR)")
    ap.add_argument("--master-port", type=int, help="MASTER_PORT when the launcher sets none")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.epochs < 1 or a.steps < 1 or a.batch < 1:
        ap.error("--epochs, --steps and --batch must be >= 1")

    launcher_env(a.master_port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    collie_torch = None
    if a.backend == "collie":
        if a.log_dir:
            os.makedirs(a.log_dir, exist_ok=True)
            os.environ["COLLIE_LOG_DIR"] = a.log_dir  # read when the backend creates its communicator
        collie_torch = import_collie_torch()

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))
    dist.init_process_group(a.backend, init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, size = dist.get_rank(), dist.get_world_size()

    def say(msg):
        if rank == 0:
            print(msg, flush=True)

    torch.manual_seed(a.seed)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    d_in, classes = 16, 4
    x, y = make_data(torch, a.samples, d_in, classes, a.seed)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True, seed=a.seed)
    loader = DataLoader(dataset, batch_size=a.batch, sampler=sampler, drop_last=True)
    model = torch.nn.Sequential(torch.nn.Linear(d_in, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, classes))
    ddp = DDP(model)
    if a.hook != "none":
        hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[a.hook]
        if a.hook == "bf16":
            # gloo in torch 1.13 rejects bfloat16 ("Invalid scalar type"): say so before training.
            try:
                dist.all_reduce(torch.zeros(1, dtype=torch.bfloat16))
            except RuntimeError as exc:
                say("train_ddp_torch: --hook bf16: the %s backend cannot all-reduce bfloat16 here (%s); "
                    "use --hook fp16 or --backend collie" % (a.backend, str(exc).splitlines()[0]))
                return 2
            # DDP refuses torch's bf16_compress_hook by name unless CUDA and NCCL are there
            # ("BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+"), though
            # the hook is plain torch.distributed. Under another name it runs on CPU.
            torch_bf16_hook = hook

            def bf16_hook_cpu(state, bucket):
                return torch_bf16_hook(state, bucket)

            hook = bf16_hook_cpu
        ddp.register_comm_hook(dist.group.WORLD, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    say("train_ddp_torch: %d ranks, backend %s, torch %s, hook %s, %d epochs x %d steps x %d samples per rank"
        % (size, a.backend, torch.__version__, a.hook, a.epochs, min(a.steps, len(loader)), a.batch))

    step = 0
    epoch_loss = []  # the mean global loss of each epoch
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)  # a different shuffle per epoch, the same on every rank
        losses = []
        for i, (xb, yb) in enumerate(loader):
            if i >= a.steps:
                break
            step += 1
            # collie: the step's collectives become one comms.csv row (steps count from 1).
            mark = collie_torch.step(step, epoch) if collie_torch is not None else contextlib.nullcontext()
            with mark:
                opt.zero_grad()
                loss = loss_fn(ddp(xb), yb)
                loss.backward()  # DDP all-reduces the gradients here
                opt.step()
                g = loss.detach().reshape(1)
                dist.all_reduce(g)  # the global loss: every rank's, averaged
            losses.append(g.item() / size)
            say("epoch %d  step %3d  loss %.4f" % (epoch, step, losses[-1]))
        epoch_loss.append(sum(losses) / len(losses))
        # Accuracy on a fixed slice of the data (the same on every rank).
        with torch.no_grad():
            acc = (model(x[:2048]).argmax(dim=1) == y[:2048]).float().mean().item()
        say("epoch %d  mean loss %.4f  accuracy %.3f" % (epoch, epoch_loss[-1], acc))

    # DDP keeps the replicas identical: check it.
    mine = param_checksum(torch, model)
    every = [torch.zeros_like(mine) for _ in range(size)]
    dist.all_gather(every, mine)
    bad = [r for r in range(size) if not torch.equal(every[r], every[0])]
    code = 0
    if bad:
        say("train_ddp_torch: FAILED: the parameters of rank(s) %s differ from rank 0's (checksums %s vs %s)"
            % (bad, [every[r].tolist() for r in bad], every[0].tolist()))
        code = 1
    else:
        say("train_ddp_torch: mean loss %.4f (epoch 0) -> %.4f (epoch %d) in %d steps; parameters identical "
            "on all %d ranks" % (epoch_loss[0], epoch_loss[-1], a.epochs - 1, step, size))
        if a.epochs > 1 and epoch_loss[-1] >= epoch_loss[0]:
            say("train_ddp_torch: warning: the loss did not go down")
    dist.barrier()
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
