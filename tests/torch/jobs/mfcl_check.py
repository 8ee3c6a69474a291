"""mfcl_check.py - checks what jobs/mfcl_snippet.py wrote against what its
calls did: comms.csv (the doc's header once, one row per step, every bytes
column exact, times positive, self-consistent, within the step's wall time,
an async call's time reaching its wait) and every rank's timing log (the
labelled all_reduce of each step with the step's numbers, every row's times
consistent). Used by tests/torch/test_wrappers.py and, on a GPU, by
scripts/gpu_check.sh:

    python3 tests/torch/jobs/mfcl_check.py OUTDIR BACKEND NRANKS JOB_SECONDS
"""

import csv
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
from telemetry_columns import HEADER, TIMING_HEADER  # noqa: E402

COLLS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "gather", "scatter",
         "send_recv")
UNUSED = ("bytes_moments_sigma_full", "bytes_moments_sigma_diag", "bytes_mixture_muK", "bytes_mixture_sigmaK",
          "bytes_third_moment_sketch", "bytes_reduce", "bytes_all_to_all", "bytes_gather", "bytes_scatter",
          "bytes_send_recv")


def ms_columns(r):
    return {k: float(v) for k, v in r.items() if k.startswith("t_") and k.endswith("_ms")}


def check_self_consistent(r):
    """t_total_ms is the sum of the t columns, bytes_total of the bytes
    columns, the bandwidth their quotient (docs/telemetry.md)."""
    ts = ms_columns(r)
    assert abs(ts.pop("t_total_ms") - sum(ts.values())) < 1e-6, r
    assert int(r["bytes_total"]) == sum(int(r["bytes_" + c]) for c in COLLS), r
    tt = float(r["t_total_ms"])
    bw = (int(r["bytes_total"]) / 1048576.0) / (tt / 1000.0) if tt > 0 else 0.0
    assert abs(float(r["eff_bandwidth_MiBps"]) - bw) <= 0.0005 + 1e-9 * bw, r


def check(outdir, backend, nranks, secs):
    """Raises AssertionError naming the first figure that is wrong; returns
    a one-line summary."""
    with open(os.path.join(outdir, "expect.json")) as f:
        expect = json.load(f)
    with open(os.path.join(outdir, "comms.csv")) as f:
        lines = f.read().splitlines()
    assert lines[0] == HEADER, lines[0]  # the header once, no column beyond the doc's
    rows = list(csv.DictReader(lines))
    assert len(rows) == len(expect["rows"]), rows  # one per step, none for the call outside a step
    timed = ("all_reduce", "all_gather", "broadcast") + (("reduce_scatter",) if expect["has_rs"] else ())
    for c in timed:
        # Every call's time is counted: the column is never negative, and over
        # the steps it adds up to more than nothing. Not per step: comms.csv
        # keeps microseconds, and a step's one all_gather of 1000 bytes between
        # two ranks on shared memory can end in under half of one (0.000).
        assert all(ms_columns(r)["t_%s_ms" % c] >= 0 for r in rows), (c, rows)
        assert sum(ms_columns(r)["t_%s_ms" % c] for r in rows) > 0, (c, rows)
    for r, e in zip(rows, expect["rows"]):
        for k, v in e.items():
            if k != "wall_ms":
                assert int(r[k]) == v, (k, r, e)
        for k in UNUSED:
            assert int(r[k]) == 0, (k, r)
        check_self_consistent(r)
        ts = ms_columns(r)
        assert ts["t_total_ms"] <= e["wall_ms"] + 0.01, ("the calls took longer than their step", r, e)
        if backend != "collie":
            # The async all_reduce's time runs to its wait, after the sleep
            # (on the collie backend, to its completion, which collie sees).
            assert ts["t_all_reduce_ms"] >= expect["sleep_ms"], r
    assert sum(float(r["t_total_ms"]) for r in rows) < secs * 1e3
    for rank in range(nranks):
        with open(os.path.join(outdir, "timing", "timing-rank%d.csv" % rank)) as f:
            tl = f.read().splitlines()
        assert tl[0] == TIMING_HEADER, tl[0]
        trows = list(csv.DictReader(tl))
        grads = [t for t in trows if t["layer_name"] == "layer1"]
        assert [(t["operation"], int(t["iteration"]), int(t["epoch"]), int(t["message_size_bytes"]), t["phase"])
                for t in grads] == [("ALLREDUCE", e["step"], e["epoch"], 4000, "dense") for e in expect["rows"]], grads
        for t in trows:
            start, end = float(t["start_counter"]), float(t["end_counter"])
            assert end >= start and abs((end - start) * 1e3 - float(t["elapsed_ms"])) < 0.002, t
        assert any(t["operation"] == "BCAST" and int(t["message_size_bytes"]) == 256 for t in trows), trows
    return "%s on %s: %d steps, comms.csv and %d timing logs right (t_all_reduce_ms of step 1: %s)" % (
        backend, expect.get("device", "cpu"), len(rows), nranks, rows[0]["t_all_reduce_ms"])


if __name__ == "__main__":
    print(check(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
