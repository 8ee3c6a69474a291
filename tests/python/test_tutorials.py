"""The tutorials (docs/tutorial-*.md) run as they are written, and print what
they say they print.

A page marks its code blocks by the fence's info string:

  ```c file=hello.c        the file hello.c, written as shown (any language)
  ```diff file=train.py    an edit of that file, made in page order: lines
                           starting with ' ' (and empty ones) are kept, '-'
                           removed, '+' added (one hunk, no @@ line; its old
                           lines must occur exactly once in the file)
  ```sh run                commands, run by `sh -e` in the tutorial's directory
  ```sh run needs=mpirun   the same, run only where Open MPI's mpirun and
                           mpi4py exist (test_tutorial_mpi4py_openmpi)
  ```text output           what the run block above it prints on stdout

Blocks with any other info string (```sh, ```python) are not run: building
collie and `pip install .` (this suite runs against an existing build;
scripts/check_install.sh and scripts/check_wheel.sh check installing).

An output block is compared line by line, after runs of blank space are
squeezed to one: `...` inside a line stands for any text (times, which
change from run to run), and a line that is only `...` for any number of
lines. The ranks' lines come in any order, so the order is not compared;
without a `...` line the counts must be equal too.

Where the commands run: a fresh tmp_path/work that looks like the
repository's root to them: `include` and `python` are links to this tree's,
`build` to the build under test (COLLIE_TEST_BUILD_DIR, as tests/python/run.sh
sets it), so `cc -I include`, `PYTHONPATH=python` and `build/collierun` work as
written, and every file a tutorial makes lands there. `python3` is this
suite's interpreter (a wrapper first on PATH; under run.sh, $PYTHON). The
environment is the suite's without the variables of the job it runs in
(COLLIE_* but COLLIE_LIBRARY and COLLIE_TIMEOUT_MS, torchrun's, Open MPI's)
and without PYTHONUNBUFFERED (run.sh's: unbuffered, a print's text and its
newline are two writes, which two ranks' prints interleave), as a newcomer's
shell has none of them; Open MPI's own variables let mpirun start as root
and run more ranks than cores (the page names the options). Each command sequence has a timeout, after
which its whole process group is killed.

Run: sh tests/python/run.sh build -k tutorials (the tests run in the 1-rank
session; each starts its own 2-rank jobs).
"""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

import collie
from conftest import ROOT, build_dir

DOCS = os.path.join(ROOT, "docs")
PAGES = ["tutorial-c.md", "tutorial-python.md", "tutorial-torch.md", "tutorial-mpi4py.md"]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
TIMEOUT = 240  # seconds for one command sequence (a torch job takes 5 s; CI may load the 2 cores)

jobs = pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                          reason="launches its own 2-rank jobs (1-rank session only)")


def blocks(page):
    """The page's code blocks as (info dict, text): info has 'lang', and
    'file', 'run', 'needs', 'output' where the fence names them."""
    with open(os.path.join(DOCS, page), encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in FENCE.finditer(text):
        words = m.group(1).split()
        info = {"lang": words[0] if words else ""}
        for w in words[1:]:
            k, _, v = w.partition("=")
            info[k] = v or True
        out.append((info, m.group(2)))
    return out


def squeeze(line):
    return " ".join(line.split())


def compare(expected, actual, what):
    """expected: an output block's text; actual: what the commands printed."""
    want = [squeeze(x) for x in expected.splitlines() if x.strip()]
    got = [squeeze(x) for x in actual.splitlines() if x.strip()]
    more = "..." in want
    want = [w for w in want if w != "..."]
    left = list(got)
    # Exact lines first, so that a pattern cannot take the line an exact one needs.
    for w in sorted(want, key=lambda w: "..." in w):
        rx = re.compile(".*".join(re.escape(p) for p in w.split("...")) + r"\Z")
        hit = next((g for g in left if rx.match(g)), None)
        assert hit is not None, "%s: no line of the output is %r\n--- output:\n%s" % (what, w, actual)
        left.remove(hit)
    assert more or not left, "%s: lines the page does not show: %r\n--- output:\n%s" % (what, left, actual)


def apply_diff(path, diff, what):
    old, new = [], []
    for line in diff.splitlines():
        tag, body = line[:1] or " ", line[1:]
        assert tag in (" ", "-", "+"), "%s: diff line %r starts with neither ' ', '-' nor '+'" % (what, line)
        if tag != "+":
            old.append(body)
        if tag != "-":
            new.append(body)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    old_text, new_text = "\n".join(old) + "\n", "\n".join(new) + "\n"
    assert text.count(old_text) == 1, "%s: the diff's old lines are not once in %s" % (what, os.path.basename(path))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old_text, new_text))


def tutorial_env(tmp_path):
    """The directory the commands run in, and their environment."""
    work = tmp_path / "work"
    work.mkdir()
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(collie.__file__)))
    for name, target in (("include", os.path.join(ROOT, "include")), ("python", package_dir),
                         ("build", os.path.abspath(build_dir()))):
        os.symlink(target, str(work / name))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "python3"
    wrapper.write_text('#!/bin/sh\nexec "%s" "$@"\n' % sys.executable)
    wrapper.chmod(0o755)
    job = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("COLLIE_", "OMPI_", "PMI_", "PMIX_")) or k in job
                   or k in ("PYTHONPATH", "PYTHONUNBUFFERED"))}
    for k in ("COLLIE_LIBRARY", "COLLIE_TIMEOUT_MS"):
        if k in os.environ:
            env[k] = os.environ[k]
    env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"  # 2 ranks on a machine of fewer cores
    env["OMPI_MCA_plm_rsh_agent"] = ""  # one host: no ssh
    return work, env


def run_sh(commands, work, env, what):
    p = subprocess.Popen(["sh", "-ec", commands], cwd=str(work), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # collierun, mpirun and the ranks too
        out, err = p.communicate()
        pytest.fail("%s: still running after %d s:\n%s\n--- stdout:\n%s\n--- stderr:\n%s"
                    % (what, TIMEOUT, commands, out, err))
    assert p.returncode == 0, "%s: exit %d:\n%s\n--- stdout:\n%s\n--- stderr:\n%s" % (
        what, p.returncode, commands, out, err)
    return out


def run_page(page, tmp_path, wanted=lambda needs: needs is None):
    """Writes the page's files, applies its diffs and runs the run blocks
    whose `needs` wanted() accepts, checking each output block against the
    run before it. Returns the number of run blocks run."""
    work, env = tutorial_env(tmp_path)
    ran, last = 0, None  # last: the previous run block's stdout, or None when it was not run
    for i, (info, text) in enumerate(blocks(page)):
        what = "%s, block %d (```%s)" % (page, i + 1, " ".join("%s=%s" % kv for kv in info.items()))
        if "file" in info and info["lang"] == "diff":
            apply_diff(str(work / info["file"]), text, what)
        elif "file" in info:
            (work / info["file"]).write_text(text, encoding="utf-8")
        elif "run" in info:
            if wanted(info.get("needs")):
                last = run_sh(text, work, env, what)
                ran += 1
            else:
                last = None
        elif "output" in info and last is not None:
            compare(text, last, what)
    return ran


@pytest.mark.parametrize("page", PAGES)
def test_tutorial_page_shape(page):
    """Each page opens with whom it is for, stays short, and every output
    block follows a run block, which it checks."""
    with open(os.path.join(DOCS, page), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith("> For "), lines[:3]
    assert len(lines) <= 130, "%s has %d lines: a tutorial is read in ten minutes" % (page, len(lines))
    kinds = []
    for info, _ in blocks(page):
        assert set(info) <= {"lang", "file", "run", "needs", "output"}, "%s: unknown fence word in %r" % (page, info)
        kinds.append("file" if "file" in info else "run" if "run" in info else "output" if "output" in info else "")
        if kinds[-1] == "output":
            assert len(kinds) > 1 and kinds[-2] == "run", "%s: an output block that follows no run block" % page
    assert "file" in kinds and "run" in kinds and "output" in kinds, kinds


@jobs
def test_tutorial_c(tmp_path):
    if not (shutil.which("cc")):
        pytest.skip("no C compiler (cc)")
    assert run_page("tutorial-c.md", tmp_path) >= 2


@jobs
def test_tutorial_python(tmp_path):
    pytest.importorskip("numpy")
    assert run_page("tutorial-python.md", tmp_path) >= 1


@jobs
def test_tutorial_torch(tmp_path):
    pytest.importorskip("torch", reason="the torch tutorial needs torch (apt-get install python3-torch)")
    assert run_page("tutorial-torch.md", tmp_path) >= 2


@jobs
def test_tutorial_mpi4py_collie(tmp_path):
    """The page's collie half, always (collie.MPI needs no mpi4py)."""
    assert run_page("tutorial-mpi4py.md", tmp_path) >= 1


@jobs
def test_tutorial_mpi4py_openmpi(tmp_path):
    """The page's Open MPI half: the same program on mpi4py under mpirun."""
    if not shutil.which("mpirun"):
        pytest.skip("needs Open MPI's mpirun (apt-get install openmpi-bin)")
    pytest.importorskip("mpi4py", reason="needs mpi4py (apt-get install python3-mpi4py)")
    assert run_page("tutorial-mpi4py.md", tmp_path, wanted=lambda needs: needs == "mpirun") >= 1
