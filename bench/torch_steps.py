"""torch_steps.py - training-step timings for bench/torch_compare.py: one model
per backend (same initial weights, same data), taking alternate steps, and
the table of their step times. The modes:

--ddp   DistributedDataParallel (torch_compare.py's ddp_models: an MLP and a
        25 M-parameter stack of Linear layers);
--fsdp  FSDP2 (torch 2.x's fully_shard, each block and the root) of a small
        GPT-style model (gpt_model: 13.7 M parameters by default), on a
        DeviceMesh over the backend's group;
--tp    tensor parallelism (parallelize_module: attention's q/k/v and the
        MLP's first Linear column-wise, their output projections row-wise)
        of the same model, on a mesh of all the ranks (every rank feeds the
        same batch, as tensor parallelism requires).

A step is forward + backward (+ the parallelism's communication) + an SGD
step; the table shows, per model and backend, the median over the timed
steps of the slowest rank's step time, with 'local' the same model without
any parallelism (the compute alone; for --tp the whole unsharded model, so
tp's steps can be shorter). At the end the models of the two backends must
hold the same parameters (up to float rounding): the largest difference is
printed.
"""

import copy
import statistics
import time


def gpt_model(torch, vocab=8192, d=384, layers=6, heads=8, ctx=64):
    """A GPT-style decoder: token and position embeddings, `layers` blocks of
    causal self-attention and a 4x MLP (pre-LayerNorm), a tied output head.
    Attention reshapes by head_dim (d / heads) with the head count inferred,
    so a block whose q/k/v are split column-wise over tp ranks runs its share
    of the heads."""
    nn = torch.nn
    F = torch.nn.functional
    hd = d // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.proj = nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            h = self.ln1(x)
            q, k, v = (m(h).view(b, t, -1, hd).transpose(1, 2) for m in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.tok.weight.t()

    return GPT, vocab, ctx


def time_steps(job, csv, name, nparams, batch, runs, data, step):
    """Alternate steps of each run (label, module, optimizer, backend or
    None for 'local') over data (a list of batches); step(module, batch)
    returns the loss. Prints and writes the table's rows for model name."""
    a, dist = job.args, job.dist
    total = a.warmup + a.iters
    times = [[0.0] * len(runs) for _ in range(total)]
    for s in range(total):
        order = range(len(runs)) if s % 2 == 0 else reversed(range(len(runs)))
        for i in order:
            _, mod, opt, b = runs[i]
            if b is not None:
                job.barrier(b)
            else:
                dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)  # keep the gradients' memory: no page faults
            step(mod, data[s % len(data)]).backward()
            opt.step()
            times[s][i] = time.perf_counter() - t0
    flat = job.maxall([x for row in times[a.warmup:] for x in row])
    cols = []
    for i, (label, _, _, _) in enumerate(runs):
        col = [flat[s * len(runs) + i] for s in range(a.iters)]
        cols.append(col)
        med = statistics.median(col)
        job.out("%-6s %10d %6d  %-8s %10.2f %10.2f %10.2f" % (name, nparams, batch, label, med * 1e3,
                                                             min(col) * 1e3, max(col) * 1e3))
        if csv:
            csv.write("%s,%d,%s,%d,%d,%.4f,%.4f,%.4f,%d\n" % (name, nparams, label, job.n, batch, med * 1e3,
                                                               min(col) * 1e3, max(col) * 1e3, a.iters))
    if len(runs) > 2 and runs[1][3] is not None:
        # The machine's speed moves between seconds: the two backends' steps
        # of one round ran back to back, so their ratio is the steadier figure.
        ratios = [x / y for x, y in zip(cols[0], cols[1])]
        job.note("%s: %s/%s step time, paired by round: median %.3fx (%.3f .. %.3f), %s faster in %d of %d "
                 "rounds" % (name, runs[0][0], runs[1][0], statistics.median(ratios), min(ratios), max(ratios),
                             runs[1][0], sum(r > 1 for r in ratios), len(ratios)))


def table_header(job, csv, what):
    a = job.args
    if csv:
        csv.write("model,params,backend,nranks,batch,step_ms,step_min_ms,step_max_ms,steps\n")
    job.note("step = forward + backward (+ %s) + SGD step; slowest rank's time, median over %d steps after %d "
             "warm-up steps; 'local' is the same model without it" % (what, a.iters, a.warmup))
    job.out("%-6s %10s %6s  %-8s %10s %10s %10s" % ("model", "params", "batch", "backend", "step_ms", "min", "max"))


def compare_params(job, name, total, first, second, full=lambda p: p):
    """The largest difference between two backends' parameters (full(p):
    a sharded parameter's whole value)."""
    p0 = [full(p).detach() for p in first[1].parameters()]
    p1 = [full(p).detach() for p in second[1].parameters()]
    diff = job.maxall([max(float((u - v).abs().max()) for u, v in zip(p0, p1))])[0]
    scale = max(float(p.abs().max()) for p in p0)
    job.note("%s: largest parameter difference between the %s and %s models after %d steps: %.3g (largest "
             "parameter %.3g)" % (name, first[0], second[0], total, diff, scale))


def _mesh(job, backend):
    """A 1-D mesh over the backend's group, named after the backend. The name
    matters: torch (2.13) compares meshes by ranks, device type and dimension
    names only, not by group, and DTensor's sharding cache hands a later
    model the first equal mesh it saw; two unnamed meshes over the same
    ranks would send the second backend's collectives through the first's
    group."""
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(job.groups[backend], "cpu", mesh_dim_names=(backend,))


def _full(p):
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def _gpt_runs(job, shard):
    """(name, nparams, batch, runs, data, step) of the GPT model, each
    backend's copy made parallel by shard(module, mesh); 'local' last."""
    torch, a = job.torch, job.args
    GPT, vocab, ctx = gpt_model(torch, d=a.gpt_dim, layers=a.gpt_layers)
    torch.manual_seed(1234)
    base = GPT()
    nparams = sum(p.numel() for p in base.parameters())
    runs = []
    for b in a.backends:
        m = shard(copy.deepcopy(base), _mesh(job, b))
        runs.append((b, m, torch.optim.SGD(m.parameters(), lr=1e-3), b))
    m = copy.deepcopy(base)
    runs.append(("local", m, torch.optim.SGD(m.parameters(), lr=1e-3), None))
    return base, nparams, runs, vocab, ctx


def _gpt_step(torch):
    F = torch.nn.functional

    def step(mod, batch):
        x, y = batch
        logits = mod(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    return step


def run_fsdp(job, csv):
    torch, a = job.torch, job.args
    from torch.distributed.fsdp import fully_shard

    def shard(m, mesh):
        for blk in m.blocks:
            fully_shard(blk, mesh=mesh)
        return fully_shard(m, mesh=mesh)

    table_header(job, csv, "FSDP2's all-gathers and reduce-scatters")
    _, nparams, runs, vocab, ctx = _gpt_runs(job, shard)
    gen = torch.Generator().manual_seed(99 + job.rank)  # data parallel: a batch of each rank's own
    data = [(torch.randint(vocab, (a.gpt_batch, ctx), generator=gen),
             torch.randint(vocab, (a.gpt_batch, ctx), generator=gen)) for _ in range(4)]
    time_steps(job, csv, "gpt", nparams, a.gpt_batch, runs, data, _gpt_step(torch))
    if len(a.backends) == 2:
        compare_params(job, "gpt", a.warmup + a.iters, runs[0], runs[1], _full)


def run_tp(job, csv):
    torch, a = job.torch, job.args
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "proj": RowwiseParallel(),
            "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}

    def shard(m, mesh):
        for blk in m.blocks:
            parallelize_module(blk, mesh, plan)
        return m

    if 8 % job.n:
        job.note("--tp: the model's 8 attention heads do not split over %d ranks" % job.n)
        return
    table_header(job, csv, "tensor parallelism's all-reduces")
    _, nparams, runs, vocab, ctx = _gpt_runs(job, shard)
    gen = torch.Generator().manual_seed(99)  # tensor parallel: the same batch on every rank
    data = [(torch.randint(vocab, (a.gpt_batch, ctx), generator=gen),
             torch.randint(vocab, (a.gpt_batch, ctx), generator=gen)) for _ in range(4)]
    time_steps(job, csv, "gpt", nparams, a.gpt_batch, runs, data, _gpt_step(torch))
    if len(a.backends) == 2:
        compare_params(job, "gpt", a.warmup + a.iters, runs[0], runs[1], _full)
