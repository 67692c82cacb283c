"""Caches never return the wrong kernel: the in-memory cache (on each Kernel), the parsed-source
cache and the disk cache are keyed on everything the compiled code depends on, and a damaged disk
entry is a miss.  Each case runs the kernel on the CPU executor and checks the result (or the
source line a MemoryFault names); several run in two processes sharing one cache directory."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyptx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(20261123)
_names = itertools.count()


@pytest.fixture
def disk_cache(tmp_path, monkeypatch):
    """The disk cache on, in a fresh directory; the CPU device."""
    cdir = tmp_path / "cache"
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(cdir))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    return cdir


def write_module(directory, src: str, name: str | None = None) -> str:
    """Write `src` as a module file in `directory`; returns the module name."""
    name = name or f"pyptx_cachekey_mod_{os.getpid()}_{next(_names)}"
    (directory / f"{name}.py").write_text(textwrap.dedent(src), encoding="utf-8")
    return name


def import_module(directory, name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, directory / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_in_process(code: str, cache_dir, module_dir) -> str:
    """Run `code` in a fresh interpreter with the disk cache on in `cache_dir`."""
    env = dict(os.environ, PYPTX_CACHE_DIR=str(cache_dir), PYPTX_DEVICE="cpu",
               PYTHONDONTWRITEBYTECODE="1",      # rewritten modules are never read from .pyc
               PYTHONPATH=os.pathsep.join([ROOT, str(module_dir), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYPTX_NO_CACHE", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    return r.stdout


def poisoned(n=64, dtype=np.float32):
    return np.full(n, np.nan, dtype)


def cache_files(cdir):
    return sorted(p for p in cdir.rglob("*.json"))


# ---- closures ----------------------------------------------------------------------------------

FACTORY = """
import pyptx
from pyptx import f32

def make(c):
    @pyptx.kernel
    def store_c(out: f32[:], x: f32[:]):
        i = pyptx.grid(1)
        out[i] = x[i] * c

    return store_c

def make_mutable(c):
    @pyptx.kernel
    def store_cell(out: f32[:], x: f32[:]):
        i = pyptx.grid(1)
        out[i] = x[i] + c

    def set_c(v):
        nonlocal c
        c = v

    return store_cell, set_c
"""


def test_closure_values_are_in_the_disk_key(tmp_path, disk_cache):
    mod = import_module(tmp_path, write_module(tmp_path, FACTORY))
    x = rng.standard_normal(64).astype(np.float32)
    for c in (1.5, -2.25, 1.5, 3.0):
        out = poisoned()
        mod.make(c)[2, 32](out, x)
        np.testing.assert_array_equal(out, x * np.float32(c))


def test_closure_cell_changes_reach_a_new_kernel_not_a_compiled_one(tmp_path, disk_cache):
    mod = import_module(tmp_path, write_module(tmp_path, FACTORY))
    k, set_c = mod.make_mutable(0.75)
    x = rng.standard_normal(64).astype(np.float32)
    out = poisoned()
    k[2, 32](out, x)
    np.testing.assert_array_equal(out, x + np.float32(0.75))
    set_c(-4.5)
    out = poisoned()
    k[2, 32](out, x)                          # compiled: the value it read stays frozen
    np.testing.assert_array_equal(out, x + np.float32(0.75))
    out = poisoned()
    pyptx.kernel(k.py_func)[2, 32](out, x)    # a new Kernel of the same function: -4.5
    np.testing.assert_array_equal(out, x + np.float32(-4.5))


def test_closure_cell_shadows_a_global_of_the_same_name(tmp_path, cpu):
    src = FACTORY + "\nc = 100.0\n"
    mod = import_module(tmp_path, write_module(tmp_path, src))
    x = rng.standard_normal(64).astype(np.float32)
    out = poisoned()
    mod.make(-0.5)[2, 32](out, x)
    np.testing.assert_array_equal(out, x * np.float32(-0.5))


def test_closure_values_across_processes(tmp_path):
    name = write_module(tmp_path, FACTORY)
    cdir = tmp_path / "cache"
    code = f"""
        import numpy as np, {name} as m
        x = np.random.default_rng(5).standard_normal(64).astype(np.float32)
        out = np.full(64, np.nan, np.float32)
        m.make(C)[2, 32](out, x)
        print(bool(np.array_equal(out, x * np.float32(C))))
    """
    assert run_in_process(code.replace("C", "1.25"), cdir, tmp_path).strip() == "True"
    assert cache_files(cdir)
    assert run_in_process(code.replace("C", "-3.5"), cdir, tmp_path).strip() == "True"


# ---- module globals: numpy scalars and tuples --------------------------------------------------

GLOBALS = """
import numpy as np
import pyptx
from pyptx import f32

G = np.float32({g})
PAIR = (np.float32({p0}), {p1})

@pyptx.kernel
def scale(out: f32[:], x: f32[:]):
    i = pyptx.grid(1)
    out[i] = x[i] * G

@pyptx.kernel
def shift(out: f32[:], x: f32[:]):
    i = pyptx.grid(1)
    out[i] = x[i] + PAIR[0] - PAIR[1]
"""

SETTINGS = [(1.5, 0.5, 2), (2.75, 0.5, 2), (2.75, -1.25, 2), (2.75, -1.25, 7), (1.5, 0.5, 2)]


def _check_scale(mod, x, g):
    out = poisoned()
    mod.scale[2, 32](out, x)
    np.testing.assert_array_equal(out, x * np.float32(g))


def _check_shift(mod, x, p0, p1):
    out = poisoned()
    mod.shift[2, 32](out, x)
    np.testing.assert_array_equal(out, x + np.float32(p0) - np.float32(p1))


def test_numpy_scalar_and_tuple_globals_reach_new_kernels(tmp_path, disk_cache):
    """The same function object, rebound globals: each new Kernel reads the values of now (the
    disk key must see them); a Kernel that already compiled keeps the values it read."""
    mod = import_module(tmp_path, write_module(tmp_path, GLOBALS.format(g=1.5, p0=0.5, p1=2)))
    x = rng.standard_normal(64).astype(np.float32)
    first = mod.scale
    _check_scale(mod, x, 1.5)
    for check in ("scale", "shift"):
        for g, p0, p1 in SETTINGS:
            mod.G, mod.PAIR = np.float32(g), (np.float32(p0), p1)
            mod.scale = pyptx.kernel(first.py_func)
            mod.shift = pyptx.kernel(mod.shift.py_func)
            if check == "scale":
                _check_scale(mod, x, g)
            else:
                _check_shift(mod, x, p0, p1)
    out = poisoned()
    first[2, 32](out, x)
    np.testing.assert_array_equal(out, x * np.float32(1.5))


def test_numpy_scalar_and_tuple_globals_are_in_the_disk_key(tmp_path, disk_cache):
    x = rng.standard_normal(64).astype(np.float32)
    mods = [import_module(tmp_path, write_module(tmp_path, GLOBALS.format(g=g, p0=p0, p1=p1)))
            for g, p0, p1 in SETTINGS]
    for mod, (g, _, _) in zip(mods, SETTINGS):
        _check_scale(mod, x, g)
    for mod, (_, p0, p1) in zip(mods, SETTINGS):
        _check_shift(mod, x, p0, p1)


def test_numpy_scalar_global_across_processes(tmp_path):
    cdir = tmp_path / "cache"
    code = """
        import numpy as np, cachekey_globals as m
        x = np.random.default_rng(6).standard_normal(64).astype(np.float32)
        out = np.full(64, np.nan, np.float32)
        m.scale[2, 32](out, x)
        print(bool(np.array_equal(out, x * m.G)))
    """
    for g in (1.5, 2.75):          # the same file, rewritten with another value between runs
        write_module(tmp_path, GLOBALS.format(g=g, p0=0.5, p1=2), "cachekey_globals")
        assert run_in_process(code, cdir, tmp_path).strip() == "True"


# ---- the parsed-source cache ------------------------------------------------------------------

ANNOTATED = """
import pyptx
from pyptx import f32, f64, i32

@pyptx.kernel
def third(out: f64[:], x: f64[:]):
    i = pyptx.grid(1)
    v: {t} = x[i] * 1.1
    out[i] = v
"""


def test_source_cache_tells_identical_bodies_in_two_files_apart(tmp_path, cpu):
    a = import_module(tmp_path, write_module(tmp_path, ANNOTATED.format(t="f32")))
    b = import_module(tmp_path, write_module(tmp_path, ANNOTATED.format(t="f64")))
    assert a.third.py_func.__code__ == b.third.py_func.__code__    # what Python thinks
    x = rng.standard_normal(64)
    out_a, out_b = poisoned(dtype=np.float64), poisoned(dtype=np.float64)
    a.third[2, 32](out_a, x)
    b.third[2, 32](out_b, x)
    np.testing.assert_array_equal(out_a, (x * 1.1).astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(out_b, x * 1.1)


def test_compile_error_names_its_own_file(tmp_path, cpu):
    good = import_module(tmp_path, write_module(tmp_path, ANNOTATED.format(t="f32")))
    bad_name = write_module(tmp_path, ANNOTATED.format(t="i32"))
    bad = import_module(tmp_path, bad_name)
    pyptx.compile(good.third)
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(bad.third)
    assert ei.value.filename == str(tmp_path / f"{bad_name}.py")
    assert "i32" in str(ei.value)


# ---- where the kernel lives --------------------------------------------------------------------

OOB = """
import pyptx
from pyptx import f32, i32
{pad}
@pyptx.kernel
def oob(out: f32[:], stride: i32):
    i = pyptx.grid(1)
    out[i * stride] = 1.0
"""


def _fault_line(k) -> int:
    out = poisoned(8)
    with pytest.raises(pyptx.MemoryFault) as ei:
        k[1, 32](out, 1000)
    return ei.value.source_line


def _def_line(k) -> int:
    return k.py_func.__code__.co_firstlineno


def test_same_body_lower_in_the_same_file_gets_its_own_lines(tmp_path, disk_cache):
    src = OOB.format(pad="") + "\n\nfirst = oob\n" + OOB.format(pad="# another copy\n\n")
    mod = import_module(tmp_path, write_module(tmp_path, src))
    first, second = mod.first, mod.oob
    assert _def_line(second) > _def_line(first)
    assert _fault_line(first) == _def_line(first) + 3
    assert _fault_line(second) == _def_line(second) + 3
    line = _def_line(second) + 3
    assert f"// line {line}: out[i * stride] = 1.0" in pyptx.compile(second).ptx


def test_same_body_in_another_file_across_processes(tmp_path):
    cdir = tmp_path / "cache"
    code = """
        import numpy as np, pyptx, MOD as m
        out = np.full(8, np.nan, np.float32)
        try:
            m.oob[1, 32](out, 1000)
        except pyptx.MemoryFault as e:
            print(e.source_line, m.oob.py_func.__code__.co_firstlineno + 3)
    """
    for name, pad in (("cachekey_oob_a", ""), ("cachekey_oob_b", "\n\n\n# moved down\n")):
        write_module(tmp_path, OOB.format(pad=pad), name)
        got, want = run_in_process(code.replace("MOD", name), cdir, tmp_path).split()
        assert got == want


# ---- damaged entries ---------------------------------------------------------------------------

CONST = """
import pyptx
from pyptx import f32, i32

@pyptx.kernel
def affine(out: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * 1.5 + 0.25
"""


def _entry_content(d: dict) -> dict:
    return d.get("content", d)


def _damage(path, how: str) -> None:
    d = json.loads(path.read_text())
    c = _entry_content(d)
    if how == "ptx truncated":
        c["ptx"] = c["ptx"][: len(c["ptx"]) // 2]
    elif how == "entry renamed":
        c["ptx"] = c["ptx"].replace(".entry affine", ".entry affinf")
    elif how == "constant changed":
        assert "0f3FC00000" in c["ptx"]                       # 1.5
        c["ptx"] = c["ptx"].replace("0f3FC00000", "0f40000000")
    elif how == "params dropped":
        c["params"] = c["params"][:-1]
        c["signature"] = c["signature"][:-1]
    path.write_text(json.dumps(d))


@pytest.mark.parametrize("how", ["ptx truncated", "entry renamed", "constant changed",
                                 "params dropped"])
def test_damaged_entry_is_a_miss(tmp_path, disk_cache, how):
    mod = import_module(tmp_path, write_module(tmp_path, CONST))
    x = rng.standard_normal(100).astype(np.float32)
    want = (x.astype(np.float64) * 1.5 + 0.25).astype(np.float32)     # one rounding (fma)
    original = pyptx.compile(mod.affine).ptx
    (entry,) = cache_files(disk_cache)
    _damage(entry, how)
    fresh = pyptx.kernel(mod.affine.py_func)          # no in-memory entry: the disk answers
    assert pyptx.compile(fresh).ptx == original
    out = poisoned(100)
    pyptx.kernel(mod.affine.py_func)[4, 32](out, x, 100)
    np.testing.assert_array_equal(out, want)
    assert _entry_content(json.loads(entry.read_text()))["ptx"] == original   # rewritten intact
    assert pyptx.compile(pyptx.kernel(mod.affine.py_func)).ptx == original


def test_damaged_entry_across_processes(tmp_path):
    cdir = tmp_path / "cache"
    write_module(tmp_path, CONST, "cachekey_affine")
    code = """
        import numpy as np, cachekey_affine as m
        x = np.random.default_rng(7).standard_normal(100).astype(np.float32)
        out = np.full(100, np.nan, np.float32)
        m.affine[4, 32](out, x, 100)
        print(bool(np.array_equal(out, (x.astype(np.float64) * 1.5 + 0.25).astype(np.float32))))
    """
    assert run_in_process(code, cdir, tmp_path).strip() == "True"
    (entry,) = cache_files(cdir)
    stamp = entry.stat().st_mtime_ns
    assert run_in_process(code, cdir, tmp_path).strip() == "True"
    assert cache_files(cdir) == [entry] and entry.stat().st_mtime_ns == stamp   # a hit: the
    _damage(entry, "constant changed")                  # key is stable across processes
    assert run_in_process(code, cdir, tmp_path).strip() == "True"


# ---- what device functions read ---------------------------------------------------------------

HELPER = """
import numpy as np
import pyptx

H = np.float32({h})

@pyptx.func
def scaled(v):
    return v * H
"""

USES_HELPER = """
import pyptx
from pyptx import f32
import cachekey_helper

@pyptx.kernel
def apply(out: f32[:], x: f32[:]):
    i = pyptx.grid(1)
    out[i] = cachekey_helper.scaled(x[i])
"""


def test_globals_of_a_device_function_in_another_module_across_processes(tmp_path):
    cdir = tmp_path / "cache"
    write_module(tmp_path, USES_HELPER, "cachekey_apply")
    code = """
        import numpy as np, cachekey_apply as m, cachekey_helper as h
        x = np.random.default_rng(8).standard_normal(64).astype(np.float32)
        out = np.full(64, np.nan, np.float32)
        m.apply[2, 32](out, x)
        print(bool(np.array_equal(out, x * h.H)))
    """
    for value in (1.5, 3.25):         # only the helper's module constant changes
        write_module(tmp_path, HELPER.format(h=value), "cachekey_helper")
        assert run_in_process(code, cdir, tmp_path).strip() == "True"
