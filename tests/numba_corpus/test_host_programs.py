"""The Numba host programs of `host_programs.py` (streams, events, signatures, device arrays)
run through `from pyptx import cuda` on the CPU executor and on the fake GPU driver, and, when a
Python with numba-cuda is at hand, unchanged except for the imports under Numba's CUDA simulator
(so the corpus is Numba code, not code that only pyptx accepts)."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fake_driver import on_cpu_or_fake_gpu

from . import host_programs

HERE = Path(__file__).parent


@pytest.fixture(params=["cpu", "fake"])
def where(request, monkeypatch):
    yield from on_cpu_or_fake_gpu(request, monkeypatch)


@pytest.mark.parametrize("name", sorted(host_programs.PROGRAMS))
def test_host_program(where, name):
    host_programs.PROGRAMS[name]()


def _numba_python():
    """An interpreter with numba-cuda: $PYPTX_NUMBA_PYTHON, this one, or the development
    environment's /tmp/vb (numba is not a pyptx test dependency)."""
    env = os.environ.get("PYPTX_NUMBA_PYTHON")
    if env:
        return env
    if importlib.util.find_spec("numba") is not None:
        return sys.executable
    if os.access("/tmp/vb/bin/python", os.X_OK):
        return "/tmp/vb/bin/python"
    return None


def to_numba(source: str) -> str:
    """host_programs.py as Numba code: the imports from pyptx become imports from numba."""
    return source.replace("from pyptx import ", "from numba import ")


_RUNNER = textwrap.dedent("""\
    import json, sys, traceback, types
    src = sys.stdin.read()
    mod = types.ModuleType("numba_host_programs")
    exec(compile(src, "host_programs(numba).py", "exec"), mod.__dict__)
    failed = {}
    for name, fn in mod.PROGRAMS.items():
        try:
            fn()
        except Exception:
            failed[name] = traceback.format_exc(limit=3)
    print(json.dumps({"ran": sorted(mod.PROGRAMS), "failed": failed}))
    """)


def test_host_programs_run_under_numbas_simulator():
    py = _numba_python()
    if py is None:
        pytest.skip("no Python with numba-cuda (set PYPTX_NUMBA_PYTHON)")
    probe = subprocess.run([py, "-c", "import numba.cuda"], capture_output=True,
                           env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    if probe.returncode:
        pytest.skip(f"{py} cannot import numba.cuda")
    src = to_numba((HERE / "host_programs.py").read_text())
    assert not [l for l in src.splitlines() if l.startswith(("import pyptx", "from pyptx"))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    res = subprocess.run([py, "-c", _RUNNER], input=src, capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ran"] == sorted(host_programs.PROGRAMS)
    assert not out["failed"], "\n".join(f"{k}:\n{v}" for k, v in out["failed"].items())
