"""test_report_html.py - `collie-report html` on real jobs, checked in a real
browser (Debian's headless Chromium).

Two jobs run under collierun (tests/python/jobs/report_html_job.py): 3 ranks
of 6 steps with comms.csv and timing logs, the last rank arriving late; and 3
ranks whose rank 1 stops calling, so the others time out and leave
flight-recorder dumps. `collie-report html` makes one page of both; Chromium
loads it (--dump-dom) and the test reads the drawn figures' data-* attributes
back and compares them with what it computes itself from the CSV and JSON
files with Python's csv and json modules. A screenshot of the page is kept in
BUILD/test-artifacts/report_html.png.

Runs once per tests/python/run.sh (in the 1-rank session: it makes its own
jobs). Without `chromium` it is skipped, except under CI (CI set), where the
browser is part of the environment and its absence is a failure.
"""

import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest

from conftest import build_dir

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "jobs", "report_html_job.py")
COLLECTIVES = {"ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "BCAST", "REDUCE", "ALLTOALL", "GATHER",
               "SCATTER", "BARRIER"}  # collie's collective operations (stragglers lines these up)
LABEL = 'grad</script><b>"x"</b>'  # the job's label with markup in it
NRANKS = 3

pytestmark = pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                                reason="runs jobs of its own: once, in the 1-rank session")


def chromium():
    path = shutil.which("chromium")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI must run the browser test "
                    "(scripts/run.sh installs Debian's chromium package)")
    pytest.skip("chromium is not installed (apt-get install chromium): the page is not checked in a browser")


def job_env(**extra):
    """The environment of a job: none of this session's COLLIE_* but the library."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIE_") or k == "COLLIE_LIBRARY"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_job(mode, ranks, env, timeout):
    collierun = os.path.join(build_dir(), "collierun")
    p = subprocess.run([collierun, "-n", str(ranks), "--timeout", str(timeout - 5), sys.executable, JOB, mode],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Dom(HTMLParser):
    """Every element of the page with its attributes and the ids of the
    elements around it (so a mark can be found by the figure it is in)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack = []  # (tag, id)
        self.elems = []  # {"tag", "attrs", "within": set of ids, "text": [..]}
        self.open = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        e = {"tag": tag, "attrs": a, "within": {i for _, i in self.stack if i}, "text": []}
        self.elems.append(e)
        if tag not in self.VOID:
            self.stack.append((tag, a.get("id")))
            self.open.append(e)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                del self.stack[k:]
                del self.open[k:]
                break

    def handle_data(self, data):
        for e in self.open:
            e["text"].append(data)

    def find(self, tag=None, within=None, cls=None, id=None):
        out = []
        for e in self.elems:
            if tag and e["tag"] != tag:
                continue
            if within and within not in e["within"]:
                continue
            if cls and cls not in e["attrs"].get("class", "").split():
                continue
            if id and e["attrs"].get("id") != id:
                continue
            out.append(e)
        return out

    def text(self, e):
        return "".join(e["text"])


def browse(html_path, tmp, screenshot=None):
    """Loads the page in headless Chromium; returns the parsed DOM after its scripts ran."""
    exe = chromium()
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--user-data-dir=" + os.path.join(tmp, "chromium-profile")]
    url = "file://" + os.path.abspath(html_path)
    t0 = time.monotonic()
    p = subprocess.run(base + ["--dump-dom", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    took = time.monotonic() - t0
    assert p.returncode == 0, "chromium --dump-dom failed (%d):\n%s" % (p.returncode, p.stderr[-3000:])
    print("chromium --dump-dom %s: %.1f s" % (os.path.basename(html_path), took))
    if screenshot:
        os.makedirs(os.path.dirname(screenshot), exist_ok=True)
        if os.path.exists(screenshot):
            os.unlink(screenshot)
        q = subprocess.run(base + ["--screenshot=" + screenshot, "--window-size=1400,3000", url],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        assert q.returncode == 0, "chromium --screenshot failed (%d):\n%s" % (q.returncode, q.stderr[-3000:])
    dom = Dom()
    dom.feed(p.stdout)
    body = dom.find("body")
    assert body, "no <body> in the dumped DOM:\n" + p.stdout[:2000]
    errors = dom.find(id="collie-errors")
    assert errors and dom.text(errors[0]).strip() == "", "the page reported errors: " + dom.text(errors[0])
    assert body[0]["attrs"].get("data-rendered") == "1", "the page did not finish drawing"
    return dom


def near(a, b):
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def stragglers(timing_dir, ranks):
    """Per rank: how often it started the k-th collective last, alone, among
    the ranks of its host (as `collie-report stragglers` counts)."""
    seqs, hosts = {}, {}
    for r in ranks:
        rows = [x for x in read_csv(os.path.join(timing_dir, "timing-rank%d.csv" % r)) if x["operation"] in COLLECTIVES]
        # start_counter in whole microseconds, as the tool compares them
        rows = [(round(float(x["start_counter"]) * 1e6), i, x["operation"]) for i, x in enumerate(rows)]
        seqs[r] = sorted(rows)
        meta = dict(line.strip().split("=", 1) for line in open(os.path.join(timing_dir, "timing-rank%d.meta" % r))
                    if "=" in line)
        hosts[r] = meta.get("host", "")
    k = min(len(s) for s in seqs.values())
    for c in range(k):
        assert len({seqs[r][c][2] for r in ranks}) == 1, "the ranks' call sequences diverge at call %d" % c
    last = {r: 0 for r in ranks}
    for h in set(hosts.values()):
        members = [r for r in ranks if hosts[r] == h]
        if len(members) < 2:
            continue
        for c in range(k):
            starts = {r: seqs[r][c][0] for r in members}
            hi = max(starts.values())
            who = [r for r in members if starts[r] == hi]
            if len(who) == 1:
                last[who[0]] += 1
    return k, last


def test_report_html_real_job(tmp_path):
    exe = chromium()  # skip (or fail under CI) before spending time on the jobs
    assert exe
    report = os.path.join(build_dir(), "collie-report")
    logs = tmp_path / "logs"
    hang = tmp_path / "hang"
    t0 = time.monotonic()
    p = run_job("steps", NRANKS, job_env(COLLIE_LOG_DIR=logs, COLLIE_TIMING_LOG=logs, COLLIE_TIMEOUT_MS=20000), 90)
    assert p.returncode == 0, "the steps job failed:\n" + p.stdout[-3000:]
    p = run_job("hang", NRANKS, job_env(COLLIE_LOG_DIR=hang, COLLIE_TIMEOUT_MS=1500), 60)
    assert p.returncode == 0, "the hang job failed:\n" + p.stdout[-3000:]
    print("jobs: %.1f s" % (time.monotonic() - t0))
    dumps = sorted(glob.glob(str(hang / "flight-rank*.json")))
    assert len(dumps) == 2, "expected dumps of ranks 0 and 2, got %s" % dumps
    # One directory with all of it, as a job that ran and then hung would leave.
    for d in dumps:
        shutil.copy(d, logs)

    out = tmp_path / "report.html"
    q = subprocess.run([report, "html", str(logs), "-o", str(out)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    assert q.returncode == 0, q.stdout
    assert "wrote %s: 6 steps from comms.csv, timing logs of 3 ranks, 2 flight dumps" % out in q.stdout, q.stdout
    page = out.read_text()
    print("report.html: %d bytes" % len(page))

    # Self-contained: nothing is fetched from anywhere.
    for bad in ("<script src", "<link", "<img", "@import", "url(", "http://", "https://"):
        assert bad not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
            '"http://www.w3.org/2000/svg"', ""), "the page refers to something outside: %r" % bad
    # The embedded data is JSON that round-trips, the label with markup in it included.
    m = re.search(r'<script type="application/json" id="collie-data">(.*?)</script>', page, re.S)
    assert m, "no embedded data"
    data = json.loads(m.group(1))
    assert "</script" not in m.group(1)
    labels = {rec[3] for rk in data["timing"]["ranks"] for rec in rk["records"]}
    assert LABEL in labels, labels

    artifacts = os.path.join(build_dir(), "test-artifacts")
    shot = os.path.join(artifacts, "report_html.png")
    t0 = time.monotonic()
    dom = browse(out, str(tmp_path), screenshot=shot)
    print("chromium (dom + screenshot): %.1f s" % (time.monotonic() - t0))
    with open(shot, "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1400, 3000) and len(png) > 50000, (width, height, len(png))
    print("screenshot: %s, %d bytes" % (shot, len(png)))

    # --- comms.csv: bytes per category per step, time and bytes per collective per step ---
    rows = read_csv(str(logs / "comms.csv"))
    assert [int(r["step"]) for r in rows] == list(range(1, 7))
    head = list(rows[0].keys())
    colls = [h[2:-3] for h in head if h.startswith("t_") and h.endswith("_ms") and h != "t_total_ms"]
    cats = [h[6:] for h in head if h.startswith("bytes_") and h != "bytes_total" and h[6:] not in colls]
    want = {(int(r["step"]), c): float(r["bytes_" + c]) for r in rows for c in cats if float(r["bytes_" + c])}
    bars = dom.find("rect", within="fig-categories", cls="bar")
    got = {(int(b["attrs"]["data-step"]), b["attrs"]["data-category"]): float(b["attrs"]["data-bytes"]) for b in bars}
    assert len(bars) == len(got) and got == want, "category bars differ from comms.csv:\n%s\n%s" % (got, want)
    assert {"moments_mu", "features_allgather", "other"} <= {c for _, c in got}

    points = dom.find("circle", within="fig-collectives", cls="point")
    drawn = {(int(e["attrs"]["data-step"]), e["attrs"]["data-collective"]): e["attrs"] for e in points}
    shown = {c for _, c in drawn}
    assert shown == {c for c in colls if any(float(r["t_%s_ms" % c]) or float(r["bytes_" + c]) for r in rows)}
    assert {"all_reduce", "broadcast", "all_gather"} <= shown
    for r in rows:
        for c in shown:
            a = drawn[(int(r["step"]), c)]
            assert near(a["data-ms"], r["t_%s_ms" % c]) and near(a["data-bytes"], r["bytes_" + c]), (r["step"], c, a)

    # Per-collective totals (the summary table).
    for tr in dom.find("tr", within="summary-collectives"):
        a = tr["attrs"]
        if "data-collective" not in a:
            continue
        c = a["data-collective"]
        key_b, key_t = ("bytes_total", "t_total_ms") if c == "total" else ("bytes_" + c, "t_%s_ms" % c)
        assert near(a["data-bytes"], sum(float(r[key_b]) for r in rows)), c
        assert abs(float(a["data-ms"]) - sum(float(r[key_t]) for r in rows)) < 1e-6, c

    # --- timing logs: rows per rank, the timeline, the slowest rank ---
    for r in range(NRANKS):
        n = len(read_csv(str(logs / ("timing-rank%d.csv" % r))))
        tr = [e for e in dom.find("tr", within="rank-table") if e["attrs"].get("data-rank") == str(r)]
        assert tr and tr[0]["attrs"]["data-rows"] == str(n), (r, n, tr)
        recs = [e for e in dom.find("rect", within="fig-timeline", cls="rec") if e["attrs"]["data-rank"] == str(r)]
        assert len(recs) == n and n > 0, (r, len(recs), n)
    k, last = stragglers(str(logs), range(NRANKS))
    bars = dom.find("div", within="slowest-ranks", cls="bar")
    assert len(bars) == NRANKS
    for b in bars:
        a = b["attrs"]
        assert int(a["data-last"]) == last[int(a["data-rank"])] and int(a["data-matched"]) == k, (a, last, k)
    slowest = max(last, key=lambda r: last[r])
    assert bars[0]["attrs"]["data-rank"] == str(slowest) == str(NRANKS - 1), (bars[0]["attrs"], last)

    # --- the hang verdict: rank 1 stopped calling ---
    stuck_ranks = set()
    for d in dumps:
        with open(d) as f:
            j = json.load(f)
        stuck_ranks.add(j["rank"])
        assert j["ops"][-1]["state"] == "failed"
    missing = set(range(NRANKS)) - stuck_ranks
    assert missing == {1}
    verdict = dom.find("pre", id="hang-verdict")
    assert verdict and verdict[0]["attrs"]["data-found"] == "1"
    text = dom.text(verdict[0])
    assert "stuck: allreduce #2" in text and "ranks 0,2 failed" in text and "rank 1 left no dump" in text, text
    assert {e["attrs"]["data-rank"] for e in dom.find("tr", within="hang-dumps") if "data-rank" in e["attrs"]} == {"0", "2"}


def test_report_html_absent_parts(tmp_path):
    """Only comms.csv: the page still draws, and says how to get the rest."""
    chromium()
    report = os.path.join(build_dir(), "collie-report")
    d = tmp_path / "only-comms"
    d.mkdir()
    (d / "comms.csv").write_text("step,epoch,bytes_total,t_total_ms,bytes_all_reduce,t_all_reduce_ms,bytes_other\n"
                                 "1,0,100,1.5,100,1.5,100\n2,0,300,2.25,300,2.25,300\n")
    out = tmp_path / "r.html"
    q = subprocess.run([report, "html", str(d), "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    assert q.returncode == 0, q.stdout
    dom = browse(out, str(tmp_path))
    absent = {e["attrs"]["data-absent"]: dom.text(e) for e in dom.find("p", cls="absent") if "data-absent" in e["attrs"]}
    assert set(absent) == {"timing", "hang"}, absent
    assert "COLLIE_TIMING_LOG=DIR" in absent["timing"] and "flight-rank*.json" in absent["hang"], absent
    bars = dom.find("rect", within="fig-categories", cls="bar")
    assert sorted((b["attrs"]["data-step"], b["attrs"]["data-bytes"]) for b in bars) == [("1", "100"), ("2", "300")]
