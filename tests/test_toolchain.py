"""The ptxas wrapper: discovery, assembling, error reporting and the resource report."""
from __future__ import annotations

import os
import re

import pytest

from pyptx import toolchain
from pyptx.errors import PyptxError, ToolchainError

GOOD = """.version 7.0
.target sm_80
.address_size 64
.visible .entry good(.param .u64 p)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<6>;
	.shared .align 4 .b8 tile[512];
	.local .align 8 .b8 spill[4096];
	ld.param.u64 %rd1, [p];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mov.u64 %rd3, tile;
	st.shared.u32 [%rd3], %r1;
	mov.u64 %rd3, spill;
	and.b32 %r2, %r1, 1023;
	mul.wide.u32 %rd4, %r2, 4;
	add.s64 %rd5, %rd3, %rd4;
	st.local.u32 [%rd5], %r1;
	ld.local.u32 %r2, [%rd3+4];
	st.global.u32 [%rd2], %r2;
	ret;
}
"""


def test_find_ptxas_here():
    exe = toolchain.find_ptxas()
    assert exe and os.path.isfile(exe) and os.access(exe, os.X_OK)
    assert toolchain.find_ptxas() == exe           # cached, stable


def test_env_override(monkeypatch, tmp_path):
    fake = tmp_path / "no-such-ptxas"
    monkeypatch.setenv("PYPTX_PTXAS", str(fake))
    assert toolchain.find_ptxas() is None
    with pytest.raises(ToolchainError, match="no ptxas"):
        toolchain.assemble(GOOD, "sm_80")
    real = toolchain._find_cached(None)
    monkeypatch.setenv("PYPTX_PTXAS", real)
    assert toolchain.find_ptxas() == real


def test_assemble_good():
    log = toolchain.assemble(GOOD, "sm_80", verbose=True)
    assert "good" in log


def test_broken_ptx_raises_with_ptxas_message():
    bad = GOOD.replace("mov.u32 %r1, %tid.x;", "frobnicate.u32 %r1, %tid.x;")
    with pytest.raises(ToolchainError) as err:
        toolchain.assemble(bad, "sm_80")
    assert "frobnicate" in str(err.value)
    assert isinstance(err.value, PyptxError)
    with pytest.raises(ToolchainError, match="sm_"):
        toolchain.assemble(GOOD.replace(".target sm_80", ".target sm_90"), "sm_80")


def test_resources():
    res = toolchain.resources(GOOD, "sm_80")
    assert set(res) == {"registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes"}
    assert all(isinstance(v, int) and v >= 0 for v in res.values())
    assert res["shared_bytes"] == 512
    assert res["local_bytes"] >= 4096
    assert 1 <= res["registers"] <= 255


def test_parse_resources_picks_the_entry():
    log = ("ptxas info    : Compiling entry function 'a' for 'sm_80'\n"
           "ptxas info    : Function properties for a\n"
           "    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function 'b' for 'sm_80'\n"
           "ptxas info    : Used 7 registers, 360 bytes cmem[0]\n")
    assert toolchain.parse_resources(log, "a") == dict(
        registers=40, spill_stores=4, spill_loads=8, shared_bytes=2048, local_bytes=16)
    assert toolchain.parse_resources(log, "b")["registers"] == 7
    assert toolchain.parse_resources(log, "b")["shared_bytes"] == 0


def test_versions():
    major, minor = toolchain.ptxas_version()
    assert major >= 11
    isa = toolchain.max_ptx_isa()
    assert re.fullmatch(r"\d+\.\d+", isa)
    assert tuple(map(int, isa.split("."))) >= (7, 8)
    # ptxas accepts its maximum and refuses one beyond it
    toolchain.assemble(GOOD.replace(".version 7.0", f".version {isa}"), "sm_80")
    bigger = f"{int(isa.split('.')[0]) + 1}.0"
    with pytest.raises(ToolchainError):
        toolchain.assemble(GOOD.replace(".version 7.0", f".version {bigger}"), "sm_80")


def test_compile_path_runs_no_subprocess(monkeypatch):
    import subprocess
    from ptx_ir_helpers import elementwise
    from pyptx.ptx import emit
    from pyptx.types import f32

    def boom(*a, **k):
        raise AssertionError("subprocess on the compile path")
    monkeypatch.setattr(subprocess, "run", boom)
    monkeypatch.setattr(subprocess, "Popen", boom)
    emit(elementwise("k", f32, lambda b, x, y: b.op("add", [x, y], f32)), "sm_80")
