"""Collectives through torch.distributed on CPU tensors, each result checked
against a reference computed from every rank's input (refs.py): all_reduce
over every op and dtype and several sizes, non-contiguous tensors, and every
other collective at every root, in and out of place, plus the pickled-object
collectives.

Gloo 1.13 (the backend the references were checked with) lacks bfloat16 and
bool in collectives, ReduceOp.AVG, reduce_scatter, all_to_all (list form),
all_gather_into_tensor and reduce_scatter_tensor: those tests run for collie
only."""

import pytest
import torch
import torch.distributed as dist

from conftest import BACKEND, IS_COLLIE, SIZE, collie_only
from refs import BITWISE, dtname, op_of, pattern, rank_input, reduce_ref, same

NO_BF16_BOOL = "gloo 1.13 rejects bfloat16 and bool tensors in collectives ('Invalid scalar type')"
NO_AVG = "gloo 1.13 lacks ReduceOp.AVG ('Cannot use ReduceOp.AVG with Gloo')"

FLOATS = (torch.float32, torch.float64, torch.float16)
INTS = (torch.int8, torch.uint8, torch.int32, torch.int64)
ARITH = ("SUM", "PRODUCT", "MIN", "MAX")


def _cases():
    for dt in FLOATS:
        for op in ARITH:
            yield dt, op, ()
    for dt in INTS:
        for op in ARITH + BITWISE:
            yield dt, op, ()
    for op in ("MIN", "MAX") + BITWISE:
        yield torch.bool, op, (collie_only(NO_BF16_BOOL),)
    for op in ARITH:
        yield torch.bfloat16, op, (collie_only(NO_BF16_BOOL),)
    for dt in FLOATS:
        yield dt, "AVG", (collie_only(NO_AVG),)
    yield torch.bfloat16, "AVG", (collie_only(NO_AVG),)


CASES = [pytest.param(dt, op, marks=m, id="%s-%s" % (dtname(dt), op)) for dt, op, m in _cases()]
SHAPES = [(0,), (), (1,), (7,), (1000,), (2, 3, 5)]


@pytest.mark.parametrize("dtype,op", CASES)
def test_all_reduce(dtype, op, rank, size):
    """Every (dtype, op) pair at sizes 0, scalar, 1, 7, 1000 and a 3-D shape:
    in place, the shape and dtype kept, the reference's values exactly."""
    for shape in SHAPES:
        t = rank_input(dtype, op, rank, shape)
        keep = t
        assert dist.all_reduce(t, op=op_of(op)) is None
        want = reduce_ref([rank_input(dtype, op, r, shape) for r in range(size)], op, dtype)
        assert keep is t and same(t, want), "shape %s:\n got %s\nwant %s" % (shape, t, want)


@pytest.mark.parametrize("dtype,op", [(torch.float32, "SUM"), (torch.int64, "MAX")], ids=["float32-SUM", "int64-MAX"])
def test_all_reduce_large(dtype, op, rank, size):
    n = 1 << 20
    t = rank_input(dtype, op, rank, (n,))
    dist.all_reduce(t, op=op_of(op))
    assert same(t, reduce_ref([rank_input(dtype, op, r, (n,)) for r in range(size)], op, dtype))


def test_all_reduce_default_op_is_sum(rank, size):
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert same(t, torch.full((5,), size * (size + 1) / 2))


def test_all_reduce_complex64_sum(rank, size):
    """Complex tensors reduce as pairs of floats (torch views them as real)."""
    def inp(r):
        return torch.complex(torch.arange(9.0) + r, torch.arange(9.0) * -2 - r)

    t = inp(rank)
    dist.all_reduce(t)
    assert same(t, reduce_ref([inp(r) for r in range(size)], "SUM", torch.complex64))


def test_all_reduce_complex_max_refused(rank):
    """torch itself refuses ops without a complex meaning, before the backend
    (1.13 raises RuntimeError, 2.11 ValueError)."""
    t = torch.ones(3, dtype=torch.complex64)
    with pytest.raises((RuntimeError, ValueError), match="does not support"):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)


@pytest.mark.parametrize("op", BITWISE)
def test_bitwise_op_on_float_refused(op, short_group):
    """Gloo raises RuntimeError('Cannot use ReduceOp.BAND with non-integral
    dtype') on every rank; collie must refuse too (RuntimeError or
    ValueError). On a throwaway group: gloo's group is unusable afterwards."""
    t = torch.ones(4)
    with pytest.raises((RuntimeError, ValueError)):
        dist.all_reduce(t, op=op_of(op), group=short_group)


def test_premul_sum(rank, size, world, short_group):
    """PREMUL_SUM (torch's private _make_nccl_premul_sum): either it works
    (factor x sum) or it raises RuntimeError naming it (gloo: 'Cannot use
    ReduceOp.PREMUL_SUM with Gloo'); every rank the same."""
    t = torch.full((6,), float(rank + 1))
    try:
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0), group=short_group)
        outcome = ("ok", t.tolist())
    except RuntimeError as e:
        outcome = ("raised", "PREMUL_SUM" in str(e), str(e))
    outcomes = world.gather(outcome[:2])
    assert len(set(map(repr, outcomes))) == 1, outcomes
    if outcome[0] == "ok":
        assert outcome[1] == [2.0 * size * (size + 1) / 2] * 6
    else:
        assert outcome[1], "the error does not name PREMUL_SUM: %s" % outcome[2]


# --- non-contiguous tensors -------------------------------------------------


def test_all_reduce_transposed(rank, size):
    """A transposed (dense, non-contiguous) tensor: gloo reduces it correctly
    in place; collie must too."""
    def inp(r):
        return (torch.arange(12.0) + 100 * r).reshape(4, 3).t()

    t = inp(rank)
    assert not t.is_contiguous()
    dist.all_reduce(t)
    assert same(t, reduce_ref([inp(r) for r in range(size)], "SUM", torch.float32))


def test_all_reduce_strided_view(rank, size):
    """A view with gaps (x[::2]). Gloo 1.13 silently reduces the wrong
    elements: the first numel elements of the storage from the view's offset
    (recorded below, so a change in gloo shows). collie must not copy that:
    either the view's own elements are reduced and the gaps untouched, or it
    raises RuntimeError/ValueError before communicating and the base tensor
    is untouched."""
    def base_of(r):
        return torch.arange(10.0) + 100 * r

    base = base_of(rank)
    view = base[::2]
    try:
        dist.all_reduce(view)
        raised = None
    except (RuntimeError, ValueError) as e:
        raised = e
    bases = [base_of(r) for r in range(size)]
    if BACKEND == "gloo":
        assert raised is None
        want = base_of(rank)
        want[:5] = sum(b[:5] for b in bases)  # the storage prefix, not the view
        assert same(base, want)
        return
    if raised is not None:
        assert same(base, base_of(rank)), "raised (%s) but changed the tensor" % raised
    else:
        want = base_of(rank)
        want[::2] = sum(b[::2] for b in bases)
        assert same(base, want), "the view's elements must be reduced and the gaps left alone"


def test_broadcast_transposed(rank, size):
    src = size - 1
    t = pattern(torch.float32, rank, (4, 3)).t()
    dist.broadcast(t, src)
    assert same(t, pattern(torch.float32, src, (4, 3)).t())


def test_all_gather_transposed(rank, size):
    """Transposed input and transposed outputs: gloo gathers them right."""
    outs = [torch.zeros(3, 4).t() for _ in range(size)]
    dist.all_gather(outs, pattern(torch.float32, rank, (3, 4)).t())
    for r in range(size):
        assert same(outs[r], pattern(torch.float32, r, (3, 4)).t())


# --- other collectives ------------------------------------------------------


@pytest.mark.filterwarnings("ignore:torch.distributed.all_reduce_coalesced will be deprecated")
def test_all_reduce_coalesced(rank, size):
    shapes = [(3,), (0,), (2, 5), (17,)]
    for op in ("SUM", "MAX"):
        ts = [rank_input(torch.float32, op, rank, s) for s in shapes]
        dist.all_reduce_coalesced(ts, op=op_of(op))
        for t, s in zip(ts, shapes):
            assert same(t, reduce_ref([rank_input(torch.float32, op, r, s) for r in range(size)], op, torch.float32))


BCAST_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int32, torch.int64,
                pytest.param(torch.bfloat16, marks=collie_only(NO_BF16_BOOL)),
                pytest.param(torch.bool, marks=collie_only(NO_BF16_BOOL))]


@pytest.mark.parametrize("dtype", BCAST_DTYPES, ids=dtname)
def test_broadcast_every_root(dtype, rank, size):
    for src in range(size):
        for shape in [(0,), (7,), (1000,)]:
            t = pattern(dtype, rank, shape, salt=src)
            dist.broadcast(t, src)
            assert same(t, pattern(dtype, src, shape, salt=src)), (src, shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.uint8, torch.complex64,
                                   pytest.param(torch.bfloat16, marks=collie_only(NO_BF16_BOOL)),
                                   pytest.param(torch.bool, marks=collie_only(NO_BF16_BOOL))], ids=dtname)
def test_all_gather(dtype, rank, size):
    for shape in [(1,), (7,), (2, 50)]:
        outs = [torch.zeros(shape, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, pattern(dtype, rank, shape))
        for r in range(size):
            assert same(outs[r], pattern(dtype, r, shape)), (r, shape)


@collie_only("gloo 1.13 crashes (SIGFPE) in an all_gather of empty tensors")
@pytest.mark.filterwarnings("ignore:torch.distributed.all_gather_coalesced will be deprecated")
def test_all_gather_empty(rank, size):
    outs = [torch.ones(0) for _ in range(size)]
    dist.all_gather(outs, torch.ones(0))
    assert all(o.shape == (0,) for o in outs)
    outs = [[torch.zeros(2), torch.zeros(0)] for _ in range(size)]
    dist.all_gather_coalesced(outs, [pattern(torch.float32, rank, (2,)), torch.zeros(0)])
    assert all(same(outs[r][0], pattern(torch.float32, r, (2,))) for r in range(size))


def _agit():
    return getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base


@collie_only("gloo 1.13 lacks all_gather_into_tensor ('no support for _allgather_base in Gloo process group')")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16], ids=dtname)
def test_all_gather_into_tensor(dtype, rank, size):
    """Concatenated output (size*n,), stacked output (size, n), both entry
    points (all_gather_into_tensor and 1.13's _all_gather_base), and in place
    (the input is the rank's own slice of the output)."""
    n = 7
    want = torch.cat([pattern(dtype, r, (n,)) for r in range(size)])
    out = torch.zeros(size * n, dtype=dtype)
    _agit()(out, pattern(dtype, rank, (n,)))
    assert same(out, want)
    out2 = torch.zeros(size, n, dtype=dtype)
    _agit()(out2, pattern(dtype, rank, (n,)))
    assert same(out2, want.reshape(size, n))
    out3 = torch.zeros(size * n, dtype=dtype)
    dist._all_gather_base(out3, pattern(dtype, rank, (n,)))
    assert same(out3, want)
    inplace = torch.zeros(size * n, dtype=dtype)
    inplace[rank * n:(rank + 1) * n] = pattern(dtype, rank, (n,))
    _agit()(inplace, inplace[rank * n:(rank + 1) * n])
    assert same(inplace, want)
    if hasattr(dist, "all_gather_single"):  # newer torch's name for it (2.14)
        out4 = torch.zeros(size * n, dtype=dtype)
        dist.all_gather_single(out4, pattern(dtype, rank, (n,)))
        assert same(out4, want)


@pytest.mark.filterwarnings("ignore:torch.distributed.all_gather_coalesced will be deprecated")
def test_all_gather_coalesced(rank, size):
    shapes = [(2,), (3, 4), (1,)]
    outs = [[torch.zeros(s) for s in shapes] for _ in range(size)]
    dist.all_gather_coalesced(outs, [pattern(torch.float32, rank, s, salt=i) for i, s in enumerate(shapes)])
    for r in range(size):
        for i, s in enumerate(shapes):
            assert same(outs[r][i], pattern(torch.float32, r, s, salt=i))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=dtname)
def test_gather_every_root(dtype, rank, size):
    for dst in range(size):
        inp = pattern(dtype, rank, (5,), salt=dst)
        if rank == dst:
            outs = [torch.zeros(5, dtype=dtype) for _ in range(size)]
            dist.gather(inp, outs, dst=dst)
            for r in range(size):
                assert same(outs[r], pattern(dtype, r, (5,), salt=dst)), (dst, r)
        else:
            dist.gather(inp, dst=dst)
        assert same(inp, pattern(dtype, rank, (5,), salt=dst))  # the input is left alone


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=dtname)
def test_scatter_every_root(dtype, rank, size):
    for src in range(size):
        out = torch.zeros(6, dtype=dtype)
        ins = [pattern(dtype, src, (6,), salt=j) for j in range(size)] if rank == src else None
        dist.scatter(out, ins, src=src)
        assert same(out, pattern(dtype, src, (6,), salt=rank)), src


@pytest.mark.parametrize("op", ["SUM", "PRODUCT", "MIN", "MAX", "BXOR"])
def test_reduce_every_root(op, rank, size):
    """The result on dst (the others' buffers are unspecified, not checked)."""
    dtype = torch.int32 if op == "BXOR" else torch.float32
    for dst in range(size):
        t = rank_input(dtype, op, rank, (33,))
        dist.reduce(t, dst, op=op_of(op))
        if rank == dst:
            assert same(t, reduce_ref([rank_input(dtype, op, r, (33,)) for r in range(size)], op, dtype)), dst


@collie_only("gloo 1.13 lacks reduce_scatter ('ProcessGroupGloo does not support reduce_scatter')")
@pytest.mark.parametrize("op", ["SUM", "MAX"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=dtname)
def test_reduce_scatter_list(op, dtype, rank, size):
    """Out of place: rank r gets the reduction of every rank's input_list[r]."""
    def inp(r, j):
        return rank_input(dtype, op, r * size + j, (9,))

    out = torch.zeros(9, dtype=dtype)
    ins = [inp(rank, j) for j in range(size)]
    dist.reduce_scatter(out, ins, op=op_of(op))
    assert same(out, reduce_ref([inp(r, rank) for r in range(size)], op, dtype))
    for j in range(size):
        assert same(ins[j], inp(rank, j))  # the inputs are left alone


def _rst():
    return getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base


@collie_only("gloo 1.13 lacks reduce_scatter_tensor ('ProcessGroup gloo does not support _reduce_scatter_base')")
@pytest.mark.parametrize("op", ["SUM", "MIN"])
def test_reduce_scatter_tensor(op, rank, size):
    """Out of place from a (size*n,) input and a (size, n) input, through
    both entry points, and in place (the output is the rank's own slice of
    the input)."""
    n = 11
    full = [rank_input(torch.float32, op, r, (size * n,)) for r in range(size)]
    want = reduce_ref(full, op, torch.float32)[rank * n:(rank + 1) * n]
    out = torch.zeros(n)
    _rst()(out, full[rank].clone(), op=op_of(op))
    assert same(out, want)
    out = torch.zeros(n)
    dist._reduce_scatter_base(out, full[rank].clone().reshape(size, n), op=op_of(op))
    assert same(out, want)
    buf = full[rank].clone()
    _rst()(buf[rank * n:(rank + 1) * n], buf, op=op_of(op))
    assert same(buf[rank * n:(rank + 1) * n], want)
    if hasattr(dist, "reduce_scatter_single"):  # newer torch's name for it (2.14)
        out = torch.zeros(n)
        dist.reduce_scatter_single(out, full[rank].clone(), op=op_of(op))
        assert same(out, want)


def _block(src, dst, rows, cols=3):
    """What src sends to dst in the all-to-all tests: rows x cols, values
    naming both ends."""
    return (torch.arange(rows * cols, dtype=torch.float32) + 1000 * src + 100 * dst).reshape(rows, cols)


def _rows(src, dst):
    return (2 * src + dst) % 3  # uneven, some zero


@collie_only("gloo 1.13 lacks all_to_all ('ProcessGroup gloo does not support alltoall')")
def test_all_to_all_list(rank, size):
    """List form, uneven blocks (some empty): out[j] is what rank j sent here."""
    ins = [_block(rank, j, _rows(rank, j)) for j in range(size)]
    outs = [torch.zeros(_rows(j, rank), 3) for j in range(size)]
    dist.all_to_all(outs, ins)
    for j in range(size):
        assert same(outs[j], _block(j, rank, _rows(j, rank))), j


def test_all_to_all_single_even(rank, size):
    inp = torch.cat([_block(rank, j, 2) for j in range(size)])
    out = torch.zeros(2 * size, 3)
    dist.all_to_all_single(out, inp)
    assert same(out, torch.cat([_block(j, rank, 2) for j in range(size)]))


def test_all_to_all_single_uneven(rank, size):
    """Split sizes count rows (first-dimension slices); some splits are 0."""
    ins = [_rows(rank, j) for j in range(size)]
    outs = [_rows(j, rank) for j in range(size)]
    inp = torch.cat([_block(rank, j, ins[j]) for j in range(size)])
    out = torch.full((sum(outs), 3), -1.0)
    dist.all_to_all_single(out, inp, output_split_sizes=outs, input_split_sizes=ins)
    assert same(out, torch.cat([_block(j, rank, outs[j]) for j in range(size)]))


# --- object collectives -----------------------------------------------------


def _obj(r, salt=0):
    return {"rank": r, "salt": salt, "text": "x" * (r * 37 + salt), "t": torch.arange(r + 1), "nested": [r, (salt,)]}


def _same_obj(a, b):
    return (a["rank"], a["salt"], a["text"], a["nested"]) == (b["rank"], b["salt"], b["text"], b["nested"]) and \
        torch.equal(a["t"], b["t"])


def test_all_gather_object(rank, size):
    out = [None] * size
    dist.all_gather_object(out, _obj(rank))
    assert all(_same_obj(out[r], _obj(r)) for r in range(size))


def test_gather_object_every_root(rank, size):
    for dst in range(size):
        out = [None] * size if rank == dst else None
        dist.gather_object(_obj(rank, dst), out, dst=dst)
        if rank == dst:
            assert all(_same_obj(out[r], _obj(r, dst)) for r in range(size))


def test_broadcast_object_list_every_root(rank, size):
    for src in range(size):
        objs = [_obj(rank, src), "from %d" % rank, None] if rank == src else [None, None, 0]
        dist.broadcast_object_list(objs, src=src)
        assert _same_obj(objs[0], _obj(src, src)) and objs[1] == "from %d" % src and objs[2] is None


def test_scatter_object_list_every_root(rank, size):
    for src in range(size):
        out = [None]
        dist.scatter_object_list(out, [_obj(j, src) for j in range(size)] if rank == src else None, src=src)
        assert _same_obj(out[0], _obj(rank, src))


def test_barrier_waits_for_the_slowest(rank, size):
    """Rank 0 arrives 0.5 s late: nobody leaves the barrier before it came."""
    import time

    dist.barrier()
    if rank == 0:
        time.sleep(0.5)
    t0 = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - t0
    if rank != 0:
        assert waited > 0.3, "left the barrier after %.2f s, before rank 0 arrived" % waited


def test_backend_name(world):
    assert dist.is_initialized() and dist.get_backend() == BACKEND
    assert dist.get_rank() == world.rank and dist.get_world_size() == world.size == SIZE
    if IS_COLLIE:
        assert dist.get_backend(dist.group.WORLD) == "collie"


def test_all_reduce_sparse_coo(rank, size):
    """A sparse COO tensor sums as Gloo sums it: rank-dependent entries (and
    nnz), a hybrid tensor with a dense dimension, the result coalesced and in
    place; async_op gives a completed Work whose result() is the tensor; an
    op other than SUM is refused by name."""
    idx = torch.tensor([[0, 1, rank % 3], [2, rank, 4]])
    t = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0]) * (rank + 1), (3, 8))
    dist.all_reduce(t)
    want = sum(
        torch.sparse_coo_tensor(torch.tensor([[0, 1, r % 3], [2, r, 4]]), torch.tensor([1.0, 2.0, 3.0]) * (r + 1),
                                (3, 8)).to_dense()
        for r in range(size)
    )
    assert t.is_sparse and t.is_coalesced() and torch.equal(t.to_dense(), want)
    h = torch.sparse_coo_tensor(torch.tensor([[rank % 4]]), torch.ones(1, 3, dtype=torch.float64) * rank, (4, 3))
    w = dist.all_reduce(h, async_op=True)
    w.wait()
    want = torch.zeros(4, 3, dtype=torch.float64)
    for r in range(size):
        want[r % 4] += r
    assert torch.equal(h.to_dense(), want) and w.result()[0] is h
    with pytest.raises(RuntimeError, match="sparse tensors reduce with SUM only"):
        dist.all_reduce(h, op=dist.ReduceOp.MAX)
