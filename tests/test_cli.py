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
