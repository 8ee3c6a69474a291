"""check_timing.py LOG_DIR NRANKS OUTPUT - checks the timing logs trainer.py
wrote: every rank's LOG_DIR/timing-rank{r}.csv has, in order, one ALLREDUCE
row per iteration and layer (the layers, their order and bytes are the
"layer" lines of the trainer's OUTPUT, the iterations its "iteration"
lines), with
the iteration, epoch 0, phase dense and the gradient's bytes; elapsed_ms is
end - start; the .meta sidecar names the rank and dropped nothing. Rows of
other layers (collie's own operations, when the communicator is collie's)
are not counted. Exits non-zero naming what is wrong."""
import csv
import os
import sys

HEADER = ["timestamp", "iteration", "epoch", "layer_name", "operation", "phase", "message_size_bytes",
          "elapsed_ms", "start_counter", "end_counter"]

log_dir, nranks, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
layers, iterations = [], []
with open(output) as f:
    for line in f:
        w = line.split()
        if w[1:2] == ["layer"]:
            layers.append((int(w[2]), w[3], w[4]))
        elif w[1:2] == ["iteration"]:
            iterations.append(w[2])
if not layers or not iterations:
    sys.exit("check_timing: %s has no layer or iteration lines" % output)
layers.sort()
want = [(it, "0", name, "ALLREDUCE", "dense", nbytes) for it in iterations for _, name, nbytes in layers]
names = {name for _, name, _ in layers}
bad = []
for r in range(nranks):
    path = os.path.join(log_dir, "timing-rank%d.csv" % r)
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        bad.append("%s: %s" % (path, e))
        continue
    if not rows or rows[0] != HEADER:
        bad.append("%s: header %r" % (path, rows[:1]))
        continue
    mine = [dict(zip(HEADER, row)) for row in rows[1:]]
    mine = [row for row in mine if row["layer_name"] in names]
    got = [(x["iteration"], x["epoch"], x["layer_name"], x["operation"], x["phase"], x["message_size_bytes"])
           for x in mine]
    if got != want:
        i = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        bad.append("%s: %d rows of the trainer's layers, %d expected; row %d is %r, expected %r"
                   % (path, len(got), len(want), i, got[i] if i < len(got) else None,
                      want[i] if i < len(want) else None))
    for x in mine:
        start, end, ms = float(x["start_counter"]), float(x["end_counter"]), float(x["elapsed_ms"])
        if not (0 <= end - start < 60 and abs((end - start) * 1000 - ms) < 0.01):
            bad.append("%s: times of %r" % (path, x))
    meta = {}
    try:
        with open(os.path.join(log_dir, "timing-rank%d.meta" % r)) as f:
            meta = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError as e:
        bad.append("meta of rank %d: %s" % (r, e))
    if meta.get("rank") != str(r) or meta.get("records_dropped") != "0":
        bad.append("timing-rank%d.meta: %r" % (r, meta))
extra = sorted(set(os.listdir(log_dir)) - {"timing-rank%d%s" % (r, s) for r in range(nranks)
                                             for s in (".csv", ".meta", ".categories.csv")})
if extra:
    bad.append("%s: unexpected files %s" % (log_dir, extra))
if bad:
    sys.exit("check_timing: " + "\ncheck_timing: ".join(bad))
