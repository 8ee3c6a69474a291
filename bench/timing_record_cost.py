"""bench/timing_record_cost.py - what one collie.timing record costs the
Python caller (issue 17 asks for about 1 us or less): record_timing with
iteration and epoch given, without them (the open step supplies them), and
record_mpi_operation around an empty block. Best of REPEATS runs of N
records into a queue large enough never to drop; microseconds per record.
Never run by CI: the numbers depend on the machine.

    /usr/bin/python3 bench/timing_record_cost.py [N] [REPEATS]
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from collie.timing import init_timing_logger, shutdown_timing_logger  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def best(fn):
    out = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) / N * 1e6)
    return min(out)


def main():
    lg = init_timing_logger(0, tempfile.mkdtemp(prefix="collie-timing-cost-"), queue=N * (3 * REPEATS + 1))

    def given():
        for _ in range(N):
            lg.record_timing("ALLREDUCE", 1.5, "layer1", 4096, "dense", 100, 0)

    def implicit():
        for _ in range(N):
            lg.record_timing("ALLREDUCE", 1.5, "layer1", 4096, "dense")

    def block():
        for _ in range(N):
            with lg.record_mpi_operation("ALLREDUCE", 4096, "layer1", "dense", 100, 0):
                pass

    def empty():
        for _ in range(N):
            pass

    loop = best(empty)
    for name, fn in (("record_timing, iteration and epoch given", given),
                     ("record_timing, numbers from the step", implicit),
                     ("with record_mpi_operation(...): pass", block)):
        print("%-44s %6.3f us" % (name, best(fn) - loop))
    shutdown_timing_logger()


if __name__ == "__main__":
    main()
