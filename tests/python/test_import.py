"""The package itself: `import collie` with the standard library only (no
numpy), the library search and its error, and the ctypes declarations
against include/collie.h (enum values from the header's X-macro lists, struct
layouts from a compiled probe)."""

import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import collie
from collie import _enums, _lib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(ROOT, "python")
HEADER = os.path.join(ROOT, "include", "collie.h")

NO_NUMPY = textwrap.dedent(
    """
    import sys
    sys.modules["numpy"] = None   # any `import numpy` now fails
    sys.modules["torch"] = None
    import collie, collie.objcol, collie.distributed, collie.timing
    from collie import _lib
    assert _lib._lib is None, "import must not load libcollie"
    assert "numpy" not in [m for m, v in sys.modules.items() if v is not None]
    c = collie.new_comm(name="nonumpy", rank=0, world_size=1)
    out = [None]
    collie.objcol.all_gather_object(out, {"ok": [1, 2]}, group=c)
    b = bytearray(b"\\x01\\x02")
    c.all_reduce(b)
    c.finalize()
    assert out == [{"ok": [1, 2]}] and b == b"\\x01\\x02"
    print("no-numpy ok")
    """
)


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIE_") or k in ("COLLIE_LIBRARY", "COLLIE_LOG_DIR")}
    env["PYTHONPATH"] = PYDIR
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_py(python, code, env):
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_import_without_numpy():
    r = run_py(sys.executable, NO_NUMPY, child_env())
    assert r.returncode == 0 and "no-numpy ok" in r.stdout, r.stderr


def test_import_with_a_python_lacking_numpy():
    """The pyenv python3 on PATH has no numpy at all (not just a blocked import)."""
    py = shutil.which("python3")
    if not py or os.path.realpath(py) == os.path.realpath(sys.executable):
        pytest.skip("no second python3 on PATH")
    probe = subprocess.run([py, "-c", "import numpy"], capture_output=True, env=child_env(), timeout=60)
    if probe.returncode == 0:
        pytest.skip("%s has numpy" % py)
    r = run_py(py, NO_NUMPY, child_env())
    assert r.returncode == 0 and "no-numpy ok" in r.stdout, r.stderr


def test_library_path_is_the_one_under_test():
    want = os.environ.get("COLLIE_LIBRARY")
    assert os.path.exists(collie.library_path())
    if want:
        assert collie.library_path() == want


def test_library_not_found(tmp_path):
    code = textwrap.dedent(
        """
        import collie
        try:
            collie.new_comm()
        except collie.LibraryNotFound as e:
            assert isinstance(e, collie.CollieError) and isinstance(e, OSError)
            print("MSG:", e)
        else:
            raise SystemExit("no error")
        """
    )
    r = run_py(sys.executable, code, child_env(COLLIE_LIBRARY="/nonexistent/libcollie.so"))
    assert r.returncode == 0, r.stderr
    assert "COLLIE_LIBRARY=/nonexistent/libcollie.so could not be loaded" in r.stdout
    # Without COLLIE_LIBRARY, from a copy of the package with no build tree next to it.
    if ctypes.util.find_library("collie"):
        pytest.skip("a system libcollie exists")
    pkg = tmp_path / "tree" / "python"
    shutil.copytree(os.path.join(PYDIR, "collie"), pkg / "collie")
    env = child_env(PYTHONPATH=str(pkg))
    env.pop("COLLIE_LIBRARY", None)
    r = run_py(sys.executable, code, env)
    assert r.returncode == 0, r.stderr
    assert "libcollie.so not found; set COLLIE_LIBRARY" in r.stdout
    assert str(tmp_path / "tree" / "build" / "libcollie.so.0") in r.stdout


def _xmacro(name):
    """Entries of #define NAME(XX) in collie.h: list of argument tuples."""
    text = open(HEADER).read()
    m = re.search(r"#define %s\(XX\)(.*?)\n\n" % name, text, re.S)
    assert m, name
    return [tuple(a.strip().strip('"') for a in args.split(",")) for args in re.findall(r"XX\(([^)]*)\)", m.group(1))]


def test_enums_match_header():
    results = _xmacro("COLLIE_RESULT_MAP")
    assert [(i, d) for i, (_, d) in enumerate(results)] == sorted(_lib.RESULT_NAMES.items())
    for i, (name, _) in enumerate(results):
        assert getattr(_lib, name) == i
    dtypes = _xmacro("COLLIE_DTYPE_MAP")
    assert [(s, int(n), bool(int(f))) for _, n, f, s in dtypes] == list(_lib.DTYPES)
    assert [d.name for d in collie.DType] == [n for n, _, _, _ in dtypes]
    ops = _xmacro("COLLIE_OP_MAP")
    for i, (name, _, _) in enumerate(ops):
        assert int(collie.ReduceOp[name if name != "PROD" else "PRODUCT"]) == i
    algos = _xmacro("COLLIE_ALGO_MAP")
    assert tuple(s for _, s in algos) == _enums.ALGORITHMS
    text = open(HEADER).read()
    cats = re.search(r"typedef enum \{\s*COLLIE_CAT_OTHER = 0,(.*?)COLLIE_CAT_BUILTIN_COUNT_", text, re.S).group(1)
    names = ["OTHER"] + re.findall(r"COLLIE_CAT_(\w+)", cats)
    assert [c.name for c in sorted(collie.PayloadCategory, key=int)] == names
    assert "#define COLLIE_SPLIT_NONE (-1)" in text and collie.SPLIT_NONE == -1
    assert "#define COLLIE_CONFIG_MAGIC 0x%Xu" % _lib.CONFIG_MAGIC in text
    ver = [int(re.search(r"#define COLLIE_VERSION_%s (\d+)" % k, text).group(1)) for k in ("MAJOR", "MINOR", "PATCH")]
    assert ver[0] * 10000 + ver[1] * 100 + ver[2] == _lib.VERSION_CODE
    # One version: CMakeLists.txt's project() (the wheel's), the header's, the package's.
    cmake = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    project = re.search(r"^project\(collie VERSION ([0-9.]+)", cmake, re.M).group(1)
    assert collie.__version__ == _lib.VERSION == project == "%d.%d.%d" % tuple(ver)


PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include <collie.h>
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f));
int main(void) {
  printf("collie_config_t %zu\n", sizeof(collie_config_t));
  F(collie_config_t, magic) F(collie_config_t, rank) F(collie_config_t, store)
  F(collie_config_t, job_token) F(collie_config_t, timeout_ms) F(collie_config_t, transport)
  printf("collie_opts_t %zu\n", sizeof(collie_opts_t));
  F(collie_opts_t, category) F(collie_opts_t, label) F(collie_opts_t, phase) F(collie_opts_t, algorithm)
  printf("collie_timing_t %zu\n", sizeof(collie_timing_t));
  F(collie_timing_t, layer_name) F(collie_timing_t, message_size_bytes) F(collie_timing_t, start_counter)
  F(collie_timing_t, end_counter)
  return 0;
}
"""


def test_struct_layouts_match_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "probe.c"
    src.write_text(PROBE)
    exe = tmp_path / "probe"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)], check=True,
                   timeout=60)
    out = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                              check=True).stdout.splitlines())
    types = {"collie_config_t": _lib.Config, "collie_opts_t": _lib.Opts, "collie_timing_t": _lib.TimingRec}
    for key, val in out.items():
        if "." in key:
            t, f = key.split(".")
            assert getattr(types[t], f).offset == int(val), key
        else:
            assert ctypes.sizeof(types[key]) == int(val), key


# C parameter/return type (without the name) -> the ctypes type it must be declared as.
_C_TYPES = {
    "void": None,
    "int": ctypes.c_int,
    "collie_result_t": ctypes.c_int,
    "collie_dtype_t": ctypes.c_int,
    "collie_op_t": ctypes.c_int,
    "collie_sparse_mode_t": ctypes.c_int,
    "size_t": ctypes.c_size_t,
    "int64_t": ctypes.c_int64,
    "const char *": ctypes.c_char_p,
    "const void *": ctypes.c_void_p,
    "const int64_t *": ctypes.c_void_p,  # an array passed by address (numpy's .ctypes.data)
    "void *": ctypes.c_void_p,
    "collie_comm_t *": ctypes.c_void_p,
    "const collie_comm_t *": ctypes.c_void_p,
    "collie_work_t *": ctypes.c_void_p,
    "collie_comm_t **": ctypes.POINTER(ctypes.c_void_p),
    "collie_work_t **": ctypes.POINTER(ctypes.c_void_p),
    "collie_plan_t *": ctypes.c_void_p,
    "collie_window_t *": ctypes.c_void_p,
    "collie_window_t **": ctypes.POINTER(ctypes.c_void_p),
    "collie_plan_t **": ctypes.POINTER(ctypes.c_void_p),
    "collie_timing_log_t *": ctypes.c_void_p,
    "collie_timing_log_t **": ctypes.POINTER(ctypes.c_void_p),
    "const size_t *": ctypes.POINTER(ctypes.c_size_t),
    "size_t *": ctypes.POINTER(ctypes.c_size_t),
    "int *": ctypes.POINTER(ctypes.c_int),
    "collie_status_t *": ctypes.c_void_p,
    "const int *": ctypes.POINTER(ctypes.c_int),
    "const collie_opts_t *": ctypes.POINTER(_lib.Opts),
    "const collie_config_t *": ctypes.POINTER(_lib.Config),
    "const collie_timing_t *": ctypes.POINTER(_lib.TimingRec),
    "uint64_t": ctypes.c_uint64,
    "int64_t *": ctypes.POINTER(ctypes.c_int64),
    "collie_collective_t": ctypes.c_int,
    "collie_comms_log_t *": ctypes.c_void_p,
    "collie_comms_log_t **": ctypes.POINTER(ctypes.c_void_p),
    "collie_comms_charge_t *": ctypes.c_void_p,
    "collie_comms_charge_t **": ctypes.POINTER(ctypes.c_void_p),
}


def _c_type(decl):
    """The type part of 'const void *sendbuf' -> 'const void *'."""
    decl = " ".join(decl.split())
    m = re.match(r"^(.*?)(\w+)$", decl)
    t = m.group(1).strip() if m and m.group(1).strip() else decl
    return t.replace(" *", " *").replace("**", "**")


def test_signatures_match_the_header():
    """Every function collie.h declares is declared for ctypes with the same
    return and parameter types (ctypes would corrupt calls silently)."""
    text = open(HEADER).read()
    protos = re.findall(r"COLLIE_API\s+([^;(]*?)\b(collie_\w+)\s*\(([^)]*)\);", text)
    assert len(protos) > 30
    names = {n for _, n, _ in protos}
    assert names == set(_lib._SIGNATURES), names ^ set(_lib._SIGNATURES)
    for ret, name, params in protos:
        restype, argtypes = _lib._SIGNATURES[name]
        assert _C_TYPES[" ".join(ret.split())] == restype, (name, ret)
        params = [] if params.strip() == "void" else [p for p in params.split(",")]
        assert len(params) == len(argtypes), name
        for p, a in zip(params, argtypes):
            assert _C_TYPES[_c_type(p)] == a, (name, p)
        assert getattr(_lib.lib(), name, None) is not None, name
