"""_collectives.py - the process group's collectives (a mixin of
ProcessGroupCollie): argument checks in torch's terms, then one collie call
on the tensors' own memory, with a staging tensor only where the layout
needs one. Blocking calls of plain tensors take the direct path."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from .. import _lib
from .._enums import PayloadCategory
from . import _context
from ._common import C10D, OP_BY_ID, OWN, CollieBackendError, block, frame, last_of, move
from ._held import HOLDING
from ._tensors import NATIVE, UINT8, check_cpu, dense, nbytes, op_of, reduction_plan
from ._work import CollieWork

if TYPE_CHECKING:
    from torch._C._distributed_c10d import Work as _TorchWork

    from .._lib import CFunction
    from ._common import GroupState, Options
else:
    GroupState = object

OWN.add(id(globals()))

_D_INT64 = [d[0] for d in _lib.DTYPES].index("int64")
_CAT_TOPR_INDICES = int(PayloadCategory.TOPR_INDICES)


class Collectives(GroupState):
    """Reductions and data movement; needs the group's _issue, _lock, _h,
    _L, _rank, _size, _done, _p2p (ProcessGroupCollie)."""

    # ---- reductions ----

    # ---- the direct path ----
    #
    # The latency floor of every torch user: a blocking dist.all_reduce(t),
    # dist.broadcast(t, src), all_gather_into_tensor or all_to_all_single of
    # plain tensors goes straight to the blocking C call: what _issue would
    # do, without the generality (staging, widening, options, the frame walk).
    # all_reduce reads its op from torch's own arguments: reading
    # opts.reduceOp through pybind costs ~1 us.

    def _direct(self, loc: Dict[str, Any], t: torch.Tensor) -> Optional[int]:
        """t's collie dtype when a call of torch's (locals loc) on it may take
        the direct path, else None."""
        dt = NATIVE.get(t.dtype)
        # (is_cpu: not in torch 1.13's stubs)
        if (dt is not None and loc.get("async_op", True) is False
                and t.is_cpu and t.is_contiguous()  # type: ignore[attr-defined]
                and not t.is_sparse and not _context._stack and not HOLDING):
            return dt
        return None

    def _direct_call(self, fn: str, cfn: CFunction, *args: Any, opts: Optional[_lib.Opts] = None) -> CollieWork:
        with self._lock:
            h = self._h
            if h is None:
                raise CollieBackendError("%s: the process group was destroyed" % fn, "invalid usage")
            rc = cfn(h, *args, ctypes.byref(opts) if opts is not None else None, None)
        if rc != _lib.SUCCESS:
            raise CollieBackendError(self._last_error(rc), rc)
        return self._done

    def allreduce(self, tensors: List[torch.Tensor], opts: Options = None) -> _TorchWork:
        f = frame(1)
        if f.f_globals is C10D and len(tensors) == 1:
            loc = f.f_locals
            t = tensors[0]
            op = OP_BY_ID.get(id(loc.get("op")))
            dt = self._direct(loc, t)
            if op is not None and dt is not None:
                p = t.data_ptr()
                return self._direct_call("all_reduce", self._allreduce, p, p, t.numel(), dt, op)
        return self._allreduce_general(tensors, opts)

    def _allreduce_general(self, tensors: List[torch.Tensor], opts: Options) -> _TorchWork:
        fn = "all_reduce"
        if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor) and tensors[0].is_sparse:
            return self._allreduce_sparse(tensors[0], opts)
        t = self._one(tensors, fn)
        op = op_of(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, fn)
        c, post = dense(t, fn, out=True)
        r, dt, op, back = reduction_plan(c, op, fn)
        posts = [p for p in (back, post) if p]
        return self._issue(fn, self._L.collie_allreduce, (r.data_ptr(), r.data_ptr(), r.numel(), dt, op), opts,
                           [t], (t, c, r), posts)

    def _allreduce_sparse(self, t: torch.Tensor, opts: Options) -> _TorchWork:
        """A sparse COO tensor summed over ranks, as Gloo does it: each rank's
        coalesced entries gathered (nnz may differ between ranks: the counts
        first, then the linear indices and the values by allgatherv), summed
        into one coalesced tensor that replaces t's contents (t.copy_). The
        index bytes are charged to comms.csv's bytes_topr_indices. Blocking;
        the Work returned is complete, its result() [t]."""
        fn = "all_reduce"
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if op_of(op, fn) != op_of(dist.ReduceOp.SUM, fn):
            raise CollieBackendError("%s: sparse tensors reduce with SUM only (as Gloo)" % fn, "unsupported")
        if not t.is_cpu:  # type: ignore[attr-defined]  # (is_cpu: not in torch 1.13's stubs)
            raise CollieBackendError("%s: sparse tensors on %s: the collie backend reduces sparse CPU tensors"
                                     % (fn, t.device), "unsupported")
        c = t.coalesce()
        sd, shape = c.sparse_dim(), tuple(c.shape)
        vals = c._values().contiguous()
        dt = NATIVE.get(vals.dtype)
        if dt is None:
            raise CollieBackendError("%s: sparse values of %s: the collie backend takes %s" % (
                fn, vals.dtype, ", ".join(str(d) for d in NATIVE)), "unsupported")
        strides = [1] * sd
        for i in range(sd - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        lin = (c._indices() * torch.tensor(strides, dtype=torch.int64).view(-1, 1)).sum(0).contiguous()
        row = vals[0].numel() if vals.shape[0] else int(torch.tensor(shape[sd:], dtype=torch.int64).prod())
        nnz = torch.tensor([lin.numel()], dtype=torch.int64)
        counts = torch.zeros(self._size, dtype=torch.int64)
        self._direct_call(fn, self._L.collie_allgather, nnz.data_ptr(), counts.data_ptr(), 1, _D_INT64)
        n = [int(x) for x in counts]
        total = sum(n)
        displs = [sum(n[:q]) for q in range(self._size)]
        all_lin = torch.empty(max(total, 1), dtype=torch.int64)
        all_vals = torch.empty((max(total, 1),) + tuple(vals.shape[1:]), dtype=vals.dtype)
        ix = _lib.Opts()
        ix.category = _CAT_TOPR_INDICES
        self._direct_call(fn, self._L.collie_allgatherv, lin.data_ptr(), lin.numel(), all_lin.data_ptr(),
                          self._sizes(n), self._sizes(displs), _D_INT64, opts=ix)
        self._direct_call(fn, self._L.collie_allgatherv, vals.data_ptr(), vals.numel(), all_vals.data_ptr(),
                          self._sizes([x * row for x in n]), self._sizes([x * row for x in displs]), dt)
        idx = torch.empty((sd, total), dtype=torch.int64)
        rest = all_lin[:total].clone()
        for i in range(sd):
            idx[i] = torch.div(rest, strides[i], rounding_mode="floor")
            rest -= idx[i] * strides[i]
        out = torch.sparse_coo_tensor(idx, all_vals[:total], shape).coalesce()
        t.copy_(out)
        return CollieWork(self, None, fn, result=[t])

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Options = None) -> _TorchWork:
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

        def unflatten() -> None:
            if back:
                back()
            off = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[off:off + n].view_as(t))
                off += n

        return self._issue(fn, self._L.collie_allreduce, (r.data_ptr(), r.data_ptr(), r.numel(), dt, op), opts,
                           tensors, (flat, r), [unflatten])

    def reduce(self, tensors: List[torch.Tensor], opts: Options = None) -> _TorchWork:
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

    def reduce_scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                       opts: Options = None) -> _TorchWork:
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
        flat = torch.cat([x.reshape(-1) for x in ins]) if not block(ins) else None
        src = flat if flat is not None else torch.as_strided(ins[0], (out.numel() * self._size,), (1,))
        return self._reduce_scatter_flat(fn, out, src, opts, keep=(ins, flat))

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Options = None) -> _TorchWork:
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

    def _reduce_scatter_flat(self, fn: str, out: torch.Tensor, src: torch.Tensor, opts: Options,
                             keep: object) -> _TorchWork:
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

    def broadcast(self, tensors: List[torch.Tensor], opts: Options = None) -> _TorchWork:
        f = frame(1)
        if f.f_globals is C10D and len(tensors) == 1:
            t = tensors[0]
            dt = self._direct(f.f_locals, t)
            if dt is not None:
                root = opts.rootRank
                if 0 <= root < self._size:
                    return self._direct_call("broadcast", self._L.collie_broadcast, t.data_ptr(), t.numel(), dt, root)
        return self._broadcast_general(tensors, opts)

    def _broadcast_general(self, tensors: List[torch.Tensor], opts: Options) -> _TorchWork:
        fn = "broadcast"
        t = self._one(tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, post = dense(t, fn, out=root != self._rank)
        dt, n = move(c)
        return self._issue(fn, self._L.collie_broadcast, (c.data_ptr(), n, dt, root), opts, [t], (t, c),
                           [post] if post else None)

    def allgather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
                  opts: Options = None) -> _TorchWork:
        fn = "all_gather"
        t = self._one(input_tensors, fn)
        outs = self._one(output_tensors, fn)
        c, _ = dense(t, fn)
        self._check_list(fn, "output_list", outs, t)
        dt, n = move(c)
        if block(outs):
            return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), outs[0].data_ptr(), n, dt), opts,
                               outs, (t, c, outs))
        st = torch.empty((self._size,) + tuple(c.shape), dtype=c.dtype, device=c.device)

        def copy_out() -> None:
            for q, o in enumerate(outs):
                o.copy_(st[q])

        return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), st.data_ptr(), n, dt), opts, outs,
                           (t, c, st), [copy_out])

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Options = None) -> _TorchWork:
        f = frame(1)
        if f.f_globals is C10D:
            dt = self._direct(f.f_locals, input)
            if (dt is not None and output.dtype is input.dtype
                    and output.is_cpu and output.is_contiguous()  # type: ignore[attr-defined]
                    and output.numel() == input.numel() * self._size):
                return self._direct_call("all_gather_into_tensor", self._L.collie_allgather, input.data_ptr(),
                                         output.data_ptr(), input.numel(), dt)
        return self._allgather_base_general(output, input, opts)

    def _allgather_base_general(self, output: torch.Tensor, input: torch.Tensor, opts: Options) -> _TorchWork:
        fn = "all_gather_into_tensor"
        check_cpu(input, fn, "input")
        check_cpu(output, fn, "output")
        if output.numel() != input.numel() * self._size or output.dtype != input.dtype:
            raise CollieBackendError("%s: output is %s of %d elements, expected %s of %d (size %d x input's %d)"
                                     % (fn, output.dtype, output.numel(), input.dtype, input.numel() * self._size,
                                        self._size, input.numel()), "invalid argument")
        c, _ = dense(input, fn, "input")
        o, post = dense(output, fn, "output", out=True)
        dt, n = move(c)
        return self._issue(fn, self._L.collie_allgather, (c.data_ptr(), o.data_ptr(), n, dt), opts, [output],
                           (input, c, o), [post] if post else None)

    def allgather_coalesced(self, output_lists: List[List[torch.Tensor]], input_list: List[torch.Tensor],
                            opts: Options = None) -> _TorchWork:
        fn = "all_gather_coalesced"
        if len(output_lists) != self._size:
            raise CollieBackendError("%s: output_tensor_lists has %d lists, expected %d (one per rank)"
                                     % (fn, len(output_lists), self._size), "invalid argument")
        for t in input_list:
            check_cpu(t, fn, "input_tensor_list")
        flat = torch.cat([t.reshape(-1).view(torch.uint8) if t.numel() else t.new_empty(0, dtype=torch.uint8)
                          for t in input_list]) if input_list else torch.empty(0, dtype=torch.uint8)
        st = torch.empty(flat.numel() * self._size, dtype=torch.uint8, device=flat.device)
        for q, lst in enumerate(output_lists):
            if len(lst) != len(input_list):
                raise CollieBackendError("%s: output_tensor_lists[%d] has %d tensors, expected %d"
                                         % (fn, q, len(lst), len(input_list)), "invalid argument")
            for i, o in enumerate(lst):
                if o.numel() != input_list[i].numel() or o.dtype != input_list[i].dtype:
                    raise CollieBackendError("%s: output_tensor_lists[%d][%d] does not match input_tensor_list[%d]"
                                             % (fn, q, i, i), "invalid argument")

        def copy_out() -> None:
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

    def gather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
               opts: Options = None) -> _TorchWork:
        fn = "gather"
        t = self._one(input_tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, _ = dense(t, fn)
        dt, n = move(c)
        if root != self._rank:
            if output_tensors and any(len(x) for x in output_tensors):
                raise CollieBackendError("%s: only the root (rank %d) passes a gather_list" % (fn, root),
                                         "invalid argument")
            return self._issue(fn, self._L.collie_gather, (c.data_ptr(), None, n, dt, root), opts, [], (t, c))
        outs = self._one(output_tensors, fn)
        self._check_list(fn, "gather_list", outs, t)
        if block(outs):
            return self._issue(fn, self._L.collie_gather, (c.data_ptr(), outs[0].data_ptr(), n, dt, root), opts,
                               outs, (t, c, outs))
        st = torch.empty((self._size,) + tuple(c.shape), dtype=c.dtype, device=c.device)

        def copy_out() -> None:
            for q, o in enumerate(outs):
                o.copy_(st[q])

        return self._issue(fn, self._L.collie_gather, (c.data_ptr(), st.data_ptr(), n, dt, root), opts, outs,
                           (t, c, st), [copy_out])

    def scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                opts: Options = None) -> _TorchWork:
        fn = "scatter"
        t = self._one(output_tensors, fn)
        root = self._root(opts.rootRank, fn)
        c, post = dense(t, fn, out=True)
        dt, n = move(c)
        posts = [post] if post else None
        if root != self._rank:
            if input_tensors and any(len(x) for x in input_tensors):
                raise CollieBackendError("%s: only the root (rank %d) passes a scatter_list" % (fn, root),
                                         "invalid argument")
            return self._issue(fn, self._L.collie_scatter, (None, c.data_ptr(), n, dt, root), opts, [t], (t, c),
                               posts)
        ins = self._one(input_tensors, fn)
        self._check_list(fn, "scatter_list", ins, t)
        src = ins[0] if block(ins) else torch.stack([x.reshape(c.shape) for x in ins])
        return self._issue(fn, self._L.collie_scatter, (src.data_ptr(), c.data_ptr(), n, dt, root), opts, [t],
                           (t, c, ins, src), posts)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Optional[Sequence[int]],
                      input_split_sizes: Optional[Sequence[int]], opts: Options = None) -> _TorchWork:
        f = frame(1)
        if f.f_globals is C10D and not output_split_sizes and not input_split_sizes:
            dt = self._direct(f.f_locals, input)
            n = input.numel()
            if (dt is not None and output.dtype is input.dtype
                    and output.is_cpu and output.is_contiguous()  # type: ignore[attr-defined]
                    and output.numel() == n and n % self._size == 0):
                return self._direct_call("all_to_all_single", self._L.collie_alltoall, input.data_ptr(),
                                         output.data_ptr(), n // self._size, dt)
        return self._alltoall_base_general(output, input, output_split_sizes, input_split_sizes, opts)

    def _alltoall_base_general(self, output: torch.Tensor, input: torch.Tensor,
                               output_split_sizes: Optional[Sequence[int]],
                               input_split_sizes: Optional[Sequence[int]], opts: Options) -> _TorchWork:
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
            dt, cnt = move(i)
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

    def _splits(self, fn: str, name: str, sizes: Optional[Sequence[int]], t: torch.Tensor) -> Optional[List[int]]:
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

    def _equal(self, fn: str, what: str, t: torch.Tensor, n: int) -> List[int]:
        rows = t.shape[0] if t.dim() else t.numel()
        if rows % n:
            raise CollieBackendError("%s: %s has %d rows, not a multiple of the group size %d" % (fn, what, rows, n),
                                     "invalid argument")
        return [rows // n] * n

    def alltoall(self, output_tensors: List[torch.Tensor], input_tensors: List[torch.Tensor],
                 opts: Options = None) -> _TorchWork:
        fn = "all_to_all"
        n = self._size
        if len(input_tensors) != n or len(output_tensors) != n:
            raise CollieBackendError("%s: %d input and %d output tensors, expected %d each (one per rank)"
                                     % (fn, len(input_tensors), len(output_tensors), n), "invalid argument")
        for t in list(input_tensors) + list(output_tensors):
            check_cpu(t, fn, "tensors")
        sc = [nbytes(t) for t in input_tensors]
        rc = [nbytes(t) for t in output_tensors]
        dev = input_tensors[0].device if n else None
        src = torch.cat([t.reshape(-1).view(torch.uint8) for t in input_tensors]) if sum(sc) else \
            torch.empty(1, dtype=torch.uint8, device=dev)
        st = torch.empty(max(sum(rc), 1), dtype=torch.uint8, device=dev)
        sd = [sum(sc[:q]) for q in range(n)]
        rd = [sum(rc[:q]) for q in range(n)]

        def copy_out() -> None:
            for q, o in enumerate(output_tensors):
                o.copy_(st[rd[q]:rd[q] + rc[q]].view(o.dtype).view(o.shape))

        arrs = [self._sizes(x) for x in (sc, sd, rc, rd)]
        return self._issue(fn, self._L.collie_alltoallv,
                           (src.data_ptr(), arrs[0], arrs[1], st.data_ptr(), arrs[2], arrs[3], UINT8), opts,
                           output_tensors, (src, st, arrs, input_tensors), [copy_out])

    def _check_list(self, fn: str, what: str, lst: Sequence[torch.Tensor], t: torch.Tensor) -> None:
        if len(lst) != self._size:
            raise CollieBackendError("%s: %s has %d tensors, expected %d (one per rank)" % (fn, what, len(lst),
                                                                                         self._size),
                                     "invalid argument")
        for q, o in enumerate(lst):
            check_cpu(o, fn, "%s[%d]" % (what, q))
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise CollieBackendError("%s: %s[%d] is %s of %d elements but the tensor is %s of %d"
                                         % (fn, what, q, o.dtype, o.numel(), t.dtype, t.numel()), "invalid argument")

    # ---- torch 2.x's names for the same operations (p2p's are in _p2p.py) ----

    def allgather_into_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Options = None) -> _TorchWork:
        """all_gather_into_tensor of each (output, input) pair; one Work."""
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return last_of(self, works, outputs, "all_gather_into_tensor_coalesced")

    def reduce_scatter_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Options = None) -> _TorchWork:
        """reduce_scatter_tensor of each (output, input) pair; one Work."""
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return last_of(self, works, outputs, "reduce_scatter_tensor_coalesced")

    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
