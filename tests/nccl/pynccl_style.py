"""pynccl_style.py - an NCCL program of the kind vLLM and SGLang write
(their "pynccl"): NCCL's C API through ctypes, the unique id handed over
by the launcher's store, collectives on a stream. Run under collierun with
libcollie-nccl.so (--lib, default build/nccl/libcollie-nccl.so):

  collierun -n 2 python3 tests/nccl/pynccl_style.py              # host memory (CI)
  collierun -n 2 python3 tests/nccl/pynccl_style.py --device cuda  # torch CUDA tensors on GPU 0

Every result is checked against values computed from the ranks' inputs
(small integers: exact). Prints "pynccl_style: N checks passed" or the
failures; exit 1 on a failure.
"""

import argparse
import ctypes
import hashlib
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


ncclSuccess, ncclInvalidArgument, ncclInvalidUsage = 0, 4, 5
ncclFloat32, ncclInt32 = 7, 2
ncclSum, ncclMax = 0, 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "nccl", "libcollie-nccl.so"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--count", type=int, default=4096)
    a = ap.parse_args()
    rank, size = int(os.environ["COLLIE_RANK"]), int(os.environ["COLLIE_WORLD_SIZE"])
    lib = ctypes.CDLL(a.lib)
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    comm_t = ctypes.c_void_p

    def ok(rc, what):
        if rc != ncclSuccess:
            sys.exit("rank %d: %s: %s (%s)" % (rank, what, lib.ncclGetErrorString(rc).decode(),
                                              lib.ncclGetLastError(None).decode()))

    version = ctypes.c_int()
    ok(lib.ncclGetVersion(ctypes.byref(version)), "ncclGetVersion")

    # The id: rank 0 makes it, the others read it from a file the job shares
    # (vLLM broadcasts it through torch's store; any channel works).
    job = hashlib.sha256(os.environ.get("COLLIE_JOB_TOKEN", "job").encode()).hexdigest()[:16]
    idfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), "pynccl_style.%s.id" % job)
    uid = UniqueId()
    if rank == 0:
        ok(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        with open(idfile + ".tmp", "wb") as f:
            f.write(bytes(uid.internal))
        os.replace(idfile + ".tmp", idfile)
    else:
        deadline = time.time() + 60
        while not os.path.exists(idfile):
            if time.time() > deadline:
                sys.exit("rank %d: no id from rank 0 in 60 s" % rank)
            time.sleep(0.01)
        with open(idfile, "rb") as f:
            ctypes.memmove(uid.internal, f.read(128), 128)
    comm = comm_t()
    ok(lib.ncclCommInitRank(ctypes.byref(comm), size, uid, rank), "ncclCommInitRank")
    if rank == 0:
        os.unlink(idfile)

    n = a.count
    fails, checks = [], [0]
    if a.device == "cuda":
        import torch

        torch.cuda.set_device(0)
        stream = torch.cuda.Stream()
        s_ptr = ctypes.c_void_p(stream.cuda_stream)

        def buf(vals, dtype="f"):
            t = torch.tensor(vals, dtype=torch.float32 if dtype == "f" else torch.int32, device="cuda")
            return t, ctypes.c_void_p(t.data_ptr())

        def read(t):
            stream.synchronize()
            return t.cpu().tolist()
    else:
        s_ptr = ctypes.c_void_p(None)

        def buf(vals, dtype="f"):
            arr = (ctypes.c_float if dtype == "f" else ctypes.c_int32) * len(vals)
            t = arr(*vals)
            return t, ctypes.cast(t, ctypes.c_void_p)

        def read(t):
            return list(t)

    def check(what, got, want):
        checks[0] += 1
        if got != want:
            fails.append(what)
            print("rank %d: FAIL %s: got %s..., want %s..." % (rank, what, got[:4], want[:4]), flush=True)

    def val(r, i):
        return float((r * 3 + i % 7) % 5 + 1)

    size_t = ctypes.c_size_t
    # allreduce, in place, sum and max
    x, xp = buf([val(rank, i) for i in range(n)])
    ok(lib.ncclAllReduce(xp, xp, size_t(n), ncclFloat32, ncclSum, comm, s_ptr), "ncclAllReduce")
    check("allreduce sum", read(x), [sum(val(q, i) for q in range(size)) for i in range(n)])
    x, xp = buf([val(rank, i) for i in range(n)])
    y, yp = buf([0.0] * n)
    ok(lib.ncclAllReduce(xp, yp, size_t(n), ncclFloat32, ncclMax, comm, s_ptr), "ncclAllReduce max")
    check("allreduce max", read(y), [max(val(q, i) for q in range(size)) for i in range(n)])
    # broadcast from the last rank
    root = size - 1
    x, xp = buf([val(rank, i) for i in range(n)])
    ok(lib.ncclBroadcast(xp, xp, size_t(n), ncclFloat32, root, comm, s_ptr), "ncclBroadcast")
    check("broadcast", read(x), [val(root, i) for i in range(n)])
    # allgather
    x, xp = buf([val(rank, i) for i in range(n)])
    g, gp = buf([0.0] * (n * size))
    ok(lib.ncclAllGather(xp, gp, size_t(n), ncclFloat32, comm, s_ptr), "ncclAllGather")
    check("allgather", read(g), [val(q, i) for q in range(size) for i in range(n)])
    # reduce_scatter of int32
    x, xp = buf([rank + i for i in range(n * size)], "i")
    y, yp = buf([0] * n, "i")
    ok(lib.ncclReduceScatter(xp, yp, size_t(n), ncclInt32, ncclSum, comm, s_ptr), "ncclReduceScatter")
    check("reduce_scatter", read(y), [sum(q + rank * n + i for q in range(size)) for i in range(n)])
    # a ring of send/recv in a group
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    x, xp = buf([val(rank, i) for i in range(n)])
    y, yp = buf([0.0] * n)
    ok(lib.ncclGroupStart(), "ncclGroupStart")
    ok(lib.ncclSend(xp, size_t(n), ncclFloat32, nxt, comm, s_ptr), "ncclSend")
    ok(lib.ncclRecv(yp, size_t(n), ncclFloat32, prv, comm, s_ptr), "ncclRecv")
    ok(lib.ncclGroupEnd(), "ncclGroupEnd")
    check("send/recv ring", read(y), [val(prv, i) for i in range(n)])
    # what collie lacks says so, naming the call
    rc = lib.ncclCommRevoke(comm, 0)
    checks[0] += 1
    last = lib.ncclGetLastError(None).decode()
    if rc != ncclInvalidUsage or "ncclCommRevoke" not in last:
        fails.append("unsupported call")
        print("rank %d: FAIL ncclCommRevoke: %d, '%s'" % (rank, rc, last), flush=True)
    ok(lib.ncclCommDestroy(comm), "ncclCommDestroy")
    if fails:
        sys.exit(1)
    if rank == 0:
        print("pynccl_style: %d checks passed on %d ranks (%s, NCCL version %d)" %
              (checks[0], size, a.device, version.value), flush=True)


if __name__ == "__main__":
    main()
