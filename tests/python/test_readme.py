"""The README's first jobs (examples/first/) are shown there exactly as the
files hold them, and each runs as the README says, at 2 ranks under
collierun, with the sum it promises: C (built against this build's
library), Python, and torch.distributed (where torch imports)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import collie
from conftest import ROOT, build_dir

FIRST = os.path.join(ROOT, "examples", "first")

pytestmark = pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                                reason="launches its own 2-rank jobs (1-rank session only)")


def readme_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return [m.group(1) for m in re.finditer(r"```[a-z]*\n(.*?)```", f.read(), re.S)]


@pytest.mark.parametrize("name", ["first.c", "first.py", "first_torch.py"])
def test_readme_shows_the_file(name):
    with open(os.path.join(FIRST, name), encoding="utf-8") as f:
        text = f.read()
    assert text in readme_blocks(), "README.md does not show examples/first/%s as it is" % name


def run_2(argv, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLLIE_RANK", "COLLIE_WORLD_SIZE", "COLLIE_LOCAL_RANK", "COLLIE_LOCAL_SIZE",
                        "COLLIE_STORE", "COLLIE_JOB_TOKEN")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # The collie this suite imports (as `pip install .` or PYTHONPATH=python would give it).
    here = os.path.dirname(os.path.dirname(os.path.abspath(collie.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    cmd = [os.path.join(build_dir(), "collierun"), "-n", "2", "--timeout", "60"] + argv
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90, cwd=str(tmp_path))
    assert r.returncode == 0, "%s exited %d\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr)
    assert set(os.listdir(str(tmp_path))) <= {"first"}, os.listdir(str(tmp_path))  # no file left behind
    return r.stdout


def test_first_c(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    exe = os.path.join(str(tmp_path), "first")
    subprocess.run([cc, "-I", os.path.join(ROOT, "include"), os.path.join(FIRST, "first.c"), "-L", build_dir(),
                    "-lcollie", "-Wl,-rpath," + build_dir(), "-o", exe], check=True)
    out = run_2([exe], tmp_path)
    assert sorted(out.splitlines()) == ["rank 0: 1 1 1 1", "rank 1: 1 1 1 1"], out


def test_first_py(tmp_path):
    out = run_2([sys.executable, os.path.join(FIRST, "first.py")], tmp_path)
    for r in (0, 1):
        assert "rank %d of 2: [1. 1. 1. 1.]" % r in out, out


def test_first_torch(tmp_path):
    pytest.importorskip("torch")
    out = run_2([sys.executable, os.path.join(FIRST, "first_torch.py")], tmp_path)
    for r in (0, 1):
        assert "rank %d: tensor([1., 1., 1., 1.])" % r in out, out
