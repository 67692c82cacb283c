"""Packaging, compiling, launching and the command line checked as a user (or an acceptance test) would: through the public API,
DSL kernels written in a real file, and subprocesses for what concerns a fresh interpreter."""
from __future__ import annotations

import glob
import hashlib
import inspect
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import default_arch

import pyptx
from pyptx import compiler
from kernel_factory import load_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SRC = """
import pyptx
from pyptx import f32, i32, i8, u8, i64, f64, bool_, block_idx, block_dim, thread_idx

@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]

@pyptx.kernel(fma=False, opt_level=0)
def saxpy_nofma(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]

@pyptx.kernel
def mix(out: f64[:], x: f64[:, :], flag: bool_, k: i8, b: u8, big: i64, s: f32):
    i = pyptx.grid(1)
    if i < x.shape[0] * x.shape[1]:
        r = i // x.shape[1]
        c = i % x.shape[1]
        v = x[r, c] * s + k + b + f64(big)
        out[i] = v if flag else -v

@pyptx.kernel
def geom(out: i32[:, :, :]):
    x = block_idx.x * block_dim.x + thread_idx.x
    y = block_idx.y * block_dim.y + thread_idx.y
    z = block_idx.z * block_dim.z + thread_idx.z
    if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
        out[z, y, x] = x + 10 * y + 100 * z

@pyptx.kernel
def oob(out: f32[:], n: i32):
    i = pyptx.grid(1)
    out[i + n] = 1.0

@pyptx.kernel
def partial_barrier(out: f32[:]):
    if thread_idx.x < 16:
        pyptx.syncthreads()
    out[thread_idx.x] = 1.0

@pyptx.kernel
def talk(out: i32[:], v: f32):
    if thread_idx.x == 0:
        print("hello", block_idx.x, v)
    out[0] = 1

@pyptx.kernel
def dyn(out: f32[:]):
    s = pyptx.shared.dynamic(f32)
    s[thread_idx.x] = f32(thread_idx.x)
    pyptx.syncthreads()
    out[thread_idx.x] = s[block_dim.x - 1 - thread_idx.x]

@pyptx.func
def twice(v: f32):
    return v * 2.0

def plain(out, x, n):
    i = pyptx.grid(1)
    if i < n:
        out[i] = twice(x[i])
"""


@pytest.fixture(scope="module")
def mod():
    return load_module(SRC)


def _env(**kw):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(kw)
    return env


def _py(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(**env), timeout=120)


# ---- §1 packages ---------------------------------------------------------------------------------

def test_import_touches_no_driver_toolkit_or_parser():
    code = ("import sys, pyptx, stdlib_kernels\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('cuda', 'lark'))\n"
            "print(bad)\n")
    r = _py(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_distribution_name_is_not_pyptx():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)["project"]
    assert meta["name"] != "pyptx"
    assert "test" in meta["optional-dependencies"]


# ---- §3 compiling --------------------------------------------------------------------------------

def test_compile_signature_and_defaults():
    sig = inspect.signature(pyptx.compile)
    ps = sig.parameters
    names = ("arch", "constexprs", "signature", "opt_level", "fma", "fastmath")
    assert list(ps) == ["fn", *names]
    assert ps["fn"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for n in names:
        assert ps[n].kind is inspect.Parameter.KEYWORD_ONLY
    # fastmath=None: the kernel's own choice (False unless @pyptx.kernel/cuda.jit(fastmath=True))
    assert [ps[n].default for n in names] == [None, None, None, 2, True, None]


def test_kernel_and_func_objects(mod):
    assert isinstance(mod.saxpy, pyptx.Kernel) and isinstance(mod.saxpy_nofma, pyptx.Kernel)
    assert mod.saxpy.name == "saxpy" and inspect.isfunction(mod.saxpy.py_func)
    assert mod.saxpy.py_func.__name__ == "saxpy"
    assert isinstance(mod.twice, pyptx.DeviceFunction)
    for name in ("CompileError", "LaunchError", "DeviceError", "MemoryFault", "ToolchainError"):
        assert issubclass(getattr(pyptx, name), pyptx.PyptxError)
    assert issubclass(pyptx.CompileError, SyntaxError)


def test_compiled_kernel_fields(mod):
    ck = pyptx.compile(mod.plain, signature="f32[:], f32[:], i32")
    assert isinstance(ck, pyptx.CompiledKernel)
    assert ck.name == "plain" and ck.arch == default_arch()
    assert len(re.findall(r"\.visible\s+\.entry", ck.ptx)) == 1
    assert re.search(r"\.visible\s+\.entry\s+plain\s*\(", ck.ptx)
    assert isinstance(ck.ir, str) and ck.ir
    assert [(p.name, p.ptx_type) for p in ck.params] == [
        ("out", "u64"), ("out_shape0", "s32"), ("x", "u64"), ("x_shape0", "s32"), ("n", "s32")]
    res = ck.resources()
    assert set(res) >= {"registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes"}
    assert all(isinstance(v, int) for v in res.values())


@pytest.mark.parametrize("arch,version", [("sm_75", "7.0"), ("sm_80", "7.0"), ("sm_86", "7.1"),
                                          ("sm_89", "7.8"), ("sm_90", "7.8"), ("sm_90a", "8.0")])
def test_version_per_arch(mod, arch, version):
    ck = pyptx.compile(mod.saxpy, arch=arch)
    assert ck.arch == arch
    assert re.search(rf"^\.version {re.escape(version)}$", ck.ptx, re.M)
    assert re.search(rf"^\.target {arch}$", ck.ptx, re.M)


def test_decorator_defaults_apply_to_compile_and_launch(mod, cpu_device):
    ptx = pyptx.compile(mod.saxpy_nofma).ptx
    assert "fma.rn" not in ptx
    assert ptx == pyptx.compile(mod.saxpy_nofma.py_func, fma=False, opt_level=0).ptx
    assert ptx != pyptx.compile(mod.saxpy_nofma.py_func, fma=False, opt_level=2).ptx
    assert "fma.rn.f32" in pyptx.compile(mod.saxpy).ptx
    # the launch compiles with the same defaults: results bit-identical to numpy's a*x + y
    seen = []
    compiler._emit_hooks.append(lambda ck: seen.append(ck.ptx))
    try:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(300).astype(np.float32)
        y = rng.standard_normal(300).astype(np.float32)
        out = np.empty_like(x)
        a = np.float32(1.1)
        fresh = pyptx.kernel(fma=False, opt_level=0)(mod.saxpy_nofma.py_func)
        fresh[2, 256](out, x, y, float(a), 300)
    finally:
        compiler._emit_hooks.pop()
    assert seen and all("fma.rn" not in p for p in seen)
    np.testing.assert_array_equal(out, a * x + y)


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_opt_levels_give_same_results(mod, cpu_device, opt_level):
    k = pyptx.kernel(opt_level=opt_level)(mod.plain)
    ck = pyptx.compile(mod.plain, signature="f32[:], f32[:], i32", opt_level=opt_level)
    assert ".visible .entry plain" in ck.ptx
    x = np.arange(70, dtype=np.float32) - 3.5
    out = np.full(70, np.nan, np.float32)
    k[3, 32](out, x, 70)
    np.testing.assert_array_equal(out, x * 2)


def test_ptx_byte_identical_across_processes(tmp_path):
    code = ("import hashlib, stdlib_kernels as sk, pyptx\n"
            "ck = pyptx.compile(sk.rmsnorm_kernel, constexprs={'BLOCK': 256, 'VEC': 4, "
            "'CHUNKS': 4})\n"
            "ck2 = pyptx.compile(sk.gemm_tiled_kernel, arch='sm_90', constexprs={'VEC': 4})\n"
            "print(hashlib.sha256((ck.ptx + ck2.ptx).encode()).hexdigest())\n")
    outs = {_py(code, PYPTX_NO_CACHE="1", PYTHONHASHSEED=str(seed)).stdout for seed in (1, 2)}
    assert len(outs) == 1 and len(next(iter(outs)).strip()) == 64


def test_disk_cache_default_dir_and_env(tmp_path):
    code = ("import stdlib_kernels as sk, pyptx\n"
            "pyptx.compile(sk.swiglu_kernel)\n")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(HOME=str(home), PYPTX_NO_CACHE="")
    env_ = _env(**env)
    env_.pop("PYPTX_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-c", code], env=env_, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert glob.glob(str(home / ".cache" / "pyptx" / "**" / "*"), recursive=True)
    cdir = tmp_path / "cache"
    r = _py(code, HOME=str(home), PYPTX_NO_CACHE="", PYPTX_CACHE_DIR=str(cdir))
    assert r.returncode == 0, r.stderr
    files = [p for p in glob.glob(str(cdir / "**" / "*"), recursive=True) if os.path.isfile(p)]
    assert files
    for p in files:                               # corrupt every entry: recompiled, no error
        with open(p, "w") as f:
            f.write("{not json")
    r = _py(code + "print('ok')\n", HOME=str(home), PYPTX_NO_CACHE="",
            PYPTX_CACHE_DIR=str(cdir))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    nocache = tmp_path / "nocache"
    r = _py(code, HOME=str(home), PYPTX_NO_CACHE="1", PYPTX_CACHE_DIR=str(nocache))
    assert r.returncode == 0 and not nocache.exists()


def test_compile_error_format(tmp_path):
    src = ("import pyptx\nfrom pyptx import f32\n\n@pyptx.kernel\n"
           "def bad(out: f32[:]):\n    out[0] = [1.0, 2.0][0]\n")
    m = load_module(src)
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(m.bad)
    e = ei.value
    assert isinstance(e, SyntaxError) and isinstance(e, pyptx.PyptxError)
    assert e.filename and e.filename.endswith(".py") and os.path.exists(e.filename)
    assert e.lineno == 6 and isinstance(e.offset, int) and e.offset >= 1
    text = str(e)
    lines = text.splitlines()
    assert lines[0].startswith(f"{e.filename}:6:{e.offset}:")
    assert any("out[0] = [1.0, 2.0][0]" in ln for ln in lines)
    caret = [ln for ln in lines if ln.strip() == "^"]
    assert caret
    # the caret sits under the column reported
    src_line = next(ln for ln in lines if "out[0] = [1.0, 2.0][0]" in ln)
    stripped_at = len(src_line) - len(src_line.lstrip())
    assert caret[0].index("^") - stripped_at == e.offset - 1 - 4


def test_no_other_exception_escapes_compile_for_bad_code():
    bodies = ["x = {}", "class A: pass", "with a: pass", "y = lambda: 1", "raise ValueError",
              "global q", "out[0] = 'text'", "out[0] = undefined", "out[0] = out.nope",
              "out[0] = [i for i in range(3)][0]", "out[0] = 1 @ 2", "out[0] = out(1)",
              "yield 1", "import os", "del out", "assert out", "out[0] = (1, 2)",
              "out[0, 1, 2] = 1.0", "out[0] = pyptx.math.exp(1, 2)", "out[0] = max()",
              "out[0] = f32(1, 2)", "out.shape[0] = 3", "out[0] = out[0.5]"]
    for i, body in enumerate(bodies):
        m = load_module(f"import pyptx\nfrom pyptx import f32\n\ndef k{i}(out: f32[:]):\n"
                        f"    {body}\n")
        with pytest.raises(pyptx.CompileError):
            pyptx.compile(getattr(m, f"k{i}"))


def test_unsupported_operator_is_a_compile_error_with_location():
    m = load_module("import pyptx\nfrom pyptx import f32\n\ndef mm(out: f32[:]):\n"
                    "    out[0] = out[0] @ out[1]\n")
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(m.mm)
    assert ei.value.filename and ei.value.filename.endswith(".py") and ei.value.lineno


@pytest.mark.parametrize("kw", [dict(opt_level=3), dict(opt_level=-1), dict(opt_level="2"),
                                dict(opt_level=True), dict(fma="no"), dict(arch=80),
                                dict(arch="sm_52"), dict(arch="gfx90a"), dict(constexprs=[1]),
                                dict(signature=123), dict(signature="f32[:], garbage"),
                                dict(signature="f32[:]")])
def test_bad_compile_options_are_compile_errors(mod, kw):
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(mod.plain, **{"signature": "f32[:], f32[:], i32", **kw})
    with pytest.raises(pyptx.CompileError):
        k = pyptx.kernel(mod.plain, signature="f32[:], f32[:], i32")
        pyptx.compile(k, **kw)


def test_toolchain_error_without_ptxas(tmp_path):
    code = ("import pyptx, stdlib_kernels as sk\n"
            "from pyptx import toolchain\n"
            "print(toolchain.find_ptxas())\n"
            "ck = pyptx.compile(sk.swiglu_kernel)\n"
            "try:\n    ck.resources()\nexcept pyptx.ToolchainError as e:\n"
            "    print('TOOLCHAIN', isinstance(e, pyptx.PyptxError), e)\n")
    r = _py(code, PYPTX_PTXAS=str(tmp_path / "missing" / "ptxas"), PATH="", PYPTX_NO_CACHE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "None"
    assert "TOOLCHAIN True" in r.stdout and "ptxas" in r.stdout


def test_find_ptxas_lookup_follows_the_environment(monkeypatch, tmp_path):
    from pyptx import toolchain
    real = toolchain.find_ptxas()
    assert real
    monkeypatch.setenv("PYPTX_PTXAS", str(tmp_path / "nope"))
    assert toolchain.find_ptxas() is None
    with pytest.raises(pyptx.ToolchainError, match="ptxas"):
        toolchain.assemble(".version 7.0\n.target sm_80\n.address_size 64\n", "sm_80")
    monkeypatch.delenv("PYPTX_PTXAS")
    assert toolchain.find_ptxas() == real


# ---- §4 launching ---------------------------------------------------------------------------------

def test_saxpy_example_from_the_spec(mod, cpu_device):
    x = np.arange(1000, dtype=np.float32)
    y = np.ones_like(x)
    out = np.empty_like(x)
    mod.saxpy[(1000 + 255) // 256, 256](out, x, y, 2.0, 1000)
    np.testing.assert_array_equal(out, np.float32(2.0) * x + y)
    mod.saxpy[4, 256](out, x, y, 2.0, 1000, stream=None, shared_mem=0)


@pytest.mark.parametrize("grid,block", [((2, 3, 2), (4, 2, 3)), ((8,), (1, 4)), (1, (8, 6, 5)),
                                        ((1, 1), (8, 6, 5))])
def test_grid_block_forms(mod, cpu_device, grid, block):
    out = np.full((5, 6, 8), -1, np.int32)
    mod.geom[grid, block](out)
    z, y, x = np.meshgrid(np.arange(5), np.arange(6), np.arange(8), indexing="ij")
    g = (grid,) if isinstance(grid, int) else grid
    b = (block,) if isinstance(block, int) else block
    g = tuple(g) + (1,) * (3 - len(g))
    b = tuple(b) + (1,) * (3 - len(b))
    covered = (x < g[0] * b[0]) & (y < g[1] * b[1]) & (z < g[2] * b[2])
    np.testing.assert_array_equal(out, np.where(covered, x + 10 * y + 100 * z, -1))


def test_four_dim_grid_or_block_is_a_launch_error(mod, cpu_device):
    out = np.zeros((1, 1, 1), np.int32)
    for grid, block in [((1, 1, 1, 1), 1), (1, (1, 1, 1, 1)), ((), 1), (1, 1025), (1, (32, 33)),
                        (0, 1), (1.0, 1)]:
        with pytest.raises(pyptx.LaunchError):
            mod.geom[grid, block](out)


def test_read_only_input_and_copy_back_only_written(mod, cpu_device):
    x = np.arange(64, dtype=np.float32)
    y = np.ones(64, np.float32)
    x.flags.writeable = False
    y.flags.writeable = False
    out = np.zeros(64, np.float32)
    mod.saxpy[1, 64](out, x, y, 3.0, 64)
    np.testing.assert_array_equal(out, 3 * np.arange(64, dtype=np.float32) + 1)
    ro = np.zeros(64, np.float32)
    ro.flags.writeable = False
    with pytest.raises(pyptx.LaunchError, match="'out'"):
        mod.saxpy[1, 64](ro, out, y, 3.0, 64)


def test_device_array_stays_resident(mod, cpu_device):
    x = np.arange(100, dtype=np.float32)
    dx = pyptx.to_device(x)
    assert isinstance(dx, pyptx.DeviceArray)
    assert dx.shape == (100,) and dx.dtype == np.float32
    dout = pyptx.to_device(np.zeros(100, np.float32))
    for _ in range(3):                            # out = 2*out + x, three times, on the device
        mod.saxpy[1, 128](dout, dout, dx, 2.0, 100)
    np.testing.assert_array_equal(dout.copy_to_host(), 7 * x)
    np.testing.assert_array_equal(dx.copy_to_host(), x)
    x[:] = -1                                     # the device copy is independent of the source
    np.testing.assert_array_equal(dx.copy_to_host(), np.arange(100, dtype=np.float32))
    with pytest.raises(pyptx.LaunchError, match="'x'"):
        mod.saxpy[1, 128](dout, pyptx.to_device(np.zeros(100, np.float64)), dx, 2.0, 100)


class FakeGpuArray:
    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (1234, False),
                                         "strides": None, "version": 3}


def test_cuda_array_interface_on_the_cpu_executor_is_a_launch_error(mod, cpu_device):
    out = np.zeros(4, np.float32)
    with pytest.raises(pyptx.LaunchError, match="'x'.*CPU executor"):
        mod.saxpy[1, 4](out, FakeGpuArray(4), out, 1.0, 4)


def test_scalar_conversion_and_ranges(mod, cpu_device):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = np.zeros(6, np.float64)
    mod.mix[1, 32](out, x, True, -3, 250, 2**40, 2)            # int → f32 param is fine
    np.testing.assert_array_equal(out, np.arange(6) * 2 - 3 + 250 + 2.0**40)
    mod.mix[1, 32](out, x, np.bool_(False), np.int8(1), np.uint8(0), 0, 0.5)
    np.testing.assert_array_equal(out, -(np.arange(6) * 0.5 + 1))
    before = out.copy()
    bad = [((1,), "flag"), ((True, 128), "k"), ((True, -129), "k"), ((True, 1, 256), "b"),
           ((True, 1, -1), "b"), ((True, 1, 1, 2**63), "big"), ((True, 1.0), "k"),
           ((True, 1, 1, 1.5), "big"), ((True, 1, 1, 1, 1e39), "s"), ((True, 1, 1, 1, "2"), "s"),
           ((True, 1, 1, 1, True), "s"), ((None,), "flag")]
    for vals, name in bad:
        args = list(vals) + [0] * (5 - len(vals))
        if name != "s" and len(vals) < 5:
            args[4] = 1.0
        with pytest.raises(pyptx.LaunchError, match=f"'{name}'"):
            mod.mix[1, 32](out, x, *args)
    np.testing.assert_array_equal(out, before)


def test_bad_arrays_name_the_parameter_and_nothing_runs(mod, cpu_device):
    x = np.ones(8, np.float32)
    out = np.full(8, 5.0, np.float32)
    cases = [
        ((out, x.astype(np.float64), x, 1.0, 8), "x"),
        ((out, x, x.reshape(2, 4), 1.0, 8), "y"),
        ((np.broadcast_to(np.float32(1), (8,)), x, x, 1.0, 8), "out"),   # stride 0, written
        ((out, x, [1.0] * 8, 1.0, 8), "y"),
        ((out, x, x, 1.0), "n"),
        ((out, x, x, 1.0, 8, 9), "extra"),
        ((out, x, x, 1.0, 2**31), "n"),
    ]
    for args, name in cases:
        with pytest.raises(pyptx.LaunchError, match=name):
            mod.saxpy[1, 8](*args)
        np.testing.assert_array_equal(out, 5.0)
    with pytest.raises(pyptx.LaunchError, match="1025|1024"):
        mod.saxpy[1, 1025](out, x, x, 1.0, 8)
    with pytest.raises(pyptx.LaunchError, match="shared"):
        mod.dyn[1, 8](out, shared_mem=48 * 1024 + 4)
    np.testing.assert_array_equal(out, 5.0)
    mod.dyn[1, 8](out, shared_mem=32)
    np.testing.assert_array_equal(out, np.arange(8)[::-1])


def test_keyword_kernel_arguments_are_launch_errors(mod, cpu_device):
    x = np.ones(8, np.float32)
    with pytest.raises(pyptx.LaunchError, match="'n'"):
        mod.saxpy[1, 8](x, x, x, 1.0, n=8)
    with pytest.raises(pyptx.LaunchError):
        mod.saxpy(x, x, x, 1.0, 8)                 # no [grid, block]


def test_device_selection(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    assert pyptx.device() == "cpu"
    r = _py("import pyptx; print(pyptx.device())", PYPTX_DEVICE="auto")
    assert r.stdout.strip() in ("cpu", "gpu")


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="a GPU driver is present")
def test_gpu_required_without_gpu_is_a_device_error(tmp_path):
    code = ("import numpy as np, pyptx\nimport stdlib_kernels as sk\n"
            "try:\n    sk.swiglu_kernel[1, 32](np.zeros(4, np.float32), np.ones(4, np.float32),"
            " np.ones(4, np.float32))\n"
            "except pyptx.DeviceError as e:\n    print('DEVICE', e)\n")
    r = _py(code, PYPTX_DEVICE="gpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DEVICE") and len(r.stdout.strip()) > 20


def test_memory_fault_carries_where(mod, cpu_device):
    out = np.zeros(64, np.float32)
    with pytest.raises(pyptx.MemoryFault) as ei:
        mod.oob[2, 32](out, 10)
    e = ei.value
    assert isinstance(e, pyptx.PyptxError)
    assert e.kernel == "oob" and isinstance(e.ptx_line, int) and e.ptx_line > 0
    assert tuple(e.block)[:1] == (1,) and tuple(e.thread)[0] == 22
    assert (np.asarray(out) == 0).all()


def test_partial_barrier_is_a_launch_error(mod, cpu_device):
    with pytest.raises(pyptx.LaunchError, match="bar.sync|barrier"):
        mod.partial_barrier[1, 32](np.zeros(32, np.float32))


def test_cpu_executor_prints(mod, cpu_device, capfd):
    mod.talk[2, 4](np.zeros(1, np.int32), 1.5)
    out = capfd.readouterr().out
    assert "hello 0 1.500000" in out and "hello 1 1.500000" in out


# ---- §5 command line ------------------------------------------------------------------------------

CLI_SRC = '''
import pyptx
from pyptx import f32, i32

@pyptx.kernel
def k(out: f32[:], n: i32, A: pyptx.constexpr, B: pyptx.constexpr, C: pyptx.constexpr):
    i = pyptx.grid(1)
    if i < n and C:
        out[i] = f32(A) * B
'''


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pyptx", *args], capture_output=True, text=True,
                          env=_env(PYPTX_NO_CACHE="1"), timeout=120)


def test_cli_compile_flags(tmp_path):
    f = tmp_path / "cli_k.py"
    f.write_text(CLI_SRC)
    r = _cli("compile", f"{f}:k", "-D", "A=3", "-D", "B=2.5", "-D", "C=True", "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    assert ".target sm_90" in r.stdout and ".visible .entry k(" in r.stdout
    m = load_module(CLI_SRC)
    want = pyptx.compile(m.k, arch="sm_90", constexprs=dict(A=3, B=2.5, C=True)).ptx
    assert r.stdout == want
    r = _cli("compile", f"{f}:k", "-D", "A=3", "-D", "B=2.5", "-D", "C=False", "--ir")
    assert r.returncode == 0 and ".visible" not in r.stdout and r.stdout.strip()
    o = tmp_path / "out.ptx"
    r = _cli("compile", f"{f}:k", "-DA=1", "-DB=1.0", "-DC=1", "-o", str(o))
    assert r.returncode == 0 and r.stdout == "" and f".target {default_arch()}" in o.read_text()
    r2 = _cli("check", str(o))
    assert r2.returncode == 0 and "registers" in r2.stdout
    r3 = _cli("compile", f"{f}:k", "-D", "A=3")           # B, C missing → a CompileError
    assert r3.returncode != 0 and "constexpr" in r3.stderr and "Traceback" not in r3.stderr


def test_cli_info():
    r = _cli("info")
    assert r.returncode == 0
    if not os.path.exists("/dev/nvidiactl"):
        assert "no GPU" in r.stdout and "CPU executor" in r.stdout


def test_cli_check_errors_are_clear(tmp_path):
    good = tmp_path / "ok.ptx"
    good.write_text(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n")
    r = _cli("check", str(good), "--arch", "sm_90")
    assert r.returncode == 0 and "OK for sm_90" in r.stdout
    r = _cli("check", str(tmp_path / "missing.ptx"))
    assert r.returncode != 0 and "missing.ptx" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.ptx"
    bad.write_text(good.read_text().replace("ret;", "bogus;"))
    r = _cli("check", str(bad))
    assert r.returncode == 1 and "rejected" in r.stderr and "bogus" in r.stderr
    r = subprocess.run([sys.executable, "-m", "pyptx", "check", str(good)], capture_output=True,
                       text=True, env=_env(PYPTX_PTXAS=str(tmp_path / "nope"), PATH=""),
                       timeout=120)
    assert r.returncode == 1 and "no ptxas found" in r.stderr and "rejected" not in r.stderr


def test_ptxas_lookup_does_not_cache_a_miss(monkeypatch, tmp_path):
    from pyptx import toolchain
    exe = tmp_path / "ptxas"
    monkeypatch.setenv("PYPTX_PTXAS", str(exe))
    assert toolchain.find_ptxas() is None
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    assert toolchain.find_ptxas() == str(exe)      # installed later: found now
