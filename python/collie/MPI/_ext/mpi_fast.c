/* mpi_fast.c - collie.MPI's most frequent calls straight from Python into
 * libcollie: the module _collie_mpi_fast (docs/mpi.md, "Speed").
 *
 * A blocking Send or Recv of a numpy array costs mpi4py about a microsecond
 * over MPI's own latency; through ctypes, collie.MPI spent twenty (reading
 * the buffer's address, building the ctypes arguments, the checks). Each
 * function here takes the common case as a program gives it - a C-contiguous
 * buffer whose format MPI has a datatype for, a peer and tag in range, a
 * predefined reduction collie runs in C - reads the buffer's address with
 * the buffer protocol, and calls collie with the GIL released.
 *
 * Anything else returns None, and the Python code (_comm.py) takes the call
 * with its full checks: the two paths give the same results and the same
 * errors, because every argument the fast one cannot judge goes to the
 * other. A failure inside collie returns collie's result code (an int > 0);
 * the caller raises MPI.Exception with collie_last_error(), read on the
 * same thread before any other collie call.
 *
 * Each function takes collie's Python communicator (collie._comm.Comm) and
 * holds its lock around the call, as the Python path does: one thread at a
 * time issues calls on it (MPI_THREAD_SERIALIZED). The lock is tried, not
 * waited for: when another thread holds it, the call goes the Python way,
 * which waits. Taking it here costs a tenth of Python's `with`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <string.h>

#include <collie.h>

#define FAST_ANY (-1)           /* MPI.ANY_SOURCE and MPI.ANY_TAG */
#define FAST_MAX_TAG 2147483646 /* _comm.py's MAX_TAG (comm.Get_attr(MPI.TAG_UB)) */

static PyObject *fast_in_place;                        /* MPI.IN_PLACE, given by setup() */
static PyObject *s_lock, *s_h, *s_acquire, *s_release; /* interned attribute names */

/* The communicator of a call, its lock held. */
struct fast_call {
  PyObject *lock;
  collie_comm_t *comm;
};

/* The collie dtype of a buffer format MPI infers a datatype for; -1 when the
 * format is one only the Python path handles (bool, complex, char, pairs,
 * a foreign byte order) or has no datatype at all. */
static int
fast_dtype(const char *fmt, Py_ssize_t itemsize)
{
  if (!fmt) return COLLIE_UINT8; /* the buffer protocol's default: unsigned bytes */
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
  if (!fmt[0] || fmt[1]) return -1;
  switch (fmt[0]) {
  case 'b':
    return COLLIE_INT8;
  case 'B':
    return COLLIE_UINT8;
  case 'i':
  case 'l':
  case 'q':
    return itemsize == 4 ? COLLIE_INT32 : itemsize == 8 ? COLLIE_INT64 : -1;
  case 'I':
  case 'L':
  case 'Q':
    return itemsize == 4 ? COLLIE_UINT32 : itemsize == 8 ? COLLIE_UINT64 : -1;
  case 'f':
    return itemsize == 4 ? COLLIE_FLOAT32 : -1;
  case 'd':
    return itemsize == 8 ? COLLIE_FLOAT64 : -1;
  default:
    return -1;
  }
}

/* Whether the Python path would take fmt as a buffer of a datatype (the
 * transfers move bytes, so any of them travels): the numeric formats above
 * and bool, short, complex. */
static int
fast_movable(const char *fmt, Py_ssize_t itemsize)
{
  if (fast_dtype(fmt, itemsize) >= 0) return 1;
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
  if (!strcmp(fmt, "Zf") || !strcmp(fmt, "Zd")) return 1;
  return fmt[0] && !fmt[1] && strchr("?hHFD", fmt[0]) != NULL;
}

/* args[i] as a C int; 0 (and no error set) when it is not an int in range. */
static int
fast_int(PyObject *o, int *out)
{
  if (!PyLong_CheckExact(o)) return 0;
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  if (v < INT_MIN || v > INT_MAX) return 0;
  *out = (int)v;
  return 1;
}

/* Takes c's lock (without waiting) and its live handle: 1, or 0 (nothing
 * held, no error set) when another thread holds the lock or c was
 * finalized - the Python path then says or waits. */
static int
fast_enter(PyObject *c, struct fast_call *fc)
{
  PyObject *lock = PyObject_GetAttr(c, s_lock);
  if (!lock) {
    PyErr_Clear();
    return 0;
  }
  PyObject *args[2] = {lock, Py_False};
  PyObject *got = PyObject_VectorcallMethod(s_acquire, args, 2, NULL);
  if (got != Py_True) {
    Py_XDECREF(got);
    PyErr_Clear();
    Py_DECREF(lock);
    return 0;
  }
  Py_DECREF(got);
  PyObject *h = PyObject_GetAttr(c, s_h);
  void *p = h && PyLong_Check(h) ? PyLong_AsVoidPtr(h) : NULL;
  Py_XDECREF(h);
  PyErr_Clear();
  fc->lock = lock;
  fc->comm = p;
  if (p) return 1;
  PyObject *r = PyObject_VectorcallMethod(s_release, args, 1, NULL);
  Py_XDECREF(r);
  PyErr_Clear();
  Py_DECREF(lock);
  return 0;
}

static void
fast_leave(struct fast_call *fc)
{
  PyObject *args[1] = {fc->lock};
  PyObject *r = PyObject_VectorcallMethod(s_release, args, 1, NULL);
  Py_XDECREF(r);
  PyErr_Clear();
  Py_DECREF(fc->lock);
}

/* A C-contiguous buffer of obj (writable when asked) whose format MPI has a
 * datatype for; 0 (nothing held, no error set) otherwise. */
static int
fast_buffer(PyObject *obj, Py_buffer *v, int writable)
{
  if (PyList_Check(obj) || PyTuple_Check(obj)) return 0; /* mpi4py's [buf, count, type] forms */
  if (PyObject_GetBuffer(
          obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) != 0) {
    PyErr_Clear();
    return 0;
  }
  if (!v->format || fast_movable(v->format, v->itemsize)) return 1;
  PyBuffer_Release(v);
  return 0;
}

/* A named peer of comm other than this rank (sends and receives to oneself
 * and PROC_NULL go the Python way), or, where any_ok, ANY_SOURCE. */
static int
fast_peer(collie_comm_t *comm, int peer, int any_ok)
{
  if (any_ok && peer == FAST_ANY) return 1;
  return peer >= 0 && peer < collie_comm_size(comm) && peer != collie_comm_rank(comm);
}

static int
fast_tag(int tag, int any_ok)
{
  return (any_ok && tag == FAST_ANY) || (tag >= 0 && tag <= FAST_MAX_TAG);
}

static PyObject *
fast_result(collie_result_t rc)
{
  return PyLong_FromLong((long)rc);
}

/* setup(IN_PLACE): what the module compares sendbuf arguments with. */
static PyObject *
fast_setup(PyObject *self, PyObject *in_place)
{
  (void)self;
  Py_INCREF(in_place);
  Py_XSETREF(fast_in_place, in_place);
  Py_RETURN_NONE;
}

/* send(comm, buf, dest, tag, sync) -> 0, a result code, or None. */
static PyObject *
fast_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int dest, tag, sync;
  if (nargs != 5 || !fast_int(args[2], &dest) || !fast_int(args[3], &tag) ||
      !fast_int(args[4], &sync) || !fast_tag(tag, 0))
    Py_RETURN_NONE;
  Py_buffer v;
  if (!fast_buffer(args[1], &v, 0)) Py_RETURN_NONE;
  struct fast_call fc;
  if (!fast_enter(args[0], &fc)) goto python;
  if (!fast_peer(fc.comm, dest, 0)) {
    fast_leave(&fc);
    goto python;
  }
  collie_result_t rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = (sync ? collie_ssend : collie_send)(fc.comm, v.buf, (size_t)v.len, COLLIE_UINT8, dest, tag,
                                           NULL, NULL);
  Py_END_ALLOW_THREADS;
  fast_leave(&fc);
  PyBuffer_Release(&v);
  return fast_result(rc);
python:
  PyBuffer_Release(&v);
  Py_RETURN_NONE;
}

static PyObject *
fast_status(const collie_status_t *st)
{
  return Py_BuildValue("(iin)", st->source, st->tag, (Py_ssize_t)st->bytes);
}

/* recv(comm, buf, source, tag) -> (source, tag, bytes), a result code, or None. */
static PyObject *
fast_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int source, tag;
  if (nargs != 4 || !fast_int(args[2], &source) || !fast_int(args[3], &tag) || !fast_tag(tag, 1))
    Py_RETURN_NONE;
  Py_buffer v;
  if (!fast_buffer(args[1], &v, 1)) Py_RETURN_NONE;
  struct fast_call fc;
  if (!fast_enter(args[0], &fc)) goto python;
  if (!fast_peer(fc.comm, source, 1)) {
    fast_leave(&fc);
    goto python;
  }
  collie_status_t st;
  collie_result_t rc;
  Py_BEGIN_ALLOW_THREADS;
  rc =
      collie_recv_status(fc.comm, v.buf, (size_t)v.len, COLLIE_UINT8, source, tag, &st, NULL, NULL);
  Py_END_ALLOW_THREADS;
  fast_leave(&fc);
  PyBuffer_Release(&v);
  return rc == COLLIE_SUCCESS ? fast_status(&st) : fast_result(rc);
python:
  PyBuffer_Release(&v);
  Py_RETURN_NONE;
}

/* sendrecv(comm, sendbuf, dest, sendtag, recvbuf, source, recvtag)
 * -> (source, tag, bytes), a result code, or None. The receive is posted
 * first, so a ring of them cannot deadlock. */
static PyObject *
fast_sendrecv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int dest, stag, source, rtag;
  if (nargs != 7 || !fast_int(args[2], &dest) || !fast_int(args[3], &stag) ||
      !fast_int(args[5], &source) || !fast_int(args[6], &rtag) || !fast_tag(stag, 0) ||
      !fast_tag(rtag, 1))
    Py_RETURN_NONE;
  Py_buffer s, r;
  if (!fast_buffer(args[1], &s, 0)) Py_RETURN_NONE;
  if (!fast_buffer(args[4], &r, 1)) {
    PyBuffer_Release(&s);
    Py_RETURN_NONE;
  }
  PyObject *out = Py_None;
  struct fast_call fc;
  if (fast_enter(args[0], &fc)) {
    if (fast_peer(fc.comm, dest, 0) && fast_peer(fc.comm, source, 1)) {
      collie_status_t st;
      collie_work_t *w = NULL;
      collie_result_t rc;
      Py_BEGIN_ALLOW_THREADS;
      rc = collie_recv_status(fc.comm, r.buf, (size_t)r.len, COLLIE_UINT8, source, rtag, &st, NULL,
                              &w);
      if (rc == COLLIE_SUCCESS) {
        rc = collie_send(fc.comm, s.buf, (size_t)s.len, COLLIE_UINT8, dest, stag, NULL, NULL);
        /* A failed send poisons the communicator: the wait then ends at once. */
        collie_result_t rw = collie_wait(w, -1);
        if (rc == COLLIE_SUCCESS) rc = rw;
        collie_work_free(w);
      }
      Py_END_ALLOW_THREADS;
      out = rc == COLLIE_SUCCESS ? fast_status(&st) : fast_result(rc);
    }
    fast_leave(&fc);
  }
  PyBuffer_Release(&r);
  PyBuffer_Release(&s);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* barrier(comm) -> 0, a result code, or None. */
static PyObject *
fast_barrier(PyObject *self, PyObject *arg)
{
  (void)self;
  struct fast_call fc;
  if (!fast_enter(arg, &fc)) Py_RETURN_NONE;
  collie_result_t rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = collie_barrier(fc.comm, NULL, NULL);
  Py_END_ALLOW_THREADS;
  fast_leave(&fc);
  return fast_result(rc);
}

static int
fast_root(collie_comm_t *comm, int root)
{
  return root >= 0 && root < collie_comm_size(comm);
}

/* bcast(comm, buf, root) -> 0, a result code, or None. A non-root's buffer
 * must be writable: one that is not goes the Python way, which says so. */
static PyObject *
fast_bcast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int root;
  if (nargs != 3 || !fast_int(args[2], &root)) Py_RETURN_NONE;
  Py_buffer v;
  if (!fast_buffer(args[1], &v, 0)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  struct fast_call fc;
  if (fast_enter(args[0], &fc)) {
    if (fast_root(fc.comm, root) && (!v.readonly || root == collie_comm_rank(fc.comm))) {
      collie_result_t rc;
      Py_BEGIN_ALLOW_THREADS;
      rc = collie_broadcast(fc.comm, v.buf, (size_t)v.len, COLLIE_UINT8, root, NULL, NULL);
      Py_END_ALLOW_THREADS;
      out = fast_result(rc);
    }
    fast_leave(&fc);
  }
  PyBuffer_Release(&v);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* The typed pair of a reduction: recvbuf r (writable) and sendbuf s (the
 * same view when sendbuf is IN_PLACE: *same set), of one numeric format
 * collie reduces and one size. 0 (nothing held) otherwise. */
static int
fast_reduction_bufs(PyObject *sendobj, PyObject *recvobj, Py_buffer *s, Py_buffer *r, int *same,
                    int *dtype)
{
  if (!fast_buffer(recvobj, r, 1)) return 0;
  *dtype = fast_dtype(r->format, r->itemsize);
  *same = sendobj == fast_in_place;
  if (*dtype < 0) goto refuse;
  if (*same) {
    *s = *r;
    return 1;
  }
  if (!fast_buffer(sendobj, s, 0)) goto refuse;
  if (fast_dtype(s->format, s->itemsize) == *dtype && s->len == r->len) return 1;
  PyBuffer_Release(s);
refuse:
  PyBuffer_Release(r);
  return 0;
}

static int
fast_op(PyObject *o, int *op)
{
  return fast_int(o, op) && *op >= COLLIE_SUM && *op <= COLLIE_MAX;
}

/* allreduce(comm, sendbuf, recvbuf, op) -> 0, a result code, or None. op:
 * collie's op code (SUM, PROD, MIN, MAX: defined on every numeric type). */
static PyObject *
fast_allreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int op, dtype, same;
  if (nargs != 4 || !fast_op(args[3], &op)) Py_RETURN_NONE;
  Py_buffer s, r;
  if (!fast_reduction_bufs(args[1], args[2], &s, &r, &same, &dtype)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  struct fast_call fc;
  if (fast_enter(args[0], &fc)) {
    collie_result_t rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = collie_allreduce(fc.comm, s.buf, r.buf, (size_t)(r.len / r.itemsize),
                          (collie_dtype_t)dtype, (collie_op_t)op, NULL, NULL);
    Py_END_ALLOW_THREADS;
    fast_leave(&fc);
    out = fast_result(rc);
  }
  if (!same) PyBuffer_Release(&s);
  PyBuffer_Release(&r);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* reduce(comm, sendbuf, recvbuf, op, root) -> 0, a result code, or None.
 * recvbuf is read at the root only (elsewhere mpi4py allows None). */
static PyObject *
fast_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int op, root, dtype = -1, same = 0, at_root = 0, held = 0;
  if (nargs != 5 || !fast_op(args[3], &op) || !fast_int(args[4], &root)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  Py_buffer s, r;
  struct fast_call fc;
  if (!fast_enter(args[0], &fc)) Py_RETURN_NONE;
  if (fast_root(fc.comm, root)) {
    at_root = root == collie_comm_rank(fc.comm);
    if (at_root) {
      held = fast_reduction_bufs(args[1], args[2], &s, &r, &same, &dtype);
    } else if (args[1] != fast_in_place && fast_buffer(args[1], &s, 0)) {
      held = 1;
      if ((dtype = fast_dtype(s.format, s.itemsize)) < 0) {
        PyBuffer_Release(&s);
        held = 0;
      }
    }
  }
  if (held) {
    collie_result_t rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = collie_reduce(fc.comm, s.buf, at_root ? r.buf : NULL, (size_t)(s.len / s.itemsize),
                       (collie_dtype_t)dtype, (collie_op_t)op, root, NULL, NULL);
    Py_END_ALLOW_THREADS;
    out = fast_result(rc);
    if (!same) PyBuffer_Release(&s);
    if (at_root) PyBuffer_Release(&r);
  }
  fast_leave(&fc);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* The two buffers of a block collective (sendbuf s, recvbuf r writable),
 * both C-contiguous with formats MPI types; 0 (nothing held) otherwise. */
static int
fast_pair(PyObject *sendobj, PyObject *recvobj, Py_buffer *s, Py_buffer *r)
{
  if (sendobj == fast_in_place || !fast_buffer(sendobj, s, 0)) return 0;
  if (fast_buffer(recvobj, r, 1)) return 1;
  PyBuffer_Release(s);
  return 0;
}

/* Whether a buffer of v's elements splits into n equal blocks (mpi4py's
 * block arguments; the Python code explains any other). */
static int
fast_blocks(const Py_buffer *v, int n)
{
  return v->itemsize > 0 && (v->len / v->itemsize) % n == 0;
}

/* allgather(comm, sendbuf, recvbuf) -> 0, a result code, or None. */
static PyObject *
fast_allgather(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  if (nargs != 3) Py_RETURN_NONE;
  Py_buffer s, r;
  if (!fast_pair(args[1], args[2], &s, &r)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  struct fast_call fc;
  if (fast_enter(args[0], &fc)) {
    int n = collie_comm_size(fc.comm);
    if (fast_blocks(&r, n) && r.len == (Py_ssize_t)n * s.len) {
      collie_result_t rc;
      Py_BEGIN_ALLOW_THREADS;
      rc = collie_allgather(fc.comm, s.buf, r.buf, (size_t)s.len, COLLIE_UINT8, NULL, NULL);
      Py_END_ALLOW_THREADS;
      out = fast_result(rc);
    }
    fast_leave(&fc);
  }
  PyBuffer_Release(&r);
  PyBuffer_Release(&s);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* alltoall(comm, sendbuf, recvbuf) -> 0, a result code, or None. */
static PyObject *
fast_alltoall(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  if (nargs != 3) Py_RETURN_NONE;
  Py_buffer s, r;
  if (!fast_pair(args[1], args[2], &s, &r)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  struct fast_call fc;
  if (fast_enter(args[0], &fc)) {
    int n = collie_comm_size(fc.comm);
    if (fast_blocks(&r, n) && fast_blocks(&s, n) && r.len == s.len) {
      collie_result_t rc;
      Py_BEGIN_ALLOW_THREADS;
      rc = collie_alltoall(fc.comm, s.buf, r.buf, (size_t)(r.len / n), COLLIE_UINT8, NULL, NULL);
      Py_END_ALLOW_THREADS;
      out = fast_result(rc);
    }
    fast_leave(&fc);
  }
  PyBuffer_Release(&r);
  PyBuffer_Release(&s);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

/* reduce_scatter_block(comm, sendbuf, recvbuf, op) -> 0, a result code, or
 * None: recvbuf = op over ranks of block `rank` of sendbuf. */
static PyObject *
fast_reduce_scatter_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  (void)self;
  int op, dtype;
  if (nargs != 4 || !fast_op(args[3], &op)) Py_RETURN_NONE;
  Py_buffer s, r;
  if (!fast_pair(args[1], args[2], &s, &r)) Py_RETURN_NONE;
  PyObject *out = Py_None;
  struct fast_call fc;
  if ((dtype = fast_dtype(r.format, r.itemsize)) >= 0 &&
      fast_dtype(s.format, s.itemsize) == dtype && fast_enter(args[0], &fc)) {
    if (s.len == (Py_ssize_t)collie_comm_size(fc.comm) * r.len) {
      collie_result_t rc;
      Py_BEGIN_ALLOW_THREADS;
      rc = collie_reduce_scatter(fc.comm, s.buf, r.buf, (size_t)(r.len / r.itemsize),
                                 (collie_dtype_t)dtype, (collie_op_t)op, NULL, NULL);
      Py_END_ALLOW_THREADS;
      out = fast_result(rc);
    }
    fast_leave(&fc);
  }
  PyBuffer_Release(&r);
  PyBuffer_Release(&s);
  if (out == Py_None) Py_RETURN_NONE;
  return out;
}

static PyMethodDef fast_methods[] = {
    {"setup", (PyCFunction)fast_setup, METH_O, "setup(IN_PLACE)"},
    {"send", (PyCFunction)(void (*)(void))fast_send, METH_FASTCALL,
     "send(comm, buf, dest, tag, sync) -> 0, a collie result code, or None (the Python path's)"},
    {"recv", (PyCFunction)(void (*)(void))fast_recv, METH_FASTCALL,
     "recv(comm, buf, source, tag) -> (source, tag, bytes), a result code, or None"},
    {"sendrecv", (PyCFunction)(void (*)(void))fast_sendrecv, METH_FASTCALL,
     "sendrecv(comm, sendbuf, dest, sendtag, recvbuf, source, recvtag) -> (source, tag, bytes), "
     "a result code, or None"},
    {"barrier", (PyCFunction)fast_barrier, METH_O, "barrier(comm) -> 0 or a result code"},
    {"bcast", (PyCFunction)(void (*)(void))fast_bcast, METH_FASTCALL,
     "bcast(comm, buf, root) -> 0, a result code, or None"},
    {"allreduce", (PyCFunction)(void (*)(void))fast_allreduce, METH_FASTCALL,
     "allreduce(comm, sendbuf, recvbuf, op) -> 0, a result code, or None"},
    {"reduce", (PyCFunction)(void (*)(void))fast_reduce, METH_FASTCALL,
     "reduce(comm, sendbuf, recvbuf, op, root) -> 0, a result code, or None"},
    {"allgather", (PyCFunction)(void (*)(void))fast_allgather, METH_FASTCALL,
     "allgather(comm, sendbuf, recvbuf) -> 0, a result code, or None"},
    {"alltoall", (PyCFunction)(void (*)(void))fast_alltoall, METH_FASTCALL,
     "alltoall(comm, sendbuf, recvbuf) -> 0, a result code, or None"},
    {"reduce_scatter_block", (PyCFunction)(void (*)(void))fast_reduce_scatter_block, METH_FASTCALL,
     "reduce_scatter_block(comm, sendbuf, recvbuf, op) -> 0, a result code, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT,
    "_collie_mpi_fast",
    "collie.MPI's common calls straight into libcollie (python/collie/MPI/_fast.py)",
    -1,
    fast_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__collie_mpi_fast(void)
{
  if (!s_lock && (!(s_lock = PyUnicode_InternFromString("_lock")) ||
                  !(s_h = PyUnicode_InternFromString("_h")) ||
                  !(s_acquire = PyUnicode_InternFromString("acquire")) ||
                  !(s_release = PyUnicode_InternFromString("release"))))
    return NULL;
  return PyModule_Create(&fast_module);
}
