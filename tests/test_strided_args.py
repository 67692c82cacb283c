"""Non-contiguous array arguments (SPEC 8.5): numpy strided views, transposes, Fortran order,
negative and zero strides launch without a copy on the CPU executor — the strides travel with
the array, in a strided specialisation of the kernel — and through staged contiguous copies on
the GPU path (here the fake driver, which runs the PTX on the CPU executor); DLPack and
`__cuda_array_interface__` device arrays are used in place with their strides.  A contiguous
argument keeps the kernel's parameter list and PTX byte for byte (docs/launching.md)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import pyptx
from pyptx import LaunchError, f32, i32
from pyptx.runtime import driver, streams

from fake_driver import FakeDriver, on_cpu_or_fake_gpu, on_fake_gpu

rng = np.random.default_rng(85)


@pytest.fixture(params=["cpu", "gpu"])
def dev(request, monkeypatch):
    """The CPU executor, or the GPU path on the fake driver (which runs the launch's PTX on the
    CPU executor, on its own device memory)."""
    yield from on_cpu_or_fake_gpu(request, monkeypatch)


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@pyptx.kernel
def add1(x: f32[:, :], out: f32[:, :]):
    i, j = pyptx.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = x[i, j] + 1.0


@pyptx.kernel
def inc(x):                                    # unannotated: the layout is inferred
    i = pyptx.grid(1)
    if i < x.shape[0]:
        x[i] += 1.0


@pyptx.kernel
def axpy(out, x, a: f32):
    """out = a * x + out over every element of a 1- to 4-d array (flat index unravelled)."""
    t = pyptx.grid(1)
    if t < out.size:
        if out.ndim == 1:
            out[t] = a * x[t] + out[t]
        elif out.ndim == 2:
            i, j = t // out.shape[1], t % out.shape[1]
            out[i, j] = a * x[i, j] + out[i, j]
        elif out.ndim == 3:
            k = t % out.shape[2]
            r = t // out.shape[2]
            i, j = r // out.shape[1], r % out.shape[1]
            out[i, j, k] = a * x[i, j, k] + out[i, j, k]
        else:
            m = t % out.shape[3]
            r = t // out.shape[3]
            k = r % out.shape[2]
            r = r // out.shape[2]
            i, j = r // out.shape[1], r % out.shape[1]
            out[i, j, k, m] = a * x[i, j, k, m] + out[i, j, k, m]


def _blocks(n, tpb=64):
    return max(1, -(-n // tpb))


def _launch2d(k, x, out, shape=None):
    m, n = shape or x.shape
    k[(_blocks(m, 8), _blocks(n, 8)), (8, 8)](x, out)


BASE = np.arange(7 * 12, dtype=np.float32).reshape(7, 12) * 0.5 - 3.0

LAYOUTS = {
    "contiguous": lambda a: a,
    "step": lambda a: a[:, ::2],
    "rows-and-cols": lambda a: a[1::3, 2:11:4],
    "transpose": lambda a: a.T,
    "fortran": np.asfortranarray,
    "negative": lambda a: a[::-1, ::-2],
    "negative-transpose": lambda a: a[::-2].T[::-1],
    "broadcast": lambda a: np.broadcast_to(a[2], a.shape),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_annotated_kernel_reads_any_layout(dev, layout):
    x = LAYOUTS[layout](BASE.copy())
    out = np.full(x.shape, np.nan, np.float32)
    _launch2d(add1, x, out)
    np.testing.assert_array_equal(out, x + np.float32(1))


@pytest.mark.parametrize("layout", sorted(set(LAYOUTS) - {"broadcast"}))
def test_writes_through_strided_views_land_in_the_callers_array(dev, layout):
    x = rng.standard_normal((12, 12)).astype(np.float32)
    dest = np.full((9, 10), -7.0, np.float32)
    out = LAYOUTS[layout](dest)          # a view of dest (Fortran order is a copy: compare it)
    want_dest = dest.copy()
    want_view = LAYOUTS[layout](want_dest)
    src = np.ascontiguousarray(x[:out.shape[0], :out.shape[1]])
    want_view[...] = src + np.float32(1)
    _launch2d(add1, src, out)
    np.testing.assert_array_equal(out, want_view)
    np.testing.assert_array_equal(dest, want_dest)       # untouched elements stay as they were


def test_in_place_increment_of_strided_1d_views(dev):
    b = np.zeros(20, np.float32)
    inc[1, 32](b[::-2])             # 19, 17, ..., 1
    inc[1, 32](b[1::3])             # 1, 4, ..., 19
    inc[1, 32](b[2:3])              # contiguous
    want = np.zeros(20, np.float32)
    want[::-2] += 1
    want[1::3] += 1
    want[2:3] += 1
    np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_one_to_four_dimensions(dev, ndim):
    shape = (5, 4, 3, 6)[:ndim]
    big = rng.standard_normal(tuple(2 * s + 1 for s in shape)).astype(np.float32)
    dest = rng.standard_normal(tuple(3 * s for s in shape)).astype(np.float32)
    x = big[tuple(slice(None, None, -2) for _ in shape)][tuple(slice(0, s) for s in shape)]
    out = dest[tuple(slice(1, None, 3) for _ in shape)]
    out = out.transpose(tuple(reversed(range(ndim))))
    x = x.transpose(tuple(reversed(range(ndim))))
    assert not x.flags.c_contiguous and not out.flags.c_contiguous or ndim == 1
    want_dest = dest.copy()
    want_dest[tuple(slice(1, None, 3) for _ in shape)] += \
        (np.float32(0.5) * x).transpose(tuple(reversed(range(ndim))))
    axpy[_blocks(x.size), 64](out, x, 0.5)
    np.testing.assert_allclose(dest, want_dest, rtol=1e-6, atol=1e-6)


def test_zero_stride_arrays_are_read_but_never_written(dev):
    row = np.arange(12, dtype=np.float32)
    x = np.broadcast_to(row, (7, 12))
    out = np.zeros((7, 12), np.float32)
    _launch2d(add1, x, out)
    np.testing.assert_array_equal(out, np.broadcast_to(row + 1, (7, 12)))
    with pytest.raises(LaunchError, match=r"'out'.*broadcast array \(stride 0 along dimension "
                                          r"0.*writes would race"):
        _launch2d(add1, out, x)
    # writable as numpy sees it, but still one location per row: refused as well
    w = np.lib.stride_tricks.as_strided(row, (4, 12), (0, 4))
    assert w.flags.writeable
    with pytest.raises(LaunchError, match=r"'x'.*stride 0 along dimension 0"):
        inc[1, 32](w[:, 0])


def test_read_only_strided_views_are_refused_for_written_parameters(dev):
    a = BASE.copy()
    a.flags.writeable = False
    with pytest.raises(LaunchError, match=r"'out'.*read-only"):
        _launch2d(add1, BASE, a[:, ::2])


# ---- the fast path: contiguous arguments keep their parameter list and PTX ----------------

def _fresh(k):
    return pyptx.kernel(k.py_func)


def test_contiguous_launch_keeps_its_ptx_and_strided_one_adds_strides(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    k = _fresh(add1)
    before = pyptx.compile(k).ptx
    assert "_stride" not in before
    x = BASE.copy()
    _launch2d(k, x, np.empty_like(x))
    _launch2d(k, x[:, ::3], np.empty((7, 4), np.float32))
    _launch2d(k, x, np.empty_like(x))
    plans = k._pyptx_binder.plans
    assert len(plans) == 2                               # one contiguous, one strided
    contiguous = plans["cpu"].ck
    strided, = [p.ck for key, p in plans.items() if key != "cpu"]
    assert contiguous.ptx == before
    assert [a.strided for a in contiguous.signature] == [False, False]
    assert [a.strided for a in strided.signature] == [True, False]
    names = [p.name for p in strided.params]
    assert names[:5] == ["x", "x_shape0", "x_shape1", "x_stride0", "x_stride1"]
    assert [p.ptx_type for p in strided.params[3:5]] == ["s64", "s64"]
    assert [p.name for p in contiguous.params] == ["x", "x_shape0", "x_shape1", "out",
                                                   "out_shape0", "out_shape1"]


def test_inferred_layout_is_part_of_the_plan_key(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    k = _fresh(inc)
    b = np.zeros(8, np.float32)
    k[1, 32](b)
    k[1, 32](b[::2])
    types = {repr(v) for key, _p in k._pyptx_binder.plans.items() for _n, v in key[2]}
    assert types == {"f32[:]", "f32[:](A)"}


def test_declared_strided_layout_takes_contiguous_arrays_too(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")

    @pyptx.kernel
    def neg(x: f32[:].strided, n: i32):
        i = pyptx.grid(1)
        if i < n:
            x[i] = -x[i]
    a = np.arange(6, dtype=np.float32)
    neg[1, 32](a, 6)
    neg[1, 32](a[::-1], 6)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32))
    assert repr(f32[:, :].strided) == "f32[:, :](A)" and repr(f32[:, :]) == "f32[:, :]"


def test_vector_loads_of_a_strided_argument_are_a_clear_compile_error(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")

    @pyptx.kernel
    def v4(x: f32[:], out: f32[:]):
        i = pyptx.grid(1)
        if i < 4:
            v = pyptx.vload(x, 4 * i, 4)
            out[i] = v[0]
    v4[1, 4](np.zeros(16, np.float32), np.zeros(4, np.float32))
    with pytest.raises(pyptx.CompileError, match="non-contiguous"):
        v4[1, 4](np.zeros(32, np.float32)[::2], np.zeros(4, np.float32))


# ---- the GPU path: staged copies, device arrays with strides -------------------------------

def test_gpu_stages_a_contiguous_copy_and_copies_back_into_the_view(fake):
    x = BASE.copy()
    dest = np.zeros((7, 12), np.float32)
    _launch2d(add1, x.T[::-1], dest.T)
    np.testing.assert_array_equal(dest.T, x.T[::-1] + np.float32(1))
    launch = fake.launches[-1]
    # the strides of the staged copy (C order, elements), not those of the host view
    assert (launch.params["x_stride0"], launch.params["x_stride1"]) == (7, 1)
    assert (launch.params["out_stride0"], launch.params["out_stride1"]) == (7, 1)


class ForeignGpuArray:
    """A CuPy/PyTorch-like device array: pointer, shape, strides in bytes."""

    def __init__(self, ptr, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


def test_cuda_array_interface_strides_are_bytes_and_used_in_place(fake):
    driver.context()
    a = rng.standard_normal((6, 8)).astype(np.float32)
    px = int(fake.cuMemAlloc(a.nbytes)[1])
    po = int(fake.cuMemAlloc(a.nbytes)[1])
    fake.view(px, np.float32, a.size)[:] = a.reshape(-1)
    fake.view(po, np.float32, a.size)[:] = 0
    xt = ForeignGpuArray(px, (8, 6), "<f4", (4, 32))          # a.T in place
    ot = ForeignGpuArray(po + 4, (6, 4), "<f4", (32, 8))      # columns 1, 3, 5, 7
    copies = fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyHtoDAsync")
    _launch2d(add1, xt, ForeignGpuArray(po, (8, 6), "<f4", (4, 32)), (8, 6))
    streams.synchronize()
    got = fake.view(po, np.float32, a.size).reshape(6, 8)
    np.testing.assert_array_equal(got, a + np.float32(1))
    launch = fake.launches[-1]
    assert launch.params["x"] == px and (launch.params["x_stride0"],
                                          launch.params["x_stride1"]) == (1, 8)
    _launch2d(add1, np.ones((6, 4), np.float32), ot, (6, 4))
    streams.synchronize()
    got = fake.view(po, np.float32, a.size).reshape(6, 8)
    np.testing.assert_array_equal(got[:, 1::2], 2.0)
    np.testing.assert_array_equal(got[:, ::2], a[:, ::2] + np.float32(1))
    assert fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyHtoDAsync") == copies + 1
    with pytest.raises(LaunchError, match=r"'x'.*not multiples of its 4-byte elements"):
        _launch2d(add1, ForeignGpuArray(px, (6, 4), "<f4", (32, 6)), ot, (6, 4))


def test_dlpack_strided_tensors_keep_their_strides(monkeypatch):
    from test_dlpack import DLPackOnly            # a host tensor: a CPU-executor argument
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    x = rng.standard_normal((6, 8)).astype(np.float32)
    out = np.zeros((8, 6), np.float32)
    _launch2d(add1, DLPackOnly(x.T), DLPackOnly(out), (8, 6))
    np.testing.assert_array_equal(out, x.T + np.float32(1))


# ---- Numba surface: a corpus kernel with strided views ---------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The Numba corpus (tests/numba_corpus/kernels.py) and its pyptx-spelling copy."""
    here = Path(__file__).parent / "numba_corpus"
    from numba_corpus import kernels as numba_style
    from numba_corpus.translate import to_pyptx
    path = tmp_path_factory.mktemp("strided_corpus") / "strided_pyptx_corpus.py"
    path.write_text(to_pyptx((here / "kernels.py").read_text()))
    spec = importlib.util.spec_from_file_location("strided_pyptx_corpus", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return {"numba": numba_style, "pyptx": m}


@pytest.mark.parametrize("style", ["numba", "pyptx"])
def test_numba_corpus_kernels_take_strided_views(dev, corpus, style):
    m = corpus[style]
    a = rng.standard_normal((10, 14)).astype(np.float32)
    b = rng.standard_normal((14, 10)).astype(np.float32)
    c = np.full((12, 20), np.nan, np.float32)
    # mat_add(a, b, c): c = a + b with b transposed and reversed, c every other column
    view = c[:10, ::2]
    m.mat_add[(2, 2), (8, 8)](a[:, :10], b[:10].T[::-1], view)
    np.testing.assert_array_equal(view, a[:, :10] + b[:10].T[::-1])
    assert np.isnan(c[:, 1::2]).all() and np.isnan(c[10:]).all()
    # matmul_naive(a, b, c) on a Fortran-order a and a transposed b
    out = np.zeros((10, 10), np.float32, order="F")
    m.matmul_naive[(2, 2), (8, 8)](np.asfortranarray(a), np.ascontiguousarray(b.T).T, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # saxpy's cuda.jit signature declares float32[:]: a strided view selects its strided form
    x, y = rng.standard_normal(40).astype(np.float32), rng.standard_normal(20).astype(np.float32)
    res = np.zeros(40, np.float32)
    m.saxpy[1, 32](np.float32(2.0), x[::2], y, res[::-2])
    np.testing.assert_allclose(res[::-2], 2 * x[::2] + y, rtol=1e-6)
