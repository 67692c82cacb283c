"""A CompileError at a user-facing entry point (`pyptx.compile(...)`, the first launch
`k[g, b](...)`) comes with a short traceback: the user's call, one line of pyptx/kernel.py, and
the error's own location in the kernel; the compiler's frames only with PYPTX_DEBUG=1."""
from __future__ import annotations

import os
import subprocess
import sys
import traceback

import numpy as np
import pytest

import pyptx
from pyptx import f32

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "pyptx") + os.sep
INTERNAL = [os.path.join(PKG, d) for d in ("frontend", "ir", "passes", "ptx", "runtime")] + [
    os.path.join(PKG, "compiler.py")]


def _fresh_broken():
    @pyptx.kernel
    def broken(out: f32[:]):
        out[0] = undefined_name  # noqa: F821 - the error under test
    return broken


BROKEN_LINE = _fresh_broken.__code__.co_firstlineno + 3


def _raised(call):
    with pytest.raises(pyptx.CompileError) as ei:
        call()
    return ei.value


def _pyptx_frames(err):
    return [f.filename for f in traceback.extract_tb(err.__traceback__)
            if f.filename.startswith(PKG)]


def _check_short(err, max_pyptx_frames=1):
    frames = _pyptx_frames(err)
    assert len(frames) <= max_pyptx_frames, frames
    assert all(not f.startswith(tuple(INTERNAL)) for f in frames), frames
    text = "".join(traceback.format_exception(err))
    assert not any(p in text for p in INTERNAL), text
    assert "During handling" not in text and "direct cause" not in text, text
    assert f'{__file__}", line {BROKEN_LINE}' in text and "undefined_name" in text, text
    assert f"{__file__}:{BROKEN_LINE}:" in str(err)          # file:line:col in the message
    assert "test_error_tracebacks.py" in traceback.extract_tb(err.__traceback__)[0].filename


@pytest.fixture(autouse=True)
def _no_debug_no_cache(monkeypatch):
    monkeypatch.delenv("PYPTX_DEBUG", raising=False)
    monkeypatch.setenv("PYPTX_NO_CACHE", "1")


def test_compile_error_at_pyptx_compile_is_short():
    _check_short(_raised(lambda: pyptx.compile(_fresh_broken(), arch="sm_80")))


def test_compile_error_at_first_launch_is_short(cpu_device):
    x = np.zeros(4, np.float32)
    _check_short(_raised(lambda: _fresh_broken()[1, 32](x)))


def test_numba_style_launch_is_short_too(cpu_device):
    from pyptx import cuda

    def broken(out):
        out[0] = undefined_name  # noqa: F821
    k = cuda.jit("void(float32[:])")(broken)
    err = _raised(lambda: k[1, 32](np.zeros(4, np.float32)))
    frames = _pyptx_frames(err)             # kernel.py and cuda.py's launch wrapper at most
    assert len(frames) <= 2 and not any(f.startswith(tuple(INTERNAL)) for f in frames), frames


def test_pyptx_debug_shows_the_compiler_frames(monkeypatch):
    monkeypatch.setenv("PYPTX_DEBUG", "1")
    err = _raised(lambda: pyptx.compile(_fresh_broken(), arch="sm_80"))
    frames = _pyptx_frames(err)
    assert any(f.startswith(os.path.join(PKG, "frontend")) for f in frames), frames
    assert any(f == os.path.join(PKG, "compiler.py") for f in frames), frames


def test_compile_keeps_its_signature_and_doc():
    import inspect

    from pyptx import compiler
    assert inspect.signature(pyptx.compile) == inspect.signature(compiler.compile)
    assert pyptx.compile.__doc__ == compiler.compile.__doc__

    def noop(out):
        out[0] = 1.0
    ck = pyptx.compile(noop, signature="f32[:]", arch="sm_80")
    assert ".entry" in ck.ptx


SCRIPT = '''
import pyptx
from pyptx import f32

@pyptx.kernel
def broken(out: f32[:]):
    out[0] = undefined_name

pyptx.compile(broken)
'''


@pytest.mark.parametrize("debug", ["", "1"])
def test_as_python_prints_it(tmp_path, debug):
    script = tmp_path / "user_kernel.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT, PYPTX_NO_CACHE="1", PYPTX_DEBUG=debug)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 1
    err = res.stderr
    assert f'File "{script}", line 9' in err and f'File "{script}", line 7' in err, err
    assert err.rstrip().endswith("is not defined; define it before the kernel or pass it as a "
                                 "parameter"), err
    internal = os.path.join("pyptx", "frontend")
    if debug:
        assert internal in err, err
    else:
        assert internal not in err and err.count('  File "') == 3, err


# ---- kernels defined in an IPython / Jupyter cell ----------------------------------------------
# IPython compiles a cell under a made-up file name ("<ipython-input-3-…>", or ipykernel's
# "/tmp/ipykernel_…/….py") and registers its text in linecache; inspect.getsource, which the
# frontend reads the kernel with, finds it there.

CELL = '''
import numpy as np
import pyptx
from pyptx import f32, i32

@pyptx.kernel
def scale(out: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * 2.0

@pyptx.kernel
def broken(out: f32[:]):
    out[0] = nope
'''
CELL_BROKEN_LINE = 14


@pytest.mark.parametrize("cell_name", ["<ipython-input-3-0123456789ab>",
                                       "/tmp/ipykernel_4242/2718281828.py"])
def test_kernel_defined_in_a_notebook_cell(cell_name, cpu_device, monkeypatch, tmp_path):
    import linecache
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path))      # the disk cache on, too
    monkeypatch.delenv("PYPTX_NO_CACHE")
    monkeypatch.setitem(linecache.cache, cell_name,
                        (len(CELL), None, CELL.splitlines(True), cell_name))
    ns = {"__name__": "__main__"}
    exec(compile(CELL, cell_name, "exec"), ns)                  # noqa: S102 - a "cell"
    x = np.arange(8, dtype=np.float32)
    out = np.zeros_like(x)
    ns["scale"][1, 32](out, x, 8)
    assert np.array_equal(out, 2 * x)
    assert ".visible .entry scale(" in pyptx.compile(ns["scale"], arch="sm_80").ptx
    err = _raised(lambda: pyptx.compile(ns["broken"], arch="sm_80"))
    assert str(err).startswith(f"{cell_name}:{CELL_BROKEN_LINE}:14: name 'nope'")
    assert len(_pyptx_frames(err)) <= 1
    text = "".join(traceback.format_exception(err))
    assert f'File "{cell_name}", line {CELL_BROKEN_LINE}' in text and "out[0] = nope" in text


def test_exec_without_source_says_why(monkeypatch):
    ns = {}
    exec(compile(CELL, "<no-linecache-entry>", "exec"), ns)    # noqa: S102
    err = _raised(lambda: pyptx.compile(ns["scale"], arch="sm_80"))
    assert "cannot read the source of 'scale'" in str(err) and ".py file" in str(err)


def test_in_ipython(cpu_device):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    try:
        assert shell.run_cell(CELL).success
        res = shell.run_cell("x = np.arange(8, dtype=np.float32); y = np.zeros_like(x)\n"
                             "scale[1, 32](y, x, 8)\n"
                             "ptx = pyptx.compile(scale, arch='sm_80').ptx")
        assert res.success, res.error_in_exec
        assert np.array_equal(shell.user_ns["y"], 2 * shell.user_ns["x"])
        res = shell.run_cell("pyptx.compile(broken, arch='sm_80')")
        assert isinstance(res.error_in_exec, pyptx.CompileError)
        text = str(res.error_in_exec)           # (IPython drops the cell's first blank line)
        assert ":14: name 'nope'" in text and "out[0] = nope" in text
    finally:
        InteractiveShell.clear_instance()
