"""bench/wrapper_cost.py - what collie.distributed's wrappers add to a
torch.distributed call (docs/telemetry.md, "Cost" of the wrappers).

One process, a world of 1 on gloo (through a FileStore). Two tables:

- "stub": torch.distributed.all_reduce replaced by a Python function that
  returns at once, so each row is the wrappers' own price, apart from
  gloo's ~30 us and its noise;
- "gloo": the real call, 8 bytes, for scale.

Rows: the call itself; the wrapper with comms.csv off
(runtime.comms_log.enabled false); on, outside a step; on, inside steps of
64 calls (the charge and the time reach comms.csv; the steps' ends, which
write the rows and read CUDA events, are shared out over their calls);
async_op=True with wait(). Best
of REPEATS runs of N calls, microseconds per call. Never run by CI: the
numbers depend on the machine.

    /usr/bin/python3 bench/wrapper_cost.py [N] [REPEATS] [BACKEND] [DEVICE]

BACKEND (default gloo) and DEVICE (cpu or cuda) choose the real call's
group and tensor: `wrapper_cost.py 20000 5 nccl cuda` on a GPU measures the
CUDA path (two events per call, read at step boundaries).
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import collie.distributed as cd  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
BACKEND = sys.argv[3] if len(sys.argv) > 3 else "gloo"
DEVICE = sys.argv[4] if len(sys.argv) > 4 else "cpu"


def best(fn):
    out = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        out.append((time.perf_counter() - t0) / N * 1e6)
    return min(out)


class _StubWork:
    def wait(self, timeout=None):
        return True


def _stub(tensor, op=None, group=None, async_op=False):
    return _StubWork() if async_op else None


STEP_CALLS = 64


def best_in_steps(call):
    """call, inside steps of STEP_CALLS calls each (a step's end writes its
    comms.csv row and, on CUDA, reads the step's events): a training step's
    shape, so the per-call figure includes the step's share."""
    n = [0]

    def run():
        if n[0] % STEP_CALLS == 0:
            if n[0]:
                cd.step_end()
            cd.step_begin(len(STEPS) + 1)
            STEPS.append(n[0])
        n[0] += 1
        call()

    us = best(run)
    cd.step_end()
    return us


def table(title, call, device="cpu"):
    t = torch.ones(2, device=device)
    rows = [("the call itself", best(lambda: call(t))),
            ("async_op + wait", best(lambda: call(t, async_op=True).wait()))]
    cd.configure({"runtime": {"comms_log": {"enabled": False}}})
    rows.append(("wrapper, comms.csv off", best(lambda: cd.all_reduce(t))))
    cd.configure({"runtime": {"comms_log": {"enabled": True, "dir": TMP}}})
    rows.append(("wrapper, on, outside a step", best(lambda: cd.all_reduce(t))))
    rows.append(("wrapper, on, inside a step", best_in_steps(lambda: cd.all_reduce(t))))
    rows.append(("wrapper async_op + wait, in a step", best_in_steps(lambda: cd.all_reduce(t, async_op=True).wait())))
    base, abase = rows[0][1], rows[1][1]
    print("%s\n%-36s %10s %10s" % (title, "configuration", "us/call", "added"))
    for name, us in rows:
        ref = abase if "async" in name else base
        print("%-36s %10.2f %10s" % (name, us, "-" if not name.startswith("wrapper") else "%+.2f" % (us - ref)))
    print()


STEPS = []
TMP = tempfile.mkdtemp(prefix="collie-wrapper-cost-")


def main():
    dist.init_process_group(BACKEND, init_method="file://" + os.path.join(TMP, "store"), rank=0, world_size=1)
    real = dist.all_reduce
    dist.all_reduce = _stub
    try:
        table("stub (the wrappers' own cost)", _stub)
    finally:
        dist.all_reduce = real
    table("%s, 8 bytes on %s" % (BACKEND, DEVICE), real, DEVICE)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
