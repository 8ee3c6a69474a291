"""dtype mapping: every numpy dtype collie has (float16 included), torch CPU
tensors (bfloat16 and float16 included), buffer-protocol objects; the
unsupported ones are refused by name, before any communication."""

import array

import numpy as np
import pytest

import collie
from collie import DType, ReduceOp
from collie._buffers import as_buf, contiguous_run

NUMPY = [
    (np.int8, DType.INT8),
    (np.uint8, DType.UINT8),
    (np.int32, DType.INT32),
    (np.uint32, DType.UINT32),
    (np.int64, DType.INT64),
    (np.uint64, DType.UINT64),
    (np.float16, DType.FLOAT16),
    (np.float32, DType.FLOAT32),
    (np.float64, DType.FLOAT64),
]


@pytest.mark.parametrize("np_dtype,dtype", NUMPY, ids=[d.name for _, d in NUMPY])
def test_numpy_dtypes(comm, rank, size, np_dtype, dtype):
    assert collie.dtype_of(np.zeros(2, dtype=np_dtype)) == dtype
    x = (np.arange(20) % 5 + rank).astype(np_dtype)
    comm.all_reduce(x)
    want = sum((np.arange(20) % 5 + q) for q in range(size))
    assert np.array_equal(x.astype(np.float64), want.astype(np_dtype).astype(np.float64))
    m = np.full(3, rank, dtype=np_dtype)
    comm.all_reduce(m, ReduceOp.MAX)
    assert m[0] == size - 1


def test_float16_rounding(comm, rank, size):
    # fp16 reduces through fp32: 0.1 summed size times, rounded once to fp16.
    x = np.full(8, 0.1, dtype=np.float16)
    comm.all_reduce(x)
    assert x.dtype == np.float16
    np.testing.assert_allclose(x.astype(np.float32), np.float16(0.1).astype(np.float32) * size, rtol=2e-3)


torch = pytest.importorskip("torch")

TORCH = [
    ("int8", DType.INT8),
    ("uint8", DType.UINT8),
    ("int32", DType.INT32),
    ("int64", DType.INT64),
    ("float16", DType.FLOAT16),
    ("bfloat16", DType.BFLOAT16),
    ("float32", DType.FLOAT32),
    ("float64", DType.FLOAT64),
]


@pytest.mark.parametrize("name,dtype", TORCH, ids=[n for n, _ in TORCH])
def test_torch_dtypes(comm, rank, size, name, dtype):
    td = getattr(torch, name)
    assert collie.dtype_of(torch.zeros(2, dtype=td)) == dtype
    t = (torch.arange(12) % 4 + rank).to(td)
    comm.all_reduce(t)  # zero-copy through data_ptr()
    want = sum((torch.arange(12) % 4 + q) for q in range(size)).to(td)
    assert torch.equal(t, want)
    out = torch.zeros(size * 3, dtype=td)
    comm.all_gather_single(out, torch.full((3,), rank, dtype=td))
    assert out.tolist() == [float(q) if td.is_floating_point else q for q in range(size) for _ in range(3)]


def test_torch_bfloat16_values(comm, rank, size):
    t = torch.full((16,), 1.5, dtype=torch.bfloat16) * (rank + 1)
    comm.all_reduce(t, ReduceOp.AVG)
    assert t.dtype == torch.bfloat16
    assert torch.allclose(t.float(), torch.full((16,), 1.5 * (size + 1) / 2), rtol=1e-2)


def test_torch_views_and_shapes(comm, rank, size):
    base = torch.zeros(4, 6)
    row = base[1]  # contiguous view with a storage offset
    row += rank + 1
    comm.all_reduce(row)
    assert base[1].tolist() == [size * (size + 1) / 2] * 6 and base[0].sum() == 0
    outs = list(torch.zeros(size, 2).unbind(0))  # rows of one tensor: zero-copy
    comm.all_gather(outs, torch.full((2,), float(rank)))
    assert [o[0].item() for o in outs] == list(range(size))
    grad = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        comm.all_reduce(grad)
    assert grad.tolist() == [size] * 3


def test_torch_errors(comm):
    with pytest.raises(collie.InvalidArgument, match="not contiguous"):
        comm.all_reduce(torch.zeros(4, 4).t())
    with pytest.raises(collie.InvalidArgument, match="torch.int16"):
        comm.all_reduce(torch.zeros(4, dtype=torch.int16))
    with pytest.raises(collie.InvalidArgument, match="torch.bool"):
        comm.all_reduce(torch.zeros(4, dtype=torch.bool))
    with pytest.raises(collie.InvalidArgument, match="torch.complex64"):
        comm.all_reduce(torch.zeros(4, dtype=torch.complex64))
    with pytest.raises(collie.InvalidArgument, match="device meta"):
        comm.all_reduce(torch.zeros(4, device="meta"))
    with pytest.raises(collie.InvalidArgument, match="layout"):
        comm.all_reduce(torch.zeros(4).to_sparse())

    # CUDA tensors are taken (the C library stages device memory; docs/gpu.md,
    # checked on a GPU by scripts/gpu_check.sh); other devices are not.
    with pytest.raises(collie.InvalidArgument, match="output is bfloat16 but input is float32"):
        comm.all_gather_single(torch.zeros(8, dtype=torch.bfloat16), torch.zeros(4))
    comm.barrier()  # still usable


def test_buffer_protocol_objects(comm, rank, size):
    ba = bytearray([rank] * 6)
    comm.all_reduce(ba)  # uint8
    assert list(ba) == [size * (size - 1) // 2] * 6
    arr = array.array("f", [1.0, 2.0])
    comm.all_reduce(arr)
    assert list(arr) == [size * 1.0, size * 2.0]
    ints = array.array("q", [rank])
    out = array.array("q", [0] * size)
    comm.all_gather_single(out, ints)
    assert list(out) == list(range(size))
    mv = memoryview(bytearray(8)).cast("i")
    mv[0] = rank
    comm.all_reduce(mv, ReduceOp.MAX)
    assert mv[0] == size - 1
    got = bytearray(3)
    comm.all_gather_single(bytearray(3 * size), b"abc")  # bytes: a read-only input is fine
    comm.broadcast(got if rank else bytearray(b"xyz"), 0)
    if rank:
        assert got == b"xyz"


def test_buffer_errors(comm, rank):
    with pytest.raises(collie.InvalidArgument, match="read-only"):
        comm.all_reduce(b"abcd")
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(collie.InvalidArgument, match="read-only"):
        comm.all_reduce(ro)
    with pytest.raises(collie.InvalidArgument, match="not C-contiguous"):
        comm.all_reduce(np.zeros((4, 4))[:, 1])
    with pytest.raises(collie.InvalidArgument, match="int16"):
        comm.all_reduce(np.zeros(4, dtype=np.int16))
    with pytest.raises(collie.InvalidArgument, match="bool"):
        comm.all_reduce(np.zeros(4, dtype=bool))
    with pytest.raises(collie.InvalidArgument, match="complex128"):
        comm.all_reduce(np.zeros(4, dtype=np.complex128))
    with pytest.raises(collie.InvalidArgument, match="byte order"):
        comm.all_reduce(np.zeros(4, dtype=">f4"))
    with pytest.raises(collie.InvalidArgument, match="not an array"):
        comm.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="None"):  # InvalidArgument is a ValueError too
        comm.all_reduce(None)
    with pytest.raises(collie.InvalidArgument, match="int16"):
        comm.all_reduce(array.array("h", [1]))
    comm.barrier()


def test_contiguous_run():
    flat = np.zeros(12, dtype=np.float32)
    views = [as_buf(flat[i * 3:(i + 1) * 3], "v") for i in range(4)]
    assert contiguous_run(views)
    assert not contiguous_run(list(reversed(views)))
    assert not contiguous_run([as_buf(np.zeros(3, np.float32), "a"), as_buf(np.zeros(3, np.float32), "b")])
    for v in views:
        v.release()
