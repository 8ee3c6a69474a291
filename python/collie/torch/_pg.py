"""_pg.py - ProcessGroupCollie: torch.distributed's process group over a
collie communicator.

torch calls the creator with the group's Store (a PrefixStore over the
TCPStore or FileStore of init_process_group), this rank and size, and the
timeout. The group's communicator meets through that Store (the binding's
KVStore callbacks): no port, directory or variable of collie's own. New
groups get communicators of their own, since torch calls the creator only on
the member ranks (a split of the world would need every rank).

Each method takes torch's arguments (lists of tensors and an options
object), checks them, and issues one collie call asynchronously with the
tensors' own memory; the CollieWork it returns holds the tensors until the
call ends. Outputs that cannot be written in place (lists whose tensors are
not one block, non-contiguous or widened tensors) go through a staging
tensor copied out at completion.
"""

import ctypes
import datetime
import sys
import threading
import time

import torch
import torch.distributed as dist

from .. import _lib
from .._comm import new_comm
from . import _context
from ._tensors import (
    NATIVE,
    UINT8,
    Unsupported,
    check_cpu,
    dense,
    nbytes,
    op_of,
    reduction_plan,
)
from ._work import CollieWork, Completer

_SZ = ctypes.c_size_t
_make_work = torch._C._distributed_c10d._create_work_from_future
_C10D = dist.distributed_c10d.__dict__
_OWN = globals()
# torch.distributed's p2p functions that wait on the Work at once (isend and
# irecv return it: they stay asynchronous).
_BLOCKING_P2P = frozenset(("send", "recv"))
# torch's ReduceOp members are class attributes: the same objects each time.
_OP_BY_ID = {id(getattr(dist.ReduceOp, k)): v for k, v in
             (("SUM", 0), ("PRODUCT", 1), ("MIN", 2), ("MAX", 3), ("AVG", 4), ("BAND", 5), ("BOR", 6), ("BXOR", 7))}
_TAG_MONITORED = "collie-monitored-barrier"


class CollieBackendError(getattr(dist, "DistBackendError", RuntimeError)):
    """An operation of the collie backend failed (a RuntimeError, as every
    torch.distributed backend raises). ``code`` is the collie_result_t name
    ("timeout", "remote error", ...); the message is collie's own, naming the
    operation and the peer."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = _lib.RESULT_NAMES.get(code, None) if isinstance(code, int) else code


def _move(t):
    """(collie dtype, count) to move t's bytes: its own dtype when collie has
    it (telemetry and the flight recorder then show it), else bytes."""
    dt = NATIVE.get(t.dtype)
    if dt is None:
        return UINT8, nbytes(t)
    return dt, t.numel()


def _block(tensors):
    """True when tensors lie back to back in one block, in order."""
    if not tensors:
        return False
    p = tensors[0].data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != p:
            return False
        p += nbytes(t)
    return True


def _timeout_ms(opts):
    t = getattr(opts, "timeout", None)
    if t is None:
        return 0
    secs = t.total_seconds()
    return int(secs * 1000) if secs > 0 else 0  # torch's "unset" is negative


class ProcessGroupCollie(dist.ProcessGroup):
    """torch.distributed.ProcessGroup on collie (CPU tensors). Created by
    torch through init_process_group("collie") / new_group(backend="collie")
    after ``import collie.torch``; collie.torch.get_comm(group) gives its
    collie.Comm."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size  # (pybind's rank()/size() cost ~0.2 us a call)
        if isinstance(timeout, (int, float)):
            timeout = datetime.timedelta(seconds=timeout)
        self._store = store
        self._timeout = timeout
        self._lock = threading.RLock()
        self._inflight = []  # async Works handed to Python callers, until they have ended
        self._p2p = []  # held isend/irecv: (is_send, tensor, peer, tag, Work, _LazyBatch)
        self._p2p_flusher = None  # thread: issues held p2p 2 ms after the last one
        self._p2p_wake = threading.Event()
        self._coalescing = False  # between _start_coalescing and _end_coalescing
        self._mb_seq = 0
        self._group_name = ""
        self._group_desc = ""
        name = "torch-group-%d" % id(self)
        # A group made after the default one (new_group) shares its telemetry
        # and world rank numbering, as a split would (torch calls this on the
        # group's members only, so it cannot be a split).
        parent = None
        if dist.is_initialized():
            default = dist.distributed_c10d._get_default_group()
            default = default if isinstance(default, ProcessGroupCollie) else None
            if default is not None and default._h is not None:
                parent = default._comm
        try:
            self._comm = new_comm(name, timeout=timeout, store=store, rank=rank, world_size=size, parent=parent)
        except Exception as e:
            raise CollieBackendError("collie backend: init of rank %d of %d failed: %s" % (rank, size, e),
                                     getattr(e, "code", None)) from e
        self._h = self._comm.handle
        self._L = _lib.lib()
        self._allreduce = self._L.collie_allreduce
        self._completer = Completer(name)
        self._done = CollieWork(self, None, "blocking call")  # what a blocking torch call gets back
        _context.groups_add(self)

    # ---- identity ----

    def getBackendName(self):
        return "collie"

    def name(self):
        return "collie"

    _get_backend_name = getBackendName

    # torch 2.x names its groups through these (destroy_process_group reads
    # group_name; the C++ getter raises for a group without a C++ backend).
    def _set_group_name(self, name):
        self._group_name = str(name)

    def getGroupName(self):
        return self._group_name

    def _set_group_desc(self, desc):
        self._group_desc = str(desc)

    def getGroupDesc(self):
        return self._group_desc

    setGroupName = _set_group_name
    setGroupDesc = _set_group_desc
    group_name = property(getGroupName)
    group_desc = property(getGroupDesc)

    @property
    def comm(self):
        """The collie.Comm under this group."""
        return self._comm

    def __repr__(self):
        return "<ProcessGroupCollie rank %d of %d>" % (self._rank, self._size)

    # ---- errors and lifetime ----

    def _wrap(self, text, code=None):
        return CollieBackendError(text, code)

    def _failed(self, exc):
        pass  # collie poisoned the communicator itself; later calls quote the first error

    def shutdown(self):
        """Frees the communicator (shared memory, threads, sockets). Waits for
        running operations (each bounded by its deadline). Idempotent;
        destroy_process_group calls it."""
        with self._lock:
            if self._h is None:
                return
            self._flush_p2p(force=True)  # held sends and receives still go out: peers expect them
            self._h = None
        self._completer.stop()
        self._p2p_wake.set()  # the flusher sees _h None and ends
        _context.groups_remove(self)
        try:
            self._comm.finalize()
        finally:
            # Let torch's Store go (rank 0's TCPStore server with it), as
            # Gloo's group does when destroyed: a second init_process_group
            # may bind the same port.
            self._store = None
            self._comm._kv = None

    def abort(self):
        """Fails every running operation here and on the peers, at once."""
        if self._h is not None:
            self._comm.abort()

    # ---- issuing ----

    def _opts(self, opts, from_c10d):
        # torch's Python functions never set a per-call timeout (the group's
        # holds): reading opts.timeout through pybind costs ~0.4 us.
        ms = 0 if from_c10d else _timeout_ms(opts)
        ctx = _context.current()
        if not ms and ctx is None:
            return None
        o = _lib.Opts()
        o.timeout_ms = ms
        if ctx is not None:
            o.category, label, phase = ctx
            o.label = label
            o.phase = phase
        return o

    def _issue(self, fn, cfn, args, opts, result=(), keep=(), posts=None):
        if self._p2p:
            self._flush_p2p()  # issue order: the held sends and receives came first
        # torch's own blocking calls (dist.all_reduce(t) with async_op False,
        # dist.send, dist.recv) wait on the Work at once and drop it: run those here, as a
        # blocking collie call, instead of handing them to collie's worker
        # thread and back (two thread hops, most of a small call's time).
        f = sys._getframe(2)
        while f is not None and f.f_globals is _OWN:
            f = f.f_back
        from_c10d = f is not None and f.f_globals is _C10D
        o = self._opts(opts, from_c10d)
        if from_c10d and (f.f_code.co_name in _BLOCKING_P2P or f.f_locals.get("async_op", True) is False):
            with self._lock:
                h = self._h
                if h is None:
                    raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
                rc = cfn(h, *args, ctypes.byref(o) if o is not None else None, None)
            if rc != _lib.SUCCESS:
                raise CollieBackendError(self._last_error(rc), rc)
            if posts:
                for p in posts:
                    p()
            return self._done
        w = ctypes.c_void_p()
        with self._lock:
            h = self._h
            if h is None:
                raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
            rc = cfn(h, *args, ctypes.byref(o) if o is not None else None, ctypes.byref(w))
            if rc != _lib.SUCCESS:
                raise CollieBackendError(self._last_error(rc), rc)
            work = CollieWork(self, w.value, fn, result, (keep, o), posts)
            if from_c10d:
                # torch.distributed's functions hand this Work to Python code,
                # which waits on it (wait() raises the operation's error, as
                # Gloo's does). Held here until it has ended, so that the
                # tensors outlive the operation even if the caller drops it.
                if self._inflight:
                    self._inflight = [x for x in self._inflight if not x._done]
                self._inflight.append(work)
                return work
        return _cpp_work(work)

    def _last_error(self, rc):
        raw = self._L.collie_last_error()
        return raw.decode("utf-8", "replace") if raw else _lib.RESULT_NAMES.get(rc, "error %d" % rc)

    def _root(self, r, fn):
        if not 0 <= r < self._size:
            raise CollieBackendError("%s: root rank %d is outside 0..%d (group of %d)" % (fn, r, self._size - 1,
                                                                                       self._size), "invalid argument")
        return r

    def _one(self, tensors, fn):
        if len(tensors) != 1:
            raise Unsupported("%s: the collie backend takes one tensor per call on CPU (got %d)" % (fn, len(tensors)))
        return tensors[0]

    @staticmethod
    def _sizes(values):
        return (_SZ * max(len(values), 1))(*values)

    # ---- reductions ----

    # ---- the direct path ----
    #
    # The latency floor of every torch user: a blocking dist.all_reduce(t),
    # dist.broadcast(t, src), all_gather_into_tensor or all_to_all_single of
    # plain tensors goes straight to the blocking C call: what _issue would
    # do, without the generality (staging, widening, options, the frame walk).
    # all_reduce reads its op from torch's own arguments: reading
    # opts.reduceOp through pybind costs ~1 us.

    def _direct(self, loc, t):
        """t's collie dtype when a call of torch's (locals loc) on it may take
        the direct path, else None."""
        dt = NATIVE.get(t.dtype)
        if (dt is not None and loc.get("async_op", True) is False and t.is_cpu and t.is_contiguous()
                and not t.is_sparse and not _context._stack and not self._p2p):
            return dt
        return None

    def _direct_call(self, fn, cfn, *args):
        with self._lock:
            h = self._h
            if h is None:
                raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
            rc = cfn(h, *args, None, None)
        if rc != _lib.SUCCESS:
            raise CollieBackendError(self._last_error(rc), rc)
        return self._done

    def allreduce(self, tensors, opts=None):
        f = sys._getframe(1)
        if f.f_globals is _C10D and len(tensors) == 1:
            loc = f.f_locals
            t = tensors[0]
            op = _OP_BY_ID.get(id(loc.get("op")))
            dt = self._direct(loc, t)
            if op is not None and dt is not None:
                p = t.data_ptr()
                return self._direct_call("all_reduce", self._allreduce, p, p, t.numel(), dt, op)
        return self._allreduce_general(tensors, opts)

    def _allreduce_general(self, tensors, opts):
        fn = "all_reduce"
        t = self._one(tensors, fn)
        op = op_of(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, fn)
        c, post = dense(t, fn, out=True)
        r, dt, op, back = reduction_plan(c, op, fn)
        posts = [p for p in (back, post) if p]
        return self._issue(fn, self._L.collie_allreduce, (r.data_ptr(), r.data_ptr(), r.numel(), dt, op), opts,
                           [t], (t, c, r), posts)

    def allreduce_coalesced(self, tensors, opts=None):
        fn = "all_reduce_coalesced"
        if not tensors:
            return CollieWork(self, None, fn)
        op = op_of(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, fn)
        for t in tensors:
            check_cpu(t, fn, "tensors")
            if t.dtype != tensors[0].dtype:
                raise CollieBackendError("%s: tensors have different dtypes (%s and %s); coalesced reductions take "
                                         "one dtype" % (fn, tensors[0].dtype, t.dtype), "invalid argument")
        flat = torch.cat([t.reshape(-1) for t in tensors])
        r, dt, op, back = reduction_plan(flat, op, fn)

        def unflatten():
            if back:
                back()
            off = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[off:off + n].view_as(t))
                off += n

        return self._issue(fn, self._L.collie_allreduce, (r.data_ptr(), r.data_ptr(), r.numel(), dt, op), opts,
                           tensors, (flat, r), [unflatten])

    def reduce(self, tensors, opts=None):
        fn = "reduce"
        t = self._one(tensors, fn)
        root = self._root(opts.rootRank, fn)
        op = op_of(opts.reduceOp, fn)
        at_root = root == self._rank
        c, post = dense(t, fn, out=at_root)
        r, dt, op, back = reduction_plan(c, op, fn)
        posts = [p for p in (back, post) if p] if at_root else []
        return self._issue(fn, self._L.collie_reduce,
                           (r.data_ptr(), r.data_ptr() if at_root else None, r.numel(), dt, op, root), opts,
                           [t], (t, c, r), posts)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        fn = "reduce_scatter"
        out = self._one(output_tensors, fn)
        ins = self._one(input_tensors, fn)
        if len(ins) != self._size:
            raise CollieBackendError("%s: input list has %d tensors, expected %d (one per rank)"
                                     % (fn, len(ins), self._size), "invalid argument")
        for q, x in enumerate(ins):
            check_cpu(x, fn, "input_list[%d]" % q)
            if x.dtype != out.dtype or x.numel() != out.numel():
                raise CollieBackendError("%s: input_list[%d] is %s of %d elements but output is %s of %d"
                                         % (fn, q, x.dtype, x.numel(), out.dtype, out.numel()), "invalid argument")
        flat = torch.cat([x.reshape(-1) for x in ins]) if not _block(ins) else None
        src = flat if flat is not None else torch.as_strided(ins[0], (out.numel() * self._size,), (1,))
        return self._reduce_scatter_flat(fn, out, src, opts, keep=(ins, flat))

    def _reduce_scatter_base(self, output, input, opts=None):
        fn = "reduce_scatter_tensor"
        check_cpu(input, fn, "input")
        if input.numel() != output.numel() * self._size:
            raise CollieBackendError("%s: input has %d elements, expected %d (size %d x output's %d)"
                                     % (fn, input.numel(), output.numel() * self._size, self._size, output.numel()),
                                     "invalid argument")
        if input.dtype != output.dtype:
            raise CollieBackendError("%s: input is %s but output is %s" % (fn, input.dtype, output.dtype),
                                     "invalid argument")
        src, _ = dense(input, fn, "input")
        return self._reduce_scatter_flat(fn, output, src.reshape(-1), opts, keep=(input,))

    def _reduce_scatter_flat(self, fn, out, src, opts, keep):
        op = op_of(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, fn)
        c, post = dense(out, fn, "output", out=True)
        # A widened input (int16) is a copy only read; the widened output is written back.
        r_in, dt, op2, _ = reduction_plan(src, op, fn)
        r_out, _, _, back_out = reduction_plan(c, op, fn)
        posts = [p for p in (back_out, post) if p]
        return self._issue(fn, self._L.collie_reduce_scatter,
                           (r_in.data_ptr(), r_out.data_ptr(), r_out.numel(), dt, op2), opts,
                           [out], (keep, src, r_in, c, r_out), posts)

    # ---- data movement ----

    def broadcast(self, tensors, opts=None):
        f = sys._getframe(1)
        if f.f_globals is _C10D and len(tensors) == 1:
            t = tensors[0]
            dt = self._direct(f.f_locals, t)
            if dt is not None:
                root = opts.rootRank
                if 0 <= root < self._size:
                    return self._direct_call("broadcast", self._L.collie_broadcast, t.data_ptr(), t.numel(), dt, root)
        return self._broadcast_general(tensors, opts)

    def _broadcast_general(self, tensors, opts):
        fn = "broadcast"
        t = self._one(tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, post = dense(t, fn, out=root != self._rank)
        dt, n = _move(c)
        return self._issue(fn, self._L.collie_broadcast, (c.data_ptr(), n, dt, root), opts, [t], (t, c),
                           [post] if post else None)

    def allgather(self, output_tensors, input_tensors, opts=None):
        fn = "all_gather"
        t = self._one(input_tensors, fn)
        outs = self._one(output_tensors, fn)
        c, _ = dense(t, fn)
        self._check_list(fn, "output_list", outs, t)
        dt, n = _move(c)
        if _block(outs):
            return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), outs[0].data_ptr(), n, dt), opts,
                               outs, (t, c, outs))
        st = torch.empty((self._size,) + tuple(c.shape), dtype=c.dtype)

        def copy_out():
            for q, o in enumerate(outs):
                o.copy_(st[q])

        return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), st.data_ptr(), n, dt), opts, outs,
                           (t, c, st), [copy_out])

    def _allgather_base(self, output, input, opts=None):
        f = sys._getframe(1)
        if f.f_globals is _C10D:
            dt = self._direct(f.f_locals, input)
            if (dt is not None and output.dtype is input.dtype and output.is_cpu and output.is_contiguous()
                    and output.numel() == input.numel() * self._size):
                return self._direct_call("all_gather_into_tensor", self._L.collie_allgather, input.data_ptr(),
                                         output.data_ptr(), input.numel(), dt)
        return self._allgather_base_general(output, input, opts)

    def _allgather_base_general(self, output, input, opts):
        fn = "all_gather_into_tensor"
        check_cpu(input, fn, "input")
        check_cpu(output, fn, "output")
        if output.numel() != input.numel() * self._size or output.dtype != input.dtype:
            raise CollieBackendError("%s: output is %s of %d elements, expected %s of %d (size %d x input's %d)"
                                     % (fn, output.dtype, output.numel(), input.dtype, input.numel() * self._size,
                                        self._size, input.numel()), "invalid argument")
        c, _ = dense(input, fn, "input")
        o, post = dense(output, fn, "output", out=True)
        dt, n = _move(c)
        return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), o.data_ptr(), n, dt), opts, [output],
                           (input, c, o), [post] if post else None)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        fn = "all_gather_coalesced"
        if len(output_lists) != self._size:
            raise CollieBackendError("%s: output_tensor_lists has %d lists, expected %d (one per rank)"
                                     % (fn, len(output_lists), self._size), "invalid argument")
        for t in input_list:
            check_cpu(t, fn, "input_tensor_list")
        flat = torch.cat([t.reshape(-1).view(torch.uint8) if t.numel() else t.new_empty(0, dtype=torch.uint8)
                          for t in input_list]) if input_list else torch.empty(0, dtype=torch.uint8)
        st = torch.empty(flat.numel() * self._size, dtype=torch.uint8)
        for q, lst in enumerate(output_lists):
            if len(lst) != len(input_list):
                raise CollieBackendError("%s: output_tensor_lists[%d] has %d tensors, expected %d"
                                         % (fn, q, len(lst), len(input_list)), "invalid argument")
            for i, o in enumerate(lst):
                if o.numel() != input_list[i].numel() or o.dtype != input_list[i].dtype:
                    raise CollieBackendError("%s: output_tensor_lists[%d][%d] does not match input_tensor_list[%d]"
                                             % (fn, q, i, i), "invalid argument")

        def copy_out():
            per = flat.numel()
            for q, lst in enumerate(output_lists):
                off = q * per
                for o in lst:
                    b = nbytes(o)
                    o.view(-1).view(torch.uint8).copy_(st[off:off + b]) if o.is_contiguous() else \
                        o.copy_(st[off:off + b].view(o.dtype).view(o.shape))
                    off += b

        return self._issue(fn, self._L.collie_allgather, (flat.data_ptr(), st.data_ptr(), flat.numel(), UINT8),
                           opts, output_lists, (flat, st, input_list), [copy_out])

    def gather(self, output_tensors, input_tensors, opts=None):
        fn = "gather"
        t = self._one(input_tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, _ = dense(t, fn)
        dt, n = _move(c)
        if root != self._rank:
            if output_tensors and any(len(x) for x in output_tensors):
                raise CollieBackendError("%s: only the root (rank %d) passes a gather_list" % (fn, root),
                                         "invalid argument")
            return self._issue(fn, self._L.collie_gather, (c.data_ptr(), None, n, dt, root), opts, [], (t, c))
        outs = self._one(output_tensors, fn)
        self._check_list(fn, "gather_list", outs, t)
        if _block(outs):
            return self._issue(fn, self._L.collie_gather, (c.data_ptr(), outs[0].data_ptr(), n, dt, root), opts,
                               outs, (t, c, outs))
        st = torch.empty((self._size,) + tuple(c.shape), dtype=c.dtype)

        def copy_out():
            for q, o in enumerate(outs):
                o.copy_(st[q])

        return self._issue(fn, self._L.collie_gather, (c.data_ptr(), st.data_ptr(), n, dt, root), opts, outs,
                           (t, c, st), [copy_out])

    def scatter(self, output_tensors, input_tensors, opts=None):
        fn = "scatter"
        t = self._one(output_tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, post = dense(t, fn, out=True)
        dt, n = _move(c)
        posts = [post] if post else None
        if root != self._rank:
            if input_tensors and any(len(x) for x in input_tensors):
                raise CollieBackendError("%s: only the root (rank %d) passes a scatter_list" % (fn, root),
                                         "invalid argument")
            return self._issue(fn, self._L.collie_scatter, (None, c.data_ptr(), n, dt, root), opts, [t], (t, c),
                               posts)
        ins = self._one(input_tensors, fn)
        self._check_list(fn, "scatter_list", ins, t)
        src = ins[0] if _block(ins) else torch.stack([x.reshape(c.shape) for x in ins])
        return self._issue(fn, self._L.collie_scatter, (src.data_ptr(), c.data_ptr(), n, dt, root), opts, [t],
                           (t, c, ins, src), posts)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        f = sys._getframe(1)
        if f.f_globals is _C10D and not output_split_sizes and not input_split_sizes:
            dt = self._direct(f.f_locals, input)
            n = input.numel()
            if (dt is not None and output.dtype is input.dtype and output.is_cpu and output.is_contiguous()
                    and output.numel() == n and n % self._size == 0):
                return self._direct_call("all_to_all_single", self._L.collie_alltoall, input.data_ptr(),
                                         output.data_ptr(), n // self._size, dt)
        return self._alltoall_base_general(output, input, output_split_sizes, input_split_sizes, opts)

    def _alltoall_base_general(self, output, input, output_split_sizes, input_split_sizes, opts):
        fn = "all_to_all_single"
        check_cpu(input, fn, "input")
        check_cpu(output, fn, "output")
        if input.dtype != output.dtype:
            raise CollieBackendError("%s: input is %s but output is %s" % (fn, input.dtype, output.dtype),
                                     "invalid argument")
        i, _ = dense(input, fn, "input")
        o, post = dense(output, fn, "output", out=True)
        n = self._size
        isz = self._splits(fn, "input_split_sizes", input_split_sizes, i)
        osz = self._splits(fn, "output_split_sizes", output_split_sizes, o)
        if isz is None and osz is None:
            if i.numel() != o.numel():
                raise CollieBackendError("%s: input has %d elements but output has %d" % (fn, i.numel(), o.numel()),
                                         "invalid argument")
            dt, cnt = _move(i)
            return self._issue(fn, self._L.collie_alltoall, (i.data_ptr(), o.data_ptr(), cnt // n, dt), opts,
                               [output], (input, i, o), [post] if post else None)
        row_i = i.numel() // i.shape[0] if i.dim() and i.shape[0] else 0
        row_o = o.numel() // o.shape[0] if o.dim() and o.shape[0] else 0
        row = max(row_i, row_o) * i.element_size()
        isz = isz or self._equal(fn, "input", i, n)
        osz = osz or self._equal(fn, "output", o, n)
        sc = [k * row for k in isz]
        rc = [k * row for k in osz]
        sd = [sum(sc[:q]) for q in range(n)]
        rd = [sum(rc[:q]) for q in range(n)]
        arrs = [self._sizes(x) for x in (sc, sd, rc, rd)]
        return self._issue(fn, self._L.collie_alltoallv,
                           (i.data_ptr(), arrs[0], arrs[1], o.data_ptr(), arrs[2], arrs[3], UINT8), opts,
                           [output], (input, i, o, arrs), [post] if post else None)

    def _splits(self, fn, name, sizes, t):
        if sizes is None or len(sizes) == 0:
            return None
        sizes = [int(x) for x in sizes]
        if len(sizes) != self._size:
            raise CollieBackendError("%s: %s has %d entries, expected %d (one per rank)" % (fn, name, len(sizes),
                                                                                         self._size),
                                     "invalid argument")
        rows = t.shape[0] if t.dim() else t.numel()
        if any(x < 0 for x in sizes) or sum(sizes) != rows:
            raise CollieBackendError("%s: %s = %s must be >= 0 and sum to the %d rows of the tensor"
                                     % (fn, name, sizes, rows), "invalid argument")
        return sizes

    def _equal(self, fn, what, t, n):
        rows = t.shape[0] if t.dim() else t.numel()
        if rows % n:
            raise CollieBackendError("%s: %s has %d rows, not a multiple of the group size %d" % (fn, what, rows, n),
                                     "invalid argument")
        return [rows // n] * n

    def alltoall(self, output_tensors, input_tensors, opts=None):
        fn = "all_to_all"
        n = self._size
        if len(input_tensors) != n or len(output_tensors) != n:
            raise CollieBackendError("%s: %d input and %d output tensors, expected %d each (one per rank)"
                                     % (fn, len(input_tensors), len(output_tensors), n), "invalid argument")
        for t in list(input_tensors) + list(output_tensors):
            check_cpu(t, fn, "tensors")
        sc = [nbytes(t) for t in input_tensors]
        rc = [nbytes(t) for t in output_tensors]
        src = torch.cat([t.reshape(-1).view(torch.uint8) for t in input_tensors]) if sum(sc) else \
            torch.empty(1, dtype=torch.uint8)
        st = torch.empty(max(sum(rc), 1), dtype=torch.uint8)
        sd = [sum(sc[:q]) for q in range(n)]
        rd = [sum(rc[:q]) for q in range(n)]

        def copy_out():
            for q, o in enumerate(output_tensors):
                o.copy_(st[rd[q]:rd[q] + rc[q]].view(o.dtype).view(o.shape))

        arrs = [self._sizes(x) for x in (sc, sd, rc, rd)]
        return self._issue(fn, self._L.collie_alltoallv,
                           (src.data_ptr(), arrs[0], arrs[1], st.data_ptr(), arrs[2], arrs[3], UINT8), opts,
                           output_tensors, (src, st, arrs, input_tensors), [copy_out])

    def _check_list(self, fn, what, lst, t):
        if len(lst) != self._size:
            raise CollieBackendError("%s: %s has %d tensors, expected %d (one per rank)" % (fn, what, len(lst),
                                                                                         self._size),
                                     "invalid argument")
        for q, o in enumerate(lst):
            check_cpu(o, fn, "%s[%d]" % (what, q))
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise CollieBackendError("%s: %s[%d] is %s of %d elements but the tensor is %s of %d"
                                         % (fn, what, q, o.dtype, o.numel(), t.dtype, t.numel()), "invalid argument")

    # ---- point to point ----

    def _peer(self, p, fn):
        if not 0 <= p < self._size:
            raise CollieBackendError("%s: peer rank %d is outside 0..%d (group of %d)" % (fn, p, self._size - 1,
                                                                                       self._size),
                                     "invalid argument")
        if p == self._rank:
            raise CollieBackendError("%s: rank %d cannot %s itself" % (fn, p, fn), "invalid argument")
        return p

    # Asynchronous sends and receives (isend, irecv, batch_isend_irecv) are
    # held back and issued together as one collie group of send/recv: collie
    # runs a communicator's operations one at a time in issue order, so an
    # isend issued alone would block the irecv behind it until its peer had
    # received - and a ring of isend-then-irecv whose messages outlast the
    # transport's buffers would wait for ever, where Gloo's threads let it
    # through. The batch is issued as soon as anything else happens on the
    # group: any other operation (so issue order holds), a wait or test on
    # one of its Works, or 2 ms without a further isend/irecv (so a transfer
    # nobody waits on still starts). Between _start_coalescing and
    # _end_coalescing (torch 1.13's batch_isend_irecv) only the end issues it.

    def _p2p_tensor(self, tensors, fn):
        t = self._one(tensors, fn)
        check_cpu(t, fn)
        if not t.is_contiguous():
            raise CollieBackendError("%s: the tensor must be contiguous (as with Gloo; pass t.contiguous())" % fn,
                                     "invalid argument")
        return t

    def send(self, tensors, dst, tag=0):
        fn = "send"
        t = c = self._p2p_tensor(tensors, fn)
        dst = self._peer(dst, fn)
        if self._is_blocking_caller():
            return self._issue(fn, self._L.collie_send, (c.data_ptr(), nbytes(c), UINT8, dst, int(tag)), None,
                               [t], (t, c))
        return self._p2p_add(True, c, dst, tag, [t])

    def recv(self, tensors, src, tag=0):
        fn = "recv"
        t = c = self._p2p_tensor(tensors, fn)
        src = self._peer(src, fn)
        if self._is_blocking_caller():
            return self._issue(fn, self._L.collie_recv, (c.data_ptr(), nbytes(c), UINT8, src, int(tag)), None,
                               [t], (t, c))
        w = self._p2p_add(False, c, src, tag, [t])
        w._src = src  # source_rank() of a receive, as Gloo's
        return w

    @staticmethod
    def _is_blocking_caller():
        f = sys._getframe(2)
        return f.f_globals is _C10D and f.f_code.co_name in _BLOCKING_P2P and not _in_coalescing(f)

    def recv_anysource(self, tensors, tag=0):
        """dist.recv/irecv with src=None: collie_recv_any, the first rank
        whose next message to this one has tag; source_rank() says which.
        Until it has completed, another receive on the group raises."""
        fn = "recv"
        t = self._p2p_tensor(tensors, fn)
        box = ctypes.c_int(-1)
        f = sys._getframe(1)
        blocking = f.f_globals is _C10D and f.f_code.co_name == "recv"
        w = self._issue(fn, self._L.collie_recv_any, (t.data_ptr(), nbytes(t), UINT8, int(tag), ctypes.byref(box)),
                        None, [t], (t, box))
        if blocking:  # the Work is shared: answer with a completed one of this receive's own
            w = CollieWork(self, None, fn, [t])
        w._src_box = box
        return w

    def _start_coalescing(self, *args):
        self._flush_p2p()
        with self._lock:
            self._coalescing = True

    def _end_coalescing(self, *args):
        with self._lock:
            self._coalescing = False
            shared = self._flush_p2p(force=True)
        return shared if shared is not None else CollieWork(self, None, "batch_isend_irecv")  # 2.x waits on it

    def _p2p_add(self, is_send, c, peer, tag, result, post=None):
        lazy = _LazyBatch(self)
        w = CollieWork(self, None, "isend" if is_send else "irecv", result, (c,), [post] if post else None,
                       shared=lazy)
        with self._lock:
            if self._h is None:
                raise CollieBackendError("%s: the process group was destroyed" % ("send" if is_send else "recv"),
                                         "invalid usage")
            self._p2p.append((is_send, c, peer, int(tag), w, lazy))
            if not self._coalescing:
                if self._p2p_flusher is None:
                    self._p2p_flusher = threading.Thread(target=self._p2p_flush_loop, daemon=True,
                                                         name="collie-p2p-" + self._comm.get_name())
                    self._p2p_flusher.start()
                self._p2p_wake.set()
        return w

    def _p2p_flush_loop(self):
        while True:
            self._p2p_wake.wait()
            if self._h is None:
                return
            self._p2p_wake.clear()
            time.sleep(0.002)  # let the isends and irecvs issued back to back join one batch
            self._flush_p2p()

    def _flush_p2p(self, force=False):
        """Issues the held sends and receives as one collie group; returns its
        Work (None when nothing was held, or inside _start/_end_coalescing
        unless force)."""
        with self._lock:
            if not self._p2p or (self._coalescing and not force):
                return None
            return self._flush_p2p_locked()

    def _flush_p2p_locked(self):
        batch, self._p2p = self._p2p, []
        L = self._L
        h = self._h
        w = ctypes.c_void_p()
        text = "the process group was destroyed"
        rc = L.collie_group_start(h) if h is not None else _lib.INVALID_USAGE
        if rc == _lib.SUCCESS:
            for is_send, c, peer, tag, _, _ in batch:
                fn = L.collie_send if is_send else L.collie_recv
                rc = fn(h, c.data_ptr(), nbytes(c), UINT8, peer, tag, None, None)
                if rc != _lib.SUCCESS:
                    break
            text = self._last_error(rc) if rc != _lib.SUCCESS else None
            rc2 = L.collie_group_end(h, ctypes.byref(w))
            if rc == _lib.SUCCESS and rc2 != _lib.SUCCESS:
                rc, text = rc2, self._last_error(rc2)
        elif h is not None:
            text = self._last_error(rc)
        if rc != _lib.SUCCESS:
            err = CollieBackendError("isend/irecv: " + text, rc)
            for b in batch:
                b[5].fail(err)
            return None
        shared = CollieWork(self, w.value, "batch of %d isend/irecv" % len(batch), [], [b[1] for b in batch])
        shared.get_future()  # the completer holds it (and its tensors) until it has ended
        for b in batch:
            b[5].real = shared
        return shared

    # ---- synchronisation ----

    def barrier(self, opts=None):
        return self._issue("barrier", self._L.collie_barrier, (), opts)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """Gloo's monitored barrier, through the group's Store (so a missing
        rank fails the barrier without breaking the group): rank 0 waits for
        every rank's arrival within timeout and raises naming the first rank
        that did not arrive (all of them with wait_all_ranks); the others wait
        for rank 0's verdict and raise the same error."""
        if timeout is None:
            timeout = self._timeout
        if not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=float(timeout))
        self._mb_seq += 1
        base = "%s/%d" % (_TAG_MONITORED, self._mb_seq)
        me, n, st = self._rank, self._size, self._store
        st.set("%s/arrived/%d" % (base, me), b"1")
        if me == 0:
            import time

            deadline = time.monotonic() + timeout.total_seconds()
            missing = []
            for q in range(1, n):
                left = max(deadline - time.monotonic(), 0.001)
                try:
                    st.wait(["%s/arrived/%d" % (base, q)], datetime.timedelta(seconds=left))
                except Exception:
                    missing.append(q)
                    if not wait_all_ranks:
                        break
            if missing:
                what = "Rank %d" % missing[0] if len(missing) == 1 else "Ranks %s" % ", ".join(map(str, missing))
                verdict = ("monitored_barrier: %s failed to pass monitored_barrier within %d ms"
                           % (what, int(timeout.total_seconds() * 1000)))
            else:
                verdict = ""
            st.set("%s/verdict" % base, verdict.encode())
            if verdict:
                raise CollieBackendError(verdict, "timeout")
            return CollieWork(self, None, "monitored_barrier")
        try:
            st.wait(["%s/verdict" % base], timeout + datetime.timedelta(seconds=30))
            verdict = bytes(st.get("%s/verdict" % base)).decode()
        except Exception as e:
            raise CollieBackendError("monitored_barrier: rank 0 gave no verdict within the timeout (%s)" % e,
                                     "timeout") from None
        if verdict:
            raise CollieBackendError(verdict, "timeout")
        return CollieWork(self, None, "monitored_barrier")


    # ---- torch 2.x's names for the same operations ----

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """all_gather_into_tensor of each (output, input) pair; one Work."""
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return _last(self, works, outputs, "all_gather_into_tensor_coalesced")

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """reduce_scatter_tensor of each (output, input) pair; one Work."""
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return _last(self, works, outputs, "reduce_scatter_tensor_coalesced")

    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    start_coalescing = _start_coalescing
    end_coalescing = _end_coalescing
    recvAnysource = recv_anysource


def _cpp_work(work):
    """The Work handed to torch's C++ callers (DDP's reducer,
    _broadcast_coalesced, ...): a C++ Work around work's Future, which the
    completer thread settles. They keep only the C++ half of a Work; were it
    the Python subclass, once its Python object was collected their wait()
    would fall through to the base class and wait for ever. (Its wait() does
    not raise - torch's Future-backed Work never does - but their Future's
    value does, which is what DDP reads.)"""
    return _make_work(work.get_future())


def _last(pg, works, outputs, fn):
    """One Work for operations issued in order: they complete in issue order,
    so the last one's end is all of theirs (its result: every output)."""
    if not works:
        return CollieWork(pg, None, fn)
    fut = works[-1].get_future().then(lambda f: (f.value(), list(outputs))[1])
    return _make_work(fut)


class _LazyBatch:
    """What a held isend/irecv's Work waits on: the group it will be issued
    in. Touching it (wait, test) issues the held batch first."""

    def __init__(self, pg):
        self._pg = pg
        self.real = None
        self._err = None

    def fail(self, exc):
        self._err = exc

    def _issued(self):
        if self.real is None and self._err is None:
            self._pg._flush_p2p()
        if self.real is None and self._err is None:
            raise CollieBackendError("isend/irecv between _start_coalescing and _end_coalescing: waited on before "
                                     "the batch was issued", "invalid usage")
        return self.real

    @property
    def _h(self):
        r = self._issued()
        return r._h if r is not None else None

    @property
    def _exc(self):
        r = self._issued()
        return r._exc if r is not None else self._err

    def _wait_handle(self, ms):
        r = self._issued()
        if r is None:
            return True  # failed at issue: _exc has the error
        with r._lock:
            return r._wait_handle(ms)


def _in_coalescing(f):
    """True when frame f (torch's send/recv) runs inside batch_isend_irecv."""
    b = f.f_back
    return b is not None and b.f_code.co_name == "batch_isend_irecv"


def create(store, rank, size, timeout):
    """torch's creator function for the "collie" backend."""
    return ProcessGroupCollie(store, rank, size, timeout)
