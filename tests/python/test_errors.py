"""Errors as exceptions: each bad input raises a specific CollieError subclass
with a message naming the argument, before any communication (the
communicator stays usable); timeouts, aborts and dead peers raise Timeout,
InvalidUsage and RemoteError; the classes map collie_result_t."""

import pickle
import threading
import time
import traceback

import numpy as np
import pytest

import collie
from collie import _errors, _lib


def still_usable(comm):
    x = np.ones(3, dtype=np.int32)
    comm.all_reduce(x)
    assert x[0] == comm.get_size()


def test_result_code_mapping():
    cases = [
        (_lib.INVALID_ARGUMENT, collie.InvalidArgument, ValueError),
        (_lib.INVALID_USAGE, collie.InvalidUsage, RuntimeError),
        (_lib.SYSTEM_ERROR, collie.CollieSystemError, OSError),
        (_lib.REMOTE_ERROR, collie.RemoteError, ConnectionError),
        (_lib.TIMEOUT, collie.Timeout, TimeoutError),
        (_lib.UNSUPPORTED, collie.Unsupported, NotImplementedError),
        (_lib.INTERNAL_ERROR, collie.InternalError, Exception),
    ]
    for code, cls, builtin in cases:
        e = _errors.make_error(code, "detail %d" % code)
        assert type(e) is cls and isinstance(e, collie.CollieError) and isinstance(e, builtin)
        assert e.code == code and e.message == "detail %d" % code and str(e) == e.message
        assert e.code_name == _lib.RESULT_NAMES[code]
        # The names agree with the C library's own strings.
        assert _lib.lib().collie_result_string(code).decode() == _lib.RESULT_NAMES[code]
        # A traceback names the class as users import it, and it pickles back to itself.
        line = traceback.format_exception_only(type(e), e)[-1]
        assert line.startswith("collie.%s: detail" % cls.__name__), line
        assert type(pickle.loads(pickle.dumps(e))) is cls


class _FakeCudaArray:
    """Looks like a CuPy array to the binding (__cuda_array_interface__); its
    bytes are never touched when the call is refused first."""

    def __init__(self, n):
        self._keep = np.zeros(n, np.float32)
        self.dtype = self._keep.dtype
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "version": 3,
                                         "data": (self._keep.ctypes.data, False)}


def test_list_mixing_host_and_cuda_refused(comm, rank, size):
    # A list form staged through one buffer takes all host arrays or all
    # CUDA torch tensors: a mix, or CUDA arrays of another kind, is refused
    # naming the rule, before any communication.
    if size == 1:
        pytest.skip("one rank: a list of one array is one block, never staged")
    t = np.zeros(4, dtype=np.float32)
    mixed = [np.zeros(4, np.float32) for _ in range(size)]
    mixed[-1] = _FakeCudaArray(4)
    with pytest.raises(collie.InvalidArgument, match="must all be CUDA torch tensors or all host arrays"):
        comm.all_gather(mixed, t)
    with pytest.raises(collie.InvalidArgument, match="must all be CUDA torch tensors or all host arrays"):
        comm.reduce_scatter(t, mixed)
    fakes = [_FakeCudaArray(4) for _ in range(size)]
    with pytest.raises(collie.InvalidArgument, match="CUDA arrays other than torch tensors"):
        comm.all_gather(fakes, _FakeCudaArray(4))
    still_usable(comm)


def test_list_size_errors(comm, rank, size):
    t = np.zeros(4, dtype=np.float32)
    with pytest.raises(collie.InvalidArgument, match=r"output_list has %d arrays, expected %d" % (size + 1, size)):
        comm.all_gather([np.zeros(4, np.float32) for _ in range(size + 1)], t)
    bad = [np.zeros(4, np.float32) for _ in range(size)]
    bad[-1] = np.zeros(3, np.float32)
    with pytest.raises(collie.InvalidArgument, match=r"output_list\[%d\] has 3 elements, expected 4" % (size - 1)):
        comm.all_gather(bad, t)
    bad[-1] = np.zeros(4, np.float64)
    with pytest.raises(collie.InvalidArgument, match=r"output_list\[%d\] is float64 but tensor is float32" % (size - 1)):
        comm.all_gather(bad, t)
    with pytest.raises(collie.InvalidArgument, match="must be a list of arrays"):
        comm.all_gather(np.zeros(4 * size, np.float32), t)
    with pytest.raises(collie.InvalidArgument, match=r"output has 5 elements, expected %d \(size x input's 4\)" % (4 * size)):
        comm.all_gather_single(np.zeros(5, np.float32), t)
    with pytest.raises(collie.InvalidArgument, match=r"input has 5 elements, expected %d" % (4 * size)):
        comm.reduce_scatter_single(t, np.zeros(5, np.float32))
    with pytest.raises(collie.InvalidArgument, match="input_list has 0 arrays"):
        comm.reduce_scatter(t, [])
    with pytest.raises(collie.InvalidArgument, match="output has 3 elements, expected 4"):
        comm.all_to_all_single(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(collie.InvalidArgument, match=r"output_list\[%d\] has 2 elements but tensor has 4" % rank):
        comm.all_gather_v([np.zeros(2, np.float32) for _ in range(size)], t)
    if comm.get_rank() == 0:
        with pytest.raises(collie.InvalidArgument, match="output_list has %d arrays, expected %d" % (size + 1, size)):
            comm.gather([t] * (size + 1), t, 0)
    with pytest.raises(collie.InvalidArgument, match="input_split_sizes has [0-9]+ entries, expected %d" % size):
        comm.all_to_all_v_single(np.zeros(size * 2), np.zeros(size * 2), None, [1] if size > 1 else [1, 1])
    with pytest.raises(collie.InvalidArgument, match="output_split_sizes sums to"):
        comm.all_to_all_v_single(np.zeros(size * 2), np.zeros(size * 2), [3] * size, None)
    if size > 1:
        with pytest.raises(collie.InvalidArgument, match="not a multiple of the size"):
            comm.all_to_all_single(np.zeros(size + 1), np.zeros(size + 1))
    still_usable(comm)


def test_alias_errors(comm, size):
    buf = np.zeros(2 * size + 1, dtype=np.float32)
    with pytest.raises(collie.InvalidArgument, match="input overlaps output"):
        comm.all_to_all_single(buf[:2 * size], buf[1:])
    with pytest.raises(collie.InvalidArgument, match="input overlaps output: in place, input must be output's block"):
        comm.all_gather_single(buf[:2 * size], buf[1:3])  # overlapping, but not at block `rank`
    with pytest.raises(collie.InvalidArgument, match="output overlaps input"):
        comm.reduce_scatter_single(buf[1:3], buf[:2 * size])
    lst = [buf[2 * q:2 * q + 2] for q in range(size)]
    with pytest.raises(collie.InvalidArgument, match="tensor overlaps the list's memory"):
        comm.all_gather(lst, buf[1:3])
    still_usable(comm)


def test_c_argument_errors(comm, size):
    x = np.zeros(4, dtype=np.float32)
    with pytest.raises(collie.InvalidArgument, match="root = %d is outside 0..%d" % (size + 3, size - 1)):
        comm.broadcast(x, size + 3)
    with pytest.raises(collie.InvalidArgument, match="peer = -1 is outside"):
        comm.send(x, -1)
    with pytest.raises(collie.InvalidArgument, match="tag = -2 must be >= 0"):
        comm.recv(x, 0, tag=-2)
    with pytest.raises(collie.Unsupported, match="bitwise ops need an integer dtype"):
        comm.all_reduce(x, collie.ReduceOp.BXOR)
    with pytest.raises(collie.InvalidArgument, match="not a ReduceOp"):
        comm.all_reduce(x, 42)
    with pytest.raises(collie.InvalidArgument, match="not a ReduceOp"):
        comm.all_reduce(x, "median")
    with pytest.raises(collie.InvalidArgument, match="timeout = -1 must be positive"):
        comm.all_reduce(x, timeout=-1)
    with pytest.raises(collie.InvalidArgument, match="opts->category = 999"):
        comm.all_reduce(x, category=999)
    with pytest.raises(collie.InvalidArgument, match="algorithm = 'bogus'"):
        comm.all_reduce(x, algorithm="bogus")
    with pytest.raises(collie.InvalidArgument, match="bruck"):
        comm.all_reduce(x, algorithm="bruck")  # a real algorithm, but not an allreduce one
    with pytest.raises(collie.InvalidArgument, match="root = 'x' must be an int"):
        comm.reduce(x, "x")
    with pytest.raises(collie.InvalidArgument, match="all_reduce: wire = 'fp8' is not one of"):
        comm.all_reduce(x, wire="fp8")
    with pytest.raises(collie.InvalidArgument, match="applies to float32 SUM or AVG only; this call is float32 max"):
        comm.all_reduce(x, collie.ReduceOp.MAX, wire="bf16")
    with pytest.raises(collie.InvalidArgument, match="this call is int32 sum"):
        comm.all_reduce(np.zeros(4, dtype=np.int32), wire="float16")
    if size == 1:
        with pytest.raises(collie.InvalidUsage, match="itself"):
            comm.send(x, 0)  # a blocking send to oneself could never complete
    still_usable(comm)


def test_batch_errors(comm, size):
    b = comm.batch_op_create()
    with pytest.raises(collie.InvalidArgument, match="peer = %d is outside" % size):
        b.send(np.zeros(2), size)
    with pytest.raises(collie.InvalidArgument, match="tag = -1"):
        b.recv(np.zeros(2), 0, tag=-1)
    with pytest.raises(collie.InvalidArgument, match="read-only"):
        b.recv(b"ab", 0)
    assert len(b) == 0
    b.issue()  # empty batch: fine
    still_usable(comm)


def test_split_and_new_comm_errors(comm, size):
    with pytest.raises(collie.InvalidArgument, match="rank %d is outside" % size):
        comm.split([size])
    with pytest.raises(collie.InvalidArgument, match="twice"):
        comm.split([0, 0])
    with pytest.raises(collie.InvalidArgument, match="COLLIE_TRANSPORT"):
        collie.new_comm(name="bad", hints={"transport": "carrier-pigeon"})
    with pytest.raises(collie.InvalidArgument, match="COLLIE_TIMEOUT_MS"):
        collie.new_comm(name="bad", hints={"timeout_ms": "soon"})
    with pytest.raises(collie.InvalidArgument, match="store"):
        collie.new_comm(name="bad", store="http://nowhere")
    with pytest.raises(collie.InvalidArgument, match="hints"):
        collie.new_comm(name="bad", hints=["transport"])
    with pytest.raises(collie.InvalidArgument, match="both rank and world_size"):
        collie.new_comm(name="bad", rank=0)
    with pytest.raises(collie.InvalidArgument, match="timeout"):
        collie.new_comm(name="bad", timeout="forever")
    still_usable(comm)


@pytest.fixture
def pair(comm):
    """A communicator of world ranks 0 and 1 (None elsewhere) for tests where
    rank 0 waits on a message rank 1 never sends. Teardown: the session
    barrier first, so that rank 1 does not finalize (a closing barrier)
    while rank 0 still waits on its recv."""
    if comm.get_size() < 2:
        pytest.skip("needs 2 ranks")
    p = comm.split([0, 1], "pair")
    yield p
    comm.barrier()
    if p is not None:
        p.finalize()


def test_wait_timeout_then_op_timeout(pair, rank):
    """A recv nobody sends: wait(timeout) gives up while the op goes on, the op
    then fails at its own deadline, and the communicator is poisoned."""
    if rank != 0:
        return
    ba = bytearray(64)
    t0 = time.monotonic()
    w = pair.recv(ba, 1, async_op=True, timeout=1.0)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # the buffer is exported to the running operation
    with pytest.raises(collie.Timeout, match="still"):
        w.wait(timeout=0.05)
    assert not w.is_completed()
    with pytest.raises(collie.Timeout) as ei:
        w.wait()
    assert 0.5 < time.monotonic() - t0 < 8
    assert ei.value.code == _lib.TIMEOUT and "rank 1" in str(ei.value)
    assert w.is_completed() and not w.is_success() and isinstance(w.exception(), collie.Timeout)
    with pytest.raises(collie.Timeout):
        w.wait()  # the same error again
    ba.extend(b"x")  # released once the operation ended
    with pytest.raises(collie.InvalidUsage):
        pair.barrier()  # poisoned: fails at once, quoting the first error


def test_blocking_timeout(pair, rank):
    if rank != 0:
        return
    t0 = time.monotonic()
    with pytest.raises(collie.Timeout, match="rank 1"):
        pair.recv(np.zeros(1), 1, timeout=0.3)
    assert time.monotonic() - t0 < 5


def test_abort_from_another_thread(pair, rank):
    """abort() wakes a blocked call (which released the GIL) at once."""
    if rank != 0:
        return
    threading.Timer(0.3, pair.abort).start()
    t0 = time.monotonic()
    with pytest.raises(collie.CollieError):
        pair.recv(np.zeros(1), 1, timeout=20)
    assert time.monotonic() - t0 < 5
    with pytest.raises(collie.InvalidUsage, match="abort"):
        pair.all_reduce(np.zeros(1))


def test_abort_and_finalize(private):
    private.abort()
    with pytest.raises(collie.InvalidUsage, match="abort"):
        private.all_reduce(np.zeros(1))
    private.abort()  # aborting again is fine
    private.finalize()
    private.abort()  # and after finalize: nothing to do
    with pytest.raises(collie.InvalidUsage, match="finalized"):
        private.all_reduce(np.zeros(1))


def test_remote_error_when_peer_aborts(pair, rank):
    if rank == 1:
        time.sleep(0.2)
        pair.abort()
    elif rank == 0:
        with pytest.raises(collie.RemoteError, match="rank 1"):
            pair.recv(np.zeros(4), 1, timeout=20)


def test_context_manager_aborts_on_exception(comm, rank):
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with comm.split_color(0, name="doomed") as c:
            c.barrier()
            raise Boom()
    assert c.handle is None
    still_usable(comm)
