"""`python -m pyptx compile | check | info` (the command line), run as a user would: in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import default_arch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNELS = '''
import pyptx
from pyptx import f32, i32

@pyptx.kernel
def scale(out: f32[:], x: f32[:], n: i32, K: pyptx.constexpr):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * K

def broken(out: f32[:]):
    out[0] = undefined_name
'''


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYPTX_NO_CACHE="1")
    return subprocess.run([sys.executable, "-m", "pyptx", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "kernels.py"
    p.write_text(KERNELS)
    return p


def test_compile_prints_ptx_and_writes_file(kfile, tmp_path):
    r = run("compile", f"{kfile}:scale", "--arch", "sm_90", "-D", "K=3")
    assert r.returncode == 0, r.stderr
    assert ".target sm_90" in r.stdout and ".visible .entry scale(" in r.stdout
    out = tmp_path / "scale.ptx"
    r2 = run("compile", f"{kfile}:scale", "-D", "K=3", "-o", str(out))
    assert r2.returncode == 0 and r2.stdout == ""
    assert f".target {default_arch()}" in out.read_text()


def test_compile_ir_flag(kfile):
    r = run("compile", f"{kfile}:scale", "-D", "K=2.5", "--ir")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kernel @scale(") and ".version" not in r.stdout


def test_compile_error_is_reported_with_location(kfile):
    r = run("compile", f"{kfile}:broken")
    assert r.returncode == 1
    assert "kernels.py:12:" in r.stderr and "undefined_name" in r.stderr
    r = run("compile", f"{kfile}:scale")                  # constexpr K missing
    assert r.returncode == 1 and "K" in r.stderr
    r = run("compile", f"{kfile}:nothere")
    assert r.returncode != 0 and "nothere" in r.stderr


def test_check_assembles_and_reports(kfile, tmp_path):
    out = tmp_path / "scale.ptx"
    assert run("compile", f"{kfile}:scale", "-D", "K=3", "-o", str(out)).returncode == 0
    r = run("check", str(out))
    assert r.returncode == 0, r.stderr
    assert f"OK for {default_arch()}" in r.stdout and "registers" in r.stdout and "spill_stores" in r.stdout
    bad = tmp_path / "bad.ptx"
    bad.write_text(out.read_text().replace("ret;", "bogus.instruction;"))
    r = run("check", str(bad))
    assert r.returncode == 1 and "rejected" in r.stderr


def test_info_without_gpu_names_the_cpu_executor():
    r = run("info")
    assert r.returncode == 0
    from conftest import gpu_present
    if gpu_present():
        assert "sm_" in r.stdout
    else:
        assert "no GPU: CPU executor" in r.stdout


# ---- MODULE:NAME, package files, --signature, --constexpr, argument errors --------------------

SOFTMAX_DEFS = ("-D", "VEC=4", "--constexpr", "CHUNKS=2")


def test_compile_module_name_target(tmp_path):
    r = run("compile", "stdlib_kernels.softmax:softmax_warp_kernel", *SOFTMAX_DEFS, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert ".visible .entry softmax_warp_kernel(" in r.stdout


def test_compile_file_inside_a_package_keeps_its_relative_imports(tmp_path):
    # stdlib_kernels/softmax.py does `from . import _validate`: loaded by path it failed with
    # "attempted relative import with no known parent package"; from another directory too
    path = os.path.join(ROOT, "stdlib_kernels", "softmax.py")
    for target, cwd in (("stdlib_kernels/softmax.py", ROOT), (path, str(tmp_path))):
        r = run("compile", f"{target}:softmax_warp_kernel", *SOFTMAX_DEFS, "--ir", cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("kernel @softmax_warp_kernel(")


UNANNOTATED = '''
import pyptx

def add_one(out, x, n):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] + 1.0
'''


def test_signature_for_an_unannotated_kernel(tmp_path):
    (tmp_path / "plain.py").write_text(UNANNOTATED)
    for sig in ("void(float32[:], float32[:], int32)", "void(float32[::1], f4[:], i4)",
                "float32[:], float32[:], int32", "f32[:], f32[:], i32"):
        r = run("compile", "plain.py:add_one", "--signature", sig, cwd=str(tmp_path))
        assert r.returncode == 0, (sig, r.stderr)
        assert ".visible .entry add_one(" in r.stdout and ".param .s32 n" in r.stdout
    r = run("compile", "plain.py:add_one", cwd=str(tmp_path))            # no types at all
    assert r.returncode == 1 and "--signature" in r.stderr and "plain.py:4:" in r.stderr


def _usage_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("usage: python -m pyptx compile"), r.stderr
    assert "<unknown>" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_argument_errors_are_usage_errors(kfile, tmp_path):
    _usage_error(run("compile", f"{kfile}:scale", "-D", "K=3", "--arch", "sm_50"),
                 "argument --arch", "sm_50", "sm_75", "sm_90a")
    _usage_error(run("compile", f"{kfile}:scale", "--constexpr", "K"), "NAME=VALUE")
    _usage_error(run("compile", f"{kfile}:scale", "-D", "K=abc"), "not an int, float or bool")
    _usage_error(run("compile", f"{kfile}:scale", "--signature", "void(float32[:]"),
                 "argument --signature")
    _usage_error(run("compile", f"{kfile}:scale", "--signature", "int32(float32[:])"), "void")
    _usage_error(run("compile", "no_such_module_xyz:k", cwd=str(tmp_path)),
                 "no_such_module_xyz")
    _usage_error(run("compile", "stdlib_kernels.softmax:nothere", cwd=ROOT), "nothere")
    _usage_error(run("compile", str(tmp_path / "missing.py") + ":k"), "no such file")
    _usage_error(run("compile", "stdlib_kernels.softmax"), "FILE.py:NAME or MODULE:NAME")
    _usage_error(run("compile", "stdlib_kernels.softmax:WARP_KERNEL_BLOCK", cwd=ROOT),
                 "not a kernel")


def test_an_arch_argument_error_in_python_has_no_fake_location():
    import pyptx
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(pyptx.kernel(lambda: None), arch="sm_50")
    assert str(ei.value).startswith("unsupported arch 'sm_50'")


def test_getting_started_documents_the_command_line():
    with open(os.path.join(ROOT, "docs", "getting-started.md"), encoding="utf-8") as f:
        doc = f.read()
    for words in ("MODULE:NAME", "--signature", "--constexpr", "exit 2", "Jupyter"):
        assert words in doc, words
    line = next(ln for ln in doc.splitlines()
                if ln.startswith("$ python -m pyptx compile stdlib_kernels."))
    r = run(*line.split()[4:], cwd=ROOT)                  # the documented command works
    assert r.returncode == 0 and ".visible .entry" in r.stdout, r.stderr
