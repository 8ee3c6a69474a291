"""telemetry_columns.py - the column lists of comms.csv and timing-rank{i}.csv
as docs/telemetry.md specifies them (written out from the doc, not taken
from the library): the telemetry tests of the binding and of the torch
backend check the files against them."""

HEADER = (
    "step,epoch,world_size,bytes_all_reduce,bytes_all_gather,bytes_reduce_scatter,bytes_broadcast,"
    "bytes_total,t_all_reduce_ms,t_all_gather_ms,t_reduce_scatter_ms,t_broadcast_ms,t_total_ms,"
    "eff_bandwidth_MiBps,bytes_features_allgather,bytes_moments_mu,bytes_moments_sigma_full,"
    "bytes_moments_sigma_diag,bytes_mixture_muK,bytes_mixture_sigmaK,bytes_third_moment_sketch,"
    "bytes_topr_indices,bytes_other,bytes_reduce,bytes_all_to_all,bytes_gather,bytes_scatter,"
    "bytes_send_recv,t_reduce_ms,t_all_to_all_ms,t_gather_ms,t_scatter_ms,t_send_recv_ms"
)
TIMING_HEADER = (
    "timestamp,iteration,epoch,layer_name,operation,phase,message_size_bytes,elapsed_ms,start_counter,end_counter"
)


def read_csv(path):
    """(the header line, the rows as dicts) of a CSV file."""
    import csv

    with open(path, newline="") as f:
        lines = f.read().splitlines()
    return (lines[0] if lines else ""), list(csv.DictReader(lines))


def comms_rows(steps, timeout=5.0, log_dir=None):
    """Rank 0: comms.csv's header and its rows of these steps (in log_dir,
    default COLLIE_LOG_DIR), waiting up to timeout s for all of them (a row
    is written once its step's operations have all completed)."""
    import os
    import time

    path = os.path.join(log_dir or os.environ["COLLIE_LOG_DIR"], "comms.csv")
    deadline = time.monotonic() + timeout
    while True:
        header, rows = read_csv(path) if os.path.exists(path) else ("", [])
        mine = [r for r in rows if int(r["step"]) in steps]
        if {int(r["step"]) for r in mine} >= set(steps) or time.monotonic() > deadline:
            return header, mine
        time.sleep(0.05)
