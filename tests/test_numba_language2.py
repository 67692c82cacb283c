"""Numba parity II (language): loops over tuples, `enumerate`/`zip`, module-level numpy arrays
as constant memory, `@cuda.jit` functions called from kernels, slices of dynamic shared memory
and `fastmath=True`.  Every kernel runs on the CPU executor against numpy."""
import linecache
import math
import textwrap

import numpy as np
import pytest

import pyptx
from pyptx import cachekey, cuda, f32, i32

RNG = np.random.default_rng(11)
WEIGHTS = (0.5, -1.25, 2.0)
TAB = np.arange(8, dtype=np.float32) * np.float32(1.5)
GRID = np.arange(12, dtype=np.int32).reshape(3, 4)
CPLX = np.zeros(4, np.complex128)


def _compile_src(body: str, params="x: f32[:], out: f32[:]", ns=None):
    """A pyptx kernel from source text (so errors carry a real line and column)."""
    src = f"def k({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    fname = f"<numba-lang2-{abs(hash(src))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    g = {"pyptx": pyptx, "f32": f32, "i32": i32, "np": np, "cuda": cuda, "TAB": TAB,
         "CPLX": CPLX, "WEIGHTS": WEIGHTS, **(ns or {})}
    exec(compile(src, fname, "exec"), g)
    return pyptx.compile(pyptx.kernel(g["k"]))


def _error(body: str, params="x: f32[:], out: f32[:]", ns=None) -> pyptx.CompileError:
    with pytest.raises(pyptx.CompileError) as ei:
        _compile_src(body, params, ns)
    return ei.value


# ---- 1. loops over tuples -------------------------------------------------------------------

@cuda.jit
def warp_reduce(x, out):
    i = cuda.grid(1)
    v = x[i]
    for d in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, d)
    if i % 32 == 0:
        out[i // 32] = v


def test_tuple_of_constants_unrolls_with_immediate_shuffle_offsets(cpu_device):
    x = RNG.random(64, np.float32)
    out = np.full(2, np.nan, np.float32)
    warp_reduce[1, 64](x, out)
    np.testing.assert_allclose(out, x.reshape(2, 32).sum(1), rtol=1e-5)
    ptx = pyptx.compile(warp_reduce, signature="f32[:], f32[:]").ptx
    shfl = [ln for ln in ptx.splitlines() if "shfl.sync.down" in ln]
    assert len(shfl) == 5
    for d, ln in zip((16, 8, 4, 2, 1), shfl):
        assert f", {d}, 0x1f" in ln or f", {d}, 31" in ln          # an immediate offset


@pyptx.kernel
def tuple_values(x: f32[:], out: f32[:], y: f32[:]):
    i = pyptx.thread_idx.x
    s = 0.0
    for v in (x[i], 2 * x[i], WEIGHTS[1]):      # run-time values and a module constant
        s += v
    for a in (x, y):                            # arrays: the name is rebound per element
        s += a[i]
    for p, q in ((1, 2.0), (3, 4.0)):           # tuple targets
        s += p * q
    for d in (1, 2, 3, 4):                      # continue / break keep their meaning
        if d == 2:
            continue
        if d == 4:
            break
        s += d * 100.0
    out[i] = s + d                              # the loop variable keeps its last value


def test_tuple_of_runtime_values_arrays_and_jumps(cpu_device):
    x, y = RNG.random(32, np.float32), RNG.random(32, np.float32)
    out = np.full(32, np.nan, np.float32)
    tuple_values[1, 32](x, out, y)
    exp = x + 2 * x + np.float32(-1.25) + x + y + (2.0 + 12.0) + 400.0 + 4
    np.testing.assert_allclose(out, exp, rtol=1e-5)


# ---- 2. enumerate and zip ---------------------------------------------------------------------

@cuda.jit
def enum_zip(x, out, n):
    i = cuda.grid(1)
    s = 0.0
    for j, d in enumerate((3, 5, 7)):
        s += x[i] * d + j
    for a, b in zip((1, 2), (10.0, 20.0, 30.0)):     # as long as the shortest
        s += a * b
    for k, (w, c) in enumerate(zip(WEIGHTS, (1, 2, 3)), start=1):
        s += k * w * c
    for k, v in enumerate(range(2, n, 2)):            # run-time range, counted
        s += k * v
    pair = (0, 0)
    for pair in enumerate(range(n), 10):              # one name: a tuple
        s += pair[0] - pair[1]
    out[i] = s


def test_enumerate_and_zip(cpu_device):
    x = RNG.random(32, np.float32)
    out = np.full(32, np.nan, np.float32)
    n = 9
    enum_zip[1, 32](x, out, np.int32(n))
    exp = x * 15 + 3 + 50 + sum(k * w * c for k, (w, c) in enumerate(zip(WEIGHTS, (1, 2, 3)), 1))
    exp = exp + sum(k * v for k, v in enumerate(range(2, n, 2))) + 10 * n
    np.testing.assert_allclose(out, exp, rtol=1e-5)


@pytest.mark.parametrize("body,phrase", [
    ("for v in x:\n    out[0] = v\n", "range(len(a))"),
    ("for a, b in zip(range(3), WEIGHTS):\n    out[0] = a\n", "enumerate"),
    ("n = x.shape[0]\nfor k, v in enumerate(WEIGHTS, n):\n    out[0] = v\n", "compile-time int"),
    ("for i, j in range(3):\n    out[0] = i\n", "single name"),
    ("t = zip(x, x)\n", "iterate over an array"),
])
def test_iteration_errors_are_located(body, phrase):
    err = _error(body)
    assert phrase in str(err) and err.lineno >= 2


# ---- 3. module-level numpy arrays are constant memory -------------------------------------------

@cuda.jit
def read_tables(idx, out):
    i = cuda.grid(1)
    if i < out.size:
        j = idx[i]
        out[i] = TAB[j % 8] + GRID[j % 3, j % 4] + TAB.size + len(GRID)


def test_module_array_is_read_as_const_memory(cpu_device):
    idx = RNG.integers(0, 100, 40).astype(np.int32)
    out = np.full(40, np.nan, np.float32)
    read_tables[2, 32](idx, out)
    np.testing.assert_array_equal(out, TAB[idx % 8] + GRID[idx % 3, idx % 4] + 8 + 3)
    ptx = pyptx.compile(read_tables, signature="i32[:], f32[:]").ptx
    assert ".const .align" in ptx and "ld.const.f32" in ptx and "ld.const.s32" in ptx


def test_module_array_and_const_array_share_one_table():
    ck = _compile_src("out[0] = TAB[1] + pyptx.const_array(TAB)[2] + cuda.const.array_like(TAB)[3]")
    assert ck.ptx.count(".const .align") == 1


def test_module_array_is_frozen_and_keyed_by_its_bytes():
    table = np.array([1.0, 2.0, 3.0], np.float32)

    def body(out: f32[:]):
        out[pyptx.thread_idx.x] = table[pyptx.thread_idx.x]
    k = pyptx.kernel(body)
    key = cachekey.dependencies(body)
    ptx = pyptx.compile(k).ptx
    table[:] = (-1.0, 4.0, 8.0)
    assert pyptx.compile(k).ptx == ptx                   # frozen in this Kernel, as in Numba
    assert cachekey.dependencies(body) != key            # ... the disk key sees the new bytes
    assert pyptx.compile(pyptx.kernel(body)).ptx != ptx  # a new Kernel compiles the new data


def test_module_array_errors():
    err = _error("out[0] = CPLX[0].real")
    assert "'CPLX'" in str(err) and "astype" in str(err) and err.lineno == 2
    err = _error("TAB[0] = 1.0")
    assert "read-only" in str(err)


# ---- 4. @cuda.jit functions called from kernels ------------------------------------------------

@cuda.jit
def dev_add(a, b):
    return a + b


@cuda.jit("void(float32[:], float32[:])")
def dev_scale(a, out):                 # a void kernel with a signature, called for its stores
    out[cuda.grid(1)] = a[cuda.grid(1)] * 3


@cuda.jit
def calls_jit_functions(x, out, tmp):
    i = cuda.grid(1)
    if i < x.size:
        dev_scale(x, tmp)
        out[i] = dev_add(x[i], 1.0) + tmp[i]


def test_cuda_jit_function_called_from_a_kernel_is_a_device_function(cpu_device):
    x = RNG.random(32, np.float32)
    out, tmp = np.full(32, np.nan, np.float32), np.zeros(32, np.float32)
    calls_jit_functions[1, 32](x, out, tmp)
    np.testing.assert_allclose(out, x + 1 + 3 * x, rtol=1e-6)
    deps = repr(cachekey.dependencies(calls_jit_functions.py_func))
    assert "dev_add" in deps and "kernel" in deps      # the callee's own source is in the key


@pyptx.kernel
def pyptx_kernel(x: f32[:]):
    x[0] = 1.0


def test_pyptx_kernel_still_cannot_be_called():
    err = _error("pyptx_kernel(x)", ns={"pyptx_kernel": pyptx_kernel})
    assert "@pyptx.func" in str(err) and err.lineno == 2


# ---- 5. slices of dynamic shared memory --------------------------------------------------------

@cuda.jit
def two_dynamic_arrays(x, out, n):
    s = cuda.shared.array(0, dtype=np.float32)
    a = s[:n]
    b = s[n:]
    evens = b[::2]
    t = cuda.threadIdx.x
    a[t] = x[t]
    b[t] = 2 * x[t]
    cuda.syncthreads()
    out[t] = a[n - 1 - t] + b[t] + len(a) + evens[t // 2]


def test_dynamic_shared_slices(cpu_device):
    x = RNG.random(32, np.float32)
    out = np.full(32, np.nan, np.float32)
    two_dynamic_arrays[1, 32, 0, 2 * 32 * 4](x, out, np.int32(32))
    t = np.arange(32)
    np.testing.assert_allclose(out, x[::-1] + 2 * x + 32 + 2 * x[2 * (t // 2)], rtol=1e-6)


def test_dynamic_shared_slice_errors():
    err = _error("s = pyptx.shared.array(0, f32)\na = s[-4:]\n")
    assert "no known length" in str(err) and err.lineno == 3
    err = _error("s = pyptx.shared.array(0, f32)\na = s[::-1]\n")
    assert "positive" in str(err)
    err = _error("s = pyptx.shared.array(0, f32)\nn = s[4:].shape[0]\n")
    assert "pass its length" in str(err)


# ---- 6. fastmath ----------------------------------------------------------------------------------

@cuda.jit("void(float32[:], float32[:])", fastmath=True)
def fast(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = (1.0 / x[i] + math.sqrt(x[i]) + math.exp(x[i]) + math.log(x[i])
                  + math.sin(x[i]) + x[i] // 0.25)


def test_fastmath_lowers_to_approximate_instructions(cpu_device):
    ptx = pyptx.compile(fast).ptx
    for op in ("div.full.f32", "sqrt.approx.f32", "ex2.approx", "lg2.approx.f32",
               "sin.approx.f32"):
        assert op in ptx, op
    assert "div.rn.f32" in ptx        # x // 0.25: pyptx's exact floor division is kept
    x = RNG.random(64).astype(np.float32) + np.float32(0.5)
    out = np.full(64, np.nan, np.float32)
    fast[2, 32](x, out)
    exp = 1 / x + np.sqrt(x) + np.exp(x) + np.log(x) + np.sin(x) + x // np.float32(0.25)
    np.testing.assert_allclose(out, exp, rtol=1e-5)


def test_fastmath_is_an_option_of_compile_and_kernel():
    def body(x: f32[:], out: f32[:]):
        out[0] = x[0] / x[1] + pyptx.math.sqrt(x[2])
    exact = pyptx.compile(body).ptx
    assert "approx" not in exact and "div.full" not in exact and "div.rn.f32" in exact
    k = pyptx.kernel(body)
    assert pyptx.compile(k).ptx == exact
    assert "div.full.f32" in pyptx.compile(k, fastmath=True).ptx     # in-memory key has it
    assert pyptx.compile(k).ptx == exact
    assert "sqrt.approx.f32" in pyptx.compile(pyptx.kernel(fastmath=True)(body)).ptx
    assert "sqrt.approx.f32" in pyptx.compile(body, fastmath=True).ptx
    f64_ptx = pyptx.compile(body, signature="f64[:], f64[:]", fastmath=True).ptx
    assert "div.rn.f64" in f64_ptx and "approx" not in f64_ptx       # f64 stays exact
    with pytest.raises(pyptx.CompileError, match="fastmath must be True or False"):
        pyptx.compile(body, fastmath="yes")
