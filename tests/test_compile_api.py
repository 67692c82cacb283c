"""`pyptx.compile` and `CompiledKernel` as docs/getting-started.md and docs/launching.md describe them: options, caches, errors."""
from __future__ import annotations

import glob
import json
import os
import re

import numpy as np
import pytest
from conftest import default_arch

import pyptx
from pyptx import compiler
from kernel_factory import make_kernel

SAXPY = """
import pyptx
from pyptx import f32, i32, block_idx, block_dim, thread_idx

@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]

def plain(out, x, n):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * 2

@pyptx.kernel
def tiled(out: f32[:], x: f32[:], TILE: pyptx.constexpr):
    t = pyptx.shared.array(TILE, f32)
    i = thread_idx.x
    t[i] = x[i]
    pyptx.syncthreads()
    out[i] = t[TILE - 1 - i]

@pyptx.func
def helper(v: f32):
    return v + 1.0
"""


@pytest.fixture
def mod():
    from kernel_factory import load_module
    return load_module(SAXPY)


def test_compile_gives_ptx_ir_params(mod):
    ck = pyptx.compile(mod.saxpy)
    assert isinstance(ck, pyptx.CompiledKernel)
    assert ck.name == "saxpy" and ck.arch == default_arch()
    assert len(re.findall(r"\.visible \.entry", ck.ptx)) == 1
    assert ".visible .entry saxpy(" in ck.ptx
    assert [(p.name, p.ptx_type) for p in ck.params] == [
        ("out", "u64"), ("out_shape0", "s32"), ("x", "u64"), ("x_shape0", "s32"),
        ("y", "u64"), ("y_shape0", "s32"), ("a", "f32"), ("n", "s32")]
    # .ir is the optimised IR, parseable and printing identically
    from pyptx.ir import parse_function, print_function
    assert print_function(parse_function(ck.ir)) == ck.ir


def test_version_follows_arch(mod):
    for arch, version in [("sm_75", "7.0"), ("sm_80", "7.0"), ("sm_86", "7.1"), ("sm_89", "7.8"),
                          ("sm_90", "7.8"), ("sm_90a", "8.0")]:
        ck = pyptx.compile(mod.saxpy, arch=arch)
        assert f".version {version}\n" in ck.ptx and f".target {arch}\n" in ck.ptx


def test_ptx_is_byte_identical_across_compiles(mod):
    a = pyptx.compile(mod.saxpy).ptx
    k2 = pyptx.kernel(mod.saxpy.py_func)
    b = pyptx.compile(k2).ptx
    assert a == b


def test_fma_option_controls_contraction(mod):
    assert "fma.rn.f32" in pyptx.compile(mod.saxpy).ptx
    plain = pyptx.compile(mod.saxpy, fma=False).ptx
    assert "fma.rn" not in plain and "mul.rn.f32" in plain and "add.rn.f32" in plain
    k = pyptx.kernel(fma=False)(mod.saxpy.py_func)
    assert "fma.rn" not in pyptx.compile(k).ptx


def test_plain_function_with_signature(mod):
    ck = pyptx.compile(mod.plain, signature="f32[:], f32[:], i32")
    assert ck.name == "plain"
    ck2 = pyptx.compile(mod.plain, signature=(pyptx.f32[:], pyptx.f32[:], pyptx.i32))
    assert ck2.ptx == ck.ptx
    with pytest.raises(pyptx.CompileError, match="no type"):
        pyptx.compile(mod.plain)
    with pytest.raises(pyptx.CompileError, match="signature"):
        pyptx.compile(mod.plain, signature="f32[:], i32")


def test_constexpr_by_compile_specialize_and_launch(mod, cpu_device):
    a = pyptx.compile(mod.tiled, constexprs={"TILE": 32})
    b = pyptx.compile(mod.tiled.specialize(TILE=32))
    assert a.ptx == b.ptx and ".shared .align" in a.ptx and "[128]" in a.ptx
    assert pyptx.compile(mod.tiled, constexprs={"TILE": 16}).ptx != a.ptx
    with pytest.raises(pyptx.CompileError, match="constexpr"):
        pyptx.compile(mod.tiled)
    x = np.random.default_rng(1).standard_normal(32).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    mod.tiled[1, 32](out, x, 32)                 # value taken from the launch
    np.testing.assert_array_equal(out, x[::-1])


def test_bad_targets_are_compile_errors(mod):
    with pytest.raises(pyptx.CompileError, match="device function"):
        pyptx.compile(mod.helper)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(42)
    with pytest.raises(pyptx.CompileError, match="arch"):
        pyptx.compile(mod.saxpy, arch="sm_52")
    assert issubclass(pyptx.CompileError, SyntaxError)
    assert issubclass(pyptx.CompileError, pyptx.PyptxError)


def test_resources_from_ptxas(mod):
    res = pyptx.compile(mod.tiled, constexprs={"TILE": 64}).resources()
    assert set(res) >= {"registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes"}
    assert res["registers"] > 0 and res["shared_bytes"] == 256
    assert res["spill_stores"] == 0 and res["local_bytes"] == 0


def test_disk_cache_hit_and_corrupt_entry(mod, tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    first = pyptx.compile(mod.saxpy.py_func, arch="sm_86")
    files = glob.glob(os.path.join(str(tmp_path), "*", "*.json"))
    assert len(files) == 1
    entry = json.load(open(files[0]))
    assert entry["content"]["ptx"] == first.ptx
    # a hit does not run the pipeline
    calls = []
    monkeypatch.setattr(compiler, "compile_uncached",
                        lambda *a, **k: calls.append(a) or (_ for _ in ()).throw(AssertionError))
    hit = pyptx.compile(mod.saxpy.py_func, arch="sm_86")
    assert hit.ptx == first.ptx and hit.ir == first.ir and not calls
    monkeypatch.undo()
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    # a corrupt entry is recompiled (and rewritten), never an error
    with open(files[0], "w") as f:
        f.write("{not json")
    again = pyptx.compile(mod.saxpy.py_func, arch="sm_86")
    assert again.ptx == first.ptx
    assert json.load(open(files[0]))["content"]["ptx"] == first.ptx


def test_no_cache_env_writes_nothing(mod, tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PYPTX_NO_CACHE", "1")
    pyptx.compile(mod.saxpy.py_func, arch="sm_89")
    assert not glob.glob(os.path.join(str(tmp_path), "**", "*.json"), recursive=True)


def test_unwritable_cache_dir_compiles_and_warns_once_naming_the_directory_and_the_fix(
        mod, tmp_path, monkeypatch):
    from pyptx import diskcache
    blocker = tmp_path / "a_file"                  # a file where the directory should be: even
    blocker.write_text("")                         # root cannot create the cache under it
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(blocker))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    monkeypatch.setattr(diskcache, "_warned", [])
    assert issubclass(pyptx.CacheWarning, pyptx.PyptxError)
    assert issubclass(pyptx.CacheWarning, UserWarning)
    with pytest.warns(pyptx.CacheWarning) as got:
        ck = pyptx.compile(mod.saxpy.py_func, arch="sm_86")
        pyptx.compile(mod.saxpy.py_func, arch="sm_87")        # a second store: no second warning
    assert ".entry saxpy" in ck.ptx
    assert len([w for w in got if w.category is pyptx.CacheWarning]) == 1
    msg = str(got[0].message)
    assert str(blocker) in msg and "Not a directory" in msg
    assert "PYPTX_CACHE_DIR" in msg and "PYPTX_NO_CACHE=1" in msg and "writable" in msg


def test_cache_key_sees_module_constants(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    src = "import pyptx\nfrom pyptx import f32\nSCALE = {}\ndef k(out: f32[:]):\n" \
          "    out[pyptx.grid(1)] = SCALE\n"
    a = pyptx.compile(make_kernel(src.format(2.0)))
    b = pyptx.compile(make_kernel(src.format(3.0)))
    assert a.ptx != b.ptx


def test_compile_error_points_at_user_line():
    k = make_kernel("import pyptx\nfrom pyptx import f32\n\ndef bad(out: f32[:]):\n"
                    "    out[0] = [1, 2]\n")
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(k)
    e = ei.value
    assert e.lineno == 5 and e.offset == 14 and e.filename.endswith(".py")
    text = str(e)
    assert f"{e.filename}:5:14" in text and "out[0] = [1, 2]" in text and "^" in text
