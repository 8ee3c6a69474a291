// fast_group.cpp - the C++ group torch calls: the common case straight into
// libcollie, everything else to the Python group (fast.hpp says why).
#include <Python.h>

#include "fast.hpp"

namespace collie_torch {

namespace {

// ---- the category block of collie.torch.category (process-wide) ----

struct Context {
  std::mutex m;
  std::atomic<bool> open{false};
  int category = 0;
  std::string label, phase;
  bool has_label = false, has_phase = false;
};
Context g_ctx;

// torch dtype -> collie dtype for what collie computes natively (the Python
// group widens, reinterprets or refuses the rest: _tensors.py).
bool
native_dtype(at::ScalarType t, collie_dtype_t *out)
{
  switch (t) {
  case at::kChar:
    *out = COLLIE_INT8;
    return true;
  case at::kByte:
    *out = COLLIE_UINT8;
    return true;
  case at::kInt:
    *out = COLLIE_INT32;
    return true;
  case at::kLong:
    *out = COLLIE_INT64;
    return true;
  case at::kHalf:
    *out = COLLIE_FLOAT16;
    return true;
  case at::kBFloat16:
    *out = COLLIE_BFLOAT16;
    return true;
  case at::kFloat:
    *out = COLLIE_FLOAT32;
    return true;
  case at::kDouble:
    *out = COLLIE_FLOAT64;
    return true;
  default:
    return false;
  }
}

bool
native_op(const c10d::ReduceOp &op, collie_op_t *out)
{
  switch (op.op_) {
  case c10d::ReduceOp::SUM:
    *out = COLLIE_SUM;
    return true;
  case c10d::ReduceOp::AVG:
    *out = COLLIE_AVG;
    return true;
  case c10d::ReduceOp::PRODUCT:
    *out = COLLIE_PROD;
    return true;
  case c10d::ReduceOp::MIN:
    *out = COLLIE_MIN;
    return true;
  case c10d::ReduceOp::MAX:
    *out = COLLIE_MAX;
    return true;
  case c10d::ReduceOp::BAND:
    *out = COLLIE_BAND;
    return true;
  case c10d::ReduceOp::BOR:
    *out = COLLIE_BOR;
    return true;
  case c10d::ReduceOp::BXOR:
    *out = COLLIE_BXOR;
    return true;
  default:
    return false; // PREMUL_SUM: the Python group refuses it by name
  }
}

// A tensor the fast path passes as it is: dense, contiguous, in host memory.
bool
plain(const at::Tensor &t)
{
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && t.is_contiguous();
}

// Moving bytes needs no dtype: collie's own when it has one (telemetry shows
// it), else bytes (as the Python group's move()).
void
move_of(const at::Tensor &t, collie_dtype_t *dt, size_t *count)
{
  if (native_dtype(t.scalar_type(), dt)) {
    *count = static_cast<size_t>(t.numel());
  } else {
    *dt = COLLIE_UINT8;
    *count = static_cast<size_t>(t.numel()) * t.element_size();
  }
}

// torch.distributed's own module, whose functions wait on the Work at once
// when their local async_op is False (set at module import).
PyObject *g_c10d_globals = nullptr;
// torch's C++ Work class (Works of the Python group subclass it in Python).
py::handle g_work_type;
// collie.torch._held.flush_held.
PyObject *g_flush_held = nullptr;

// The name of frame f's function is name.
bool
named(PyFrameObject *f, const char *name)
{
  PyCodeObject *code = PyFrame_GetCode(f);
  bool is = PyUnicode_CompareWithASCIIString(code->co_name, name) == 0;
  Py_DECREF(code);
  return is;
}

// True when frame f (torch.distributed's, which called the group's send or
// recv) is dist.send or dist.recv outside batch_isend_irecv: torch 1.x calls
// the group from there, torch 2.x through dist.isend or dist.irecv. The same
// rule as the Python group's (_common.blocking_p2p_caller). f is borrowed.
bool
p2p_waits_at_once(PyFrameObject *f, const char *p2p)
{
  PyFrameObject *caller = nullptr; // a new reference when taken
  if (!named(f, p2p)) {
    if (!(p2p[0] == 's' ? named(f, "isend") : named(f, "irecv"))) return false;
    caller = PyFrame_GetBack(f);
    if (caller == nullptr) return false;
    PyObject *globals = PyFrame_GetGlobals(caller);
    bool ours = globals == g_c10d_globals && named(caller, p2p);
    Py_XDECREF(globals);
    if (!ours) {
      Py_DECREF(caller);
      return false;
    }
    f = caller;
  }
  PyFrameObject *back = PyFrame_GetBack(f);
  bool waits = back == nullptr || !named(back, "batch_isend_irecv");
  Py_XDECREF(back);
  Py_XDECREF(caller);
  return waits;
}

// True when the call comes from a function of torch.distributed that waits
// on its Work at once: dist.all_reduce(t) and the like (their local async_op
// is False), or, for p2p "send"/"recv", dist.send and dist.recv themselves
// (outside batch_isend_irecv). The call then runs here, blocking, instead of
// on collie's worker thread and back, which on a busy machine is most of a
// small call's time. The same rule as the Python group's direct path
// (_collectives.py, _p2p.py). Called without the GIL (torch releases it);
// DDP's threads have no Python frame at all.
bool
caller_waits_at_once(const char *p2p)
{
  if (g_c10d_globals == nullptr || !Py_IsInitialized()) return false;
  // A thread Python never ran on (DDP's reducer on autograd's threads) has no
  // frame to read: no GIL taken for it.
  if (PyGILState_GetThisThreadState() == nullptr) return false;
  PyGILState_STATE st = PyGILState_Ensure();
  bool waits = false;
  PyFrameObject *f = PyEval_GetFrame(); // borrowed
  if (f != nullptr) {
    PyObject *globals = PyFrame_GetGlobals(f);
    if (globals == g_c10d_globals && p2p != nullptr) {
      waits = p2p_waits_at_once(f, p2p);
    } else if (globals == g_c10d_globals) {
#if PY_VERSION_HEX >= 0x030C0000
      PyObject *v = PyFrame_GetVarString(f, const_cast<char *>("async_op"));
      waits = v == Py_False;
      Py_XDECREF(v);
      if (v == nullptr) PyErr_Clear();
#else
      PyObject *locals = PyFrame_GetLocals(f);
      if (locals != nullptr) {
        PyObject *v = PyMapping_GetItemString(locals, "async_op");
        waits = v == Py_False;
        Py_XDECREF(v);
        if (v == nullptr) PyErr_Clear();
        Py_DECREF(locals);
      } else {
        PyErr_Clear();
      }
#endif
    }
    Py_XDECREF(globals);
  }
  PyGILState_Release(st);
  return waits;
}

// True when torch said the caller waits on the Work at once: newer torch
// sets the options' asyncOp from async_op (2.6 for broadcast and the tensor
// all-gather and reduce-scatter, 2.14 for every collective). Where the field
// is absent, or left at its default (true), the caller's frame decides.
template <typename O>
auto
told_blocking(const O &opts, int) -> decltype(opts.asyncOp, bool())
{
  return !opts.asyncOp;
}
template <typename O>
bool
told_blocking(const O &, long)
{
  return false;
}
template <typename O>
bool
told_blocking(const O &opts)
{
  return told_blocking(opts, 0);
}

} // namespace

std::atomic<int> g_held_groups{0};

void
flush_held()
{
  if (g_held_groups.load(std::memory_order_acquire) <= 0 || g_flush_held == nullptr ||
      !Py_IsInitialized())
    return;
  py::gil_scoped_acquire gil;
  py::handle flush(g_flush_held);
  flush();
}

void
set_context(bool open, int category, const std::string &label, bool has_label,
            const std::string &phase, bool has_phase)
{
  std::lock_guard<std::mutex> g(g_ctx.m);
  g_ctx.category = category;
  g_ctx.label = label;
  g_ctx.phase = phase;
  g_ctx.has_label = has_label;
  g_ctx.has_phase = has_phase;
  g_ctx.open.store(open, std::memory_order_release);
}

void
IssueLock::lock()
{
  if (m_.try_lock()) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release nogil; // the holder may be waiting for the GIL
    m_.lock();
    return;
  }
  m_.lock();
}

FastGroup::FastGroup(py::object py_group, uintptr_t comm, int rank, int size,
                     std::shared_ptr<IssueLock> lock)
    : COLLIE_TORCH_BASE(rank, size), py_(std::move(py_group)),
      comm_(reinterpret_cast<collie_comm_t *>(comm)), lock_(std::move(lock)),
      completer_(std::make_shared<Completer>())
{
}

FastGroup::~FastGroup()
{
  set_held(false);
  completer_->stop();
  if (py_ && Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    py_ = py::object();
  } else {
    py_.release(); // the interpreter is gone: nothing to decrement
  }
}

void
FastGroup::detach()
{
  std::lock_guard<IssueLock> g(*lock_);
  comm_.store(nullptr, std::memory_order_release);
  completer_->stop();
}

py::object
FastGroup::python_group() const
{
  return py_;
}

// The telemetry and deadline options of a fast call: false when it needs
// none (collie's defaults).
bool
FastGroup::opts_for(std::chrono::milliseconds timeout, collie_opts_t *o, std::string *label,
                    std::string *phase) const
{
  *o = collie_opts_t{};
  bool any = false;
  if (timeout.count() > 0) { // torch's "unset" is negative
    o->timeout_ms = timeout.count();
    any = true;
  }
  if (g_ctx.open.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> g(g_ctx.m);
    if (g_ctx.open.load(std::memory_order_relaxed)) {
      o->category = g_ctx.category;
      *label = g_ctx.label;
      *phase = g_ctx.phase;
      o->label = g_ctx.has_label ? label->c_str() : nullptr;
      o->phase = g_ctx.has_phase ? phase->c_str() : nullptr;
      any = true;
    }
  }
  return any;
}

template <typename F>
c10::intrusive_ptr<c10d::Work>
FastGroup::issue(const char *what, F &&call, std::vector<at::Tensor> keep,
                 std::vector<at::Tensor> result, const char *p2p, bool told)
{
  if (g_held_groups.load(std::memory_order_acquire) > 0) return {};
  // (caller_waits_at_once takes the GIL: before the issue lock)
  bool blocking = told || caller_waits_at_once(p2p);
  if (p2p != nullptr && !blocking) return {}; // isend/irecv: the Python group batches them
  std::lock_guard<IssueLock> g(*lock_);
  collie_comm_t *comm = comm_.load(std::memory_order_acquire);
  if (comm == nullptr || g_held_groups.load(std::memory_order_acquire) > 0) return {};
  collie_work_t *w = nullptr;
  collie_result_t rc = call(comm, blocking ? nullptr : &w);
  if (rc != COLLIE_SUCCESS) {
    const char *text = collie_last_error();
    throw CollieError(text && *text ? text : collie_result_string(rc), rc);
  }
  fast_calls_.fetch_add(1, std::memory_order_relaxed);
  return c10::make_intrusive<FastWork>(w, what, std::move(keep), std::move(result), completer_);
}

template <typename... A>
c10::intrusive_ptr<c10d::Work>
FastGroup::delegate(const char *method, A &&...args)
{
  py::gil_scoped_acquire gil;
  if (!py_ || py_.is_none()) {
    throw CollieError(std::string(method) + ": the process group was destroyed",
                      COLLIE_INVALID_USAGE);
  }
  py::object r = py_.attr(method)(std::forward<A>(args)...);
  auto w = r.cast<c10::intrusive_ptr<c10d::Work>>();
  // torch's own Work around a Future (cpp_work): one whose wait() raises.
  if (py::type::of(r).is(g_work_type)) return c10::make_intrusive<CheckedWork>(std::move(w));
  // A Work of the Python group is a Python object over a C++ trampoline: it
  // must outlive this return until torch has turned the C++ pointer back
  // into it, or its wait() would fall through to the base class and never
  // return. The Python group holds it (_hold).
  py_.attr("_hold")(r);
  return w;
}

// ---- collectives: the fast case, else the Python group ----

c10::intrusive_ptr<c10d::Work>
FastGroup::allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts)
{
  count_collective();
  collie_dtype_t dt;
  collie_op_t op;
  if (tensors.size() == 1 && plain(tensors[0]) && native_dtype(tensors[0].scalar_type(), &dt) &&
      native_op(opts.reduceOp, &op)) {
    at::Tensor &t = tensors[0];
    collie_opts_t o;
    std::string label, phase;
    bool any = opts_for(opts.timeout, &o, &label, &phase);
    void *p = t.data_ptr();
    size_t n = static_cast<size_t>(t.numel());
    auto w = issue(
        "all_reduce",
        [&](collie_comm_t *c, collie_work_t **wk) {
          return collie_allreduce(c, p, p, n, dt, op, any ? &o : nullptr, wk);
        },
        {t}, {t}, nullptr, told_blocking(opts));
    if (w) return w;
  }
  return delegate("allreduce", tensors, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts)
{
  count_collective();
  if (tensors.size() == 1 && plain(tensors[0]) && opts.rootTensor == 0 && opts.rootRank >= 0 &&
      opts.rootRank < getSize()) {
    at::Tensor &t = tensors[0];
    collie_dtype_t dt;
    size_t n;
    move_of(t, &dt, &n);
    collie_opts_t o;
    std::string label, phase;
    bool any = opts_for(opts.timeout, &o, &label, &phase);
    void *p = t.data_ptr();
    int root = static_cast<int>(opts.rootRank);
    auto w = issue(
        "broadcast",
        [&](collie_comm_t *c, collie_work_t **wk) {
          return collie_broadcast(c, p, n, dt, root, any ? &o : nullptr, wk);
        },
        {t}, {t}, nullptr, told_blocking(opts));
    if (w) return w;
  }
  return delegate("broadcast", tensors, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::_allgather_base(at::Tensor &output, at::Tensor &input,
                           const c10d::AllgatherOptions &opts)
{
  count_collective();
  if (plain(output) && plain(input) && output.scalar_type() == input.scalar_type() &&
      output.numel() == input.numel() * getSize()) {
    collie_dtype_t dt;
    size_t n;
    move_of(input, &dt, &n);
    collie_opts_t o;
    std::string label, phase;
    bool any = opts_for(opts.timeout, &o, &label, &phase);
    const void *src = input.data_ptr();
    void *dst = output.data_ptr();
    auto w = issue(
        "all_gather_into_tensor",
        [&](collie_comm_t *c, collie_work_t **wk) {
          return collie_allgather(c, src, dst, n, dt, any ? &o : nullptr, wk);
        },
        {output, input}, {output}, nullptr, told_blocking(opts));
    if (w) return w;
  }
  return delegate("_allgather_base", output, input, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                const c10d::ReduceScatterOptions &opts)
{
  count_collective();
  collie_dtype_t dt;
  collie_op_t op;
  if (plain(output) && plain(input) && output.scalar_type() == input.scalar_type() &&
      input.numel() == output.numel() * getSize() && native_dtype(input.scalar_type(), &dt) &&
      native_op(opts.reduceOp, &op)) {
    collie_opts_t o;
    std::string label, phase;
    bool any = opts_for(opts.timeout, &o, &label, &phase);
    const void *src = input.data_ptr();
    void *dst = output.data_ptr();
    size_t n = static_cast<size_t>(output.numel());
    auto w = issue(
        "reduce_scatter_tensor",
        [&](collie_comm_t *c, collie_work_t **wk) {
          return collie_reduce_scatter(c, src, dst, n, dt, op, any ? &o : nullptr, wk);
        },
        {output, input}, {output}, nullptr, told_blocking(opts));
    if (w) return w;
  }
  return delegate("_reduce_scatter_base", output, input, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::alltoall_base(at::Tensor &output, at::Tensor &input, std::vector<int64_t> &outSplits,
                         std::vector<int64_t> &inSplits, const c10d::AllToAllOptions &opts)
{
  count_collective();
  if (outSplits.empty() && inSplits.empty() && plain(output) && plain(input) &&
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() &&
      input.numel() % getSize() == 0) {
    collie_dtype_t dt;
    size_t n;
    move_of(input, &dt, &n);
    n /= static_cast<size_t>(getSize());
    collie_opts_t o;
    std::string label, phase;
    bool any = opts_for(opts.timeout, &o, &label, &phase);
    const void *src = input.data_ptr();
    void *dst = output.data_ptr();
    auto w = issue(
        "all_to_all_single",
        [&](collie_comm_t *c, collie_work_t **wk) {
          return collie_alltoall(c, src, dst, n, dt, any ? &o : nullptr, wk);
        },
        {output, input}, {output}, nullptr, told_blocking(opts));
    if (w) return w;
  }
  return delegate("alltoall_base", output, input, outSplits, inSplits, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::barrier(const c10d::BarrierOptions &opts)
{
  count_collective();
  collie_opts_t o;
  std::string label, phase;
  bool any = opts_for(opts.timeout, &o, &label, &phase);
  auto w = issue(
      "barrier",
      [&](collie_comm_t *c, collie_work_t **wk) {
        return collie_barrier(c, any ? &o : nullptr, wk);
      },
      {}, {}, nullptr, told_blocking(opts));
  if (w) return w;
  return delegate("barrier", opts);
}

// ---- what the Python group does (lists, staging, roots, point to point) ----

c10::intrusive_ptr<c10d::Work>
FastGroup::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                               const c10d::AllreduceCoalescedOptions &opts)
{
  count_collective();
  return delegate("allreduce_coalesced", tensors, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts)
{
  count_collective();
  return delegate("reduce", tensors, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::allgather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                     const c10d::AllgatherOptions &opts)
{
  count_collective();
  return delegate("allgather", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                               std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
  count_collective();
  return delegate("allgather_coalesced", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::gather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                  const c10d::GatherOptions &opts)
{
  count_collective();
  return delegate("gather", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ScatterOptions &opts)
{
  count_collective();
  return delegate("scatter", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::reduce_scatter(std::vector<at::Tensor> &outputs,
                          std::vector<std::vector<at::Tensor>> &inputs,
                          const c10d::ReduceScatterOptions &opts)
{
  count_collective();
  return delegate("reduce_scatter", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                    const c10d::AllToAllOptions &opts)
{
  count_collective();
  return delegate("alltoall", outputs, inputs, opts);
}

// A peer and tag the Python group would take (it names the others).
bool
FastGroup::plain_peer(int peer, int tag) const
{
  return peer >= 0 && peer < getSize() && peer != getRank() && tag >= 0;
}

// Blocking dist.send/dist.recv of one plain tensor (null otherwise); as
// bytes, as the Python group sends them, so that either half's send matches
// either half's recv.
c10::intrusive_ptr<c10d::Work>
FastGroup::p2p(bool is_send, std::vector<at::Tensor> &tensors, int peer, int tag)
{
  if (tensors.size() != 1 || !plain(tensors[0]) || !plain_peer(peer, tag)) return {};
  at::Tensor &t = tensors[0];
  void *p = t.data_ptr();
  size_t n = static_cast<size_t>(t.numel()) * t.element_size();
  collie_opts_t o;
  std::string label, phase;
  const collie_opts_t *op =
      opts_for(std::chrono::milliseconds(-1), &o, &label, &phase) ? &o : nullptr;
  const char *what = is_send ? "send" : "recv";
  return issue(
      what,
      [&](collie_comm_t *c, collie_work_t **wk) {
        return is_send ? collie_send(c, p, n, COLLIE_UINT8, peer, tag, op, wk)
                       : collie_recv(c, p, n, COLLIE_UINT8, peer, tag, op, wk);
      },
      {t}, {t}, what);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::send(std::vector<at::Tensor> &tensors, int dstRank, int tag)
{
  auto w = p2p(true, tensors, dstRank, tag);
  return w ? w : delegate("send", tensors, dstRank, tag);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::recv(std::vector<at::Tensor> &tensors, int srcRank, int tag)
{
  auto w = p2p(false, tensors, srcRank, tag);
  return w ? w : delegate("recv", tensors, srcRank, tag);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::recvAnysource(std::vector<at::Tensor> &tensors, int tag)
{
  return delegate("recv_anysource", tensors, tag);
}

#if COLLIE_TORCH_BACKEND_ABORT
// Torch may call these from a ProcessGroup's destructor while Python exits:
// then there is no interpreter to run the Python group, and collie.torch's
// exit handler has already shut its groups down.
static bool
python_alive()
{
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void
FastGroup::shutdown()
{
  if (!python_alive()) return;
  py::gil_scoped_acquire gil;
  if (py_ && !py_.is_none()) py_.attr("shutdown")();
}

void
FastGroup::abort()
{
  if (!python_alive()) return;
  py::gil_scoped_acquire gil;
  if (py_ && !py_.is_none()) py_.attr("abort")();
}
#endif

void
FastGroup::monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks)
{
  count_collective();
  py::gil_scoped_acquire gil;
  if (!py_ || py_.is_none())
    throw CollieError("monitored_barrier: the process group was destroyed", COLLIE_INVALID_USAGE);
  py::object timeout = py::none();
  // torch's "not given" is kUnsetTimeout (-1 ms), as in Gloo; 0 is a
  // timeout of none at all, which rank 0 fails at once.
  if (opts.timeout != c10d::kUnsetTimeout)
    timeout = py::float_(opts.timeout.count() / 1000.0); // seconds
  py_.attr("monitored_barrier")(timeout, waitAllRanks);
}

void
FastGroup::startCoalescing()
{
  py::gil_scoped_acquire gil;
  if (py_ && !py_.is_none()) py_.attr("_start_coalescing")();
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work>
FastGroup::endCoalescing()
{
  return delegate("_end_coalescing");
}

c10::intrusive_ptr<c10d::Work>
FastGroup::allreduce_sparse(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts)
{
  count_collective();
  return delegate("allreduce", tensors, opts); // the Python group sums sparse tensors as Gloo does
}

c10::intrusive_ptr<c10d::Work>
FastGroup::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts)
{
  count_collective();
  return delegate("allgather_into_tensor_coalesced", outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work>
FastGroup::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::ReduceScatterOptions &opts)
{
  count_collective();
  return delegate("reduce_scatter_tensor_coalesced", outputs, inputs, opts);
}
#else
void
FastGroup::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> &reqs)
{
  delegate("_end_coalescing");
}
#endif

#if TORCH_VERSION_MAJOR >= 2
NamedGroup::NamedGroup(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       const c10::intrusive_ptr<c10d::Backend> &backend)
    : c10d::ProcessGroup(store, rank, size)
{
  // As torch's own group creation registers a plugin (one backend for
  // every device type it names: collie.torch registers cpu and cuda).
  setDefaultBackend(BackendType::CUSTOM);
  for (c10::DeviceType t : {c10::DeviceType::CPU, c10::DeviceType::CUDA})
    setBackend(t, BackendType::CUSTOM, backend);
}
#endif

} // namespace collie_torch

// ---- the module ----

namespace ct = collie_torch;

PYBIND11_MODULE(COLLIE_TORCH_EXT_NAME, m)
{
  m.doc() = "collie's torch.distributed backend in C++ (collie.torch loads it; docs/torch.md)";
  py::module::import("torch.distributed"); // registers the base classes below
  ct::g_work_type =
      py::object(py::module::import("torch._C._distributed_c10d").attr("Work")).release();
  ct::g_c10d_globals =
      py::object(py::module::import("torch.distributed.distributed_c10d").attr("__dict__"))
          .release()
          .ptr();
  ct::g_flush_held =
      py::object(py::module::import("collie.torch._held").attr("flush_held")).release().ptr();
  // Whether torch's own destroy_process_group/_abort_process_group reach the
  // collie group through this module (torch's Backend has shutdown/abort).
  m.attr("forwards_shutdown") = py::bool_(COLLIE_TORCH_BACKEND_ABORT != 0);

  py::class_<ct::IssueLock, std::shared_ptr<ct::IssueLock>>(m, "IssueLock")
      .def(py::init<>())
      .def("__enter__", [](ct::IssueLock &l) { l.lock(); })
      .def("__exit__", [](ct::IssueLock &l, py::args) { l.unlock(); })
      .def("acquire",
           [](ct::IssueLock &l) {
             l.lock();
             return true;
           })
      .def("release", [](ct::IssueLock &l) { l.unlock(); });

  py::class_<ct::FastGroup, COLLIE_TORCH_BASE, c10::intrusive_ptr<ct::FastGroup>>(m, "FastGroup")
      .def(py::init([](py::object group, uintptr_t comm, int rank, int size,
                       std::shared_ptr<ct::IssueLock> lock) {
             return c10::make_intrusive<ct::FastGroup>(std::move(group), comm, rank, size,
                                                       std::move(lock));
           }),
           py::arg("group"), py::arg("comm"), py::arg("rank"), py::arg("size"), py::arg("lock"))
      .def("detach", &ct::FastGroup::detach)
      .def("set_held", &ct::FastGroup::set_held)
      .def_property_readonly("collie_group", &ct::FastGroup::python_group)
      .def_property_readonly("fast_calls", &ct::FastGroup::fast_calls);

#if TORCH_VERSION_MAJOR >= 2
  // A plain function, not a class: an unregistered C++ subclass reaches
  // Python as torch's ProcessGroup itself, and torch 2.x checks
  // `type(group) is ProcessGroup` (batch_isend_irecv's coalescing).
  m.def(
      "named_group",
      [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
         const c10::intrusive_ptr<c10d::Backend> &backend)
          -> c10::intrusive_ptr<c10d::ProcessGroup> {
        return c10::make_intrusive<ct::NamedGroup>(store, rank, size, backend);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("backend"));
#endif

  // Python callers see the Python group's errors: CollieBackendError (a
  // RuntimeError; torch 2.x: a DistBackendError) with collie's message and
  // code, from the calls, wait() and exception() (torch 1.13's own
  // exception() cannot return a C++ exception to Python).
  // The class is looked up now (collie.torch has imported it before it
  // loads this module): a translation must not fail on an import.
  static PyObject *error_class = nullptr;
  try {
    error_class = py::object(py::module::import("collie.torch._common").attr("CollieBackendError"))
                      .release()
                      .ptr();
  } catch (const py::error_already_set &) {
    PyErr_Clear(); // loaded by hand, outside collie.torch: RuntimeError below
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ct::CollieError &e) {
      if (error_class == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return;
      }
      py::object cls = py::reinterpret_borrow<py::object>(error_class);
      PyErr_SetObject(error_class, cls(std::string(e.what()), e.code).ptr());
    }
  });

  py::class_<ct::FastWork, c10d::Work, c10::intrusive_ptr<ct::FastWork>>(m, "FastWork")
      .def(
          "wait",
          [](ct::FastWork &w, py::object timeout) {
            int64_t ms = 0; // torch's kNoTimeout: the operation's own deadline
            if (!timeout.is_none()) {
              double secs = py::hasattr(timeout, "total_seconds")
                                ? timeout.attr("total_seconds")().cast<double>()
                                : timeout.cast<double>();
              if (secs > 0) ms = std::max<int64_t>(1, static_cast<int64_t>(secs * 1000));
            }
            py::gil_scoped_release nogil;
            return w.wait(std::chrono::milliseconds(ms));
          },
          py::arg("timeout") = py::none())
      .def("result",
           [](ct::FastWork &w) {
             py::gil_scoped_release nogil; // it may wait for the operation
             return w.result();
           })
      .def("exception", [](ct::FastWork &w) -> py::object {
        if (!w.isCompleted() || w.error_code() == COLLIE_SUCCESS) return py::none();
        // The class the translator raises (looked up once, at load).
        py::object cls = error_class != nullptr
                             ? py::reinterpret_borrow<py::object>(error_class)
                             : py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
        return error_class != nullptr ? cls(w.error_text(), w.error_code()) : cls(w.error_text());
      });

  m.def("set_context", &ct::set_context, py::arg("open"), py::arg("category"), py::arg("label"),
        py::arg("has_label"), py::arg("phase"), py::arg("has_phase"));
}
