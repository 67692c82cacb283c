"""Numba-CUDA host code through `from pyptx import cuda` (SPEC 8.5, host side): signatures in
every form Numba takes, overloads, `fastmath=`, compare_and_swap, streams, events, `forall`,
pinned/mapped arrays, DeviceArray item/slice assignment and `copy_to_device`, Numba's type
names in `pyptx`, and `match_all_sync` in a partial warp.  Host APIs run on the CPU executor
and on the fake GPU driver (tests/fake_driver.py), where they must reach the driver."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import cuda

from fake_driver import FakeDriver, on_cpu_or_fake_gpu, on_fake_gpu


@pytest.fixture(params=["cpu", "fake"])
def where(request, monkeypatch):
    """The CPU executor, or the GPU path against the fake driver (yields the FakeDriver)."""
    yield from on_cpu_or_fake_gpu(request, monkeypatch)


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@cuda.jit
def fill(out, v):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = v


# ---- signatures ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sig,want", [
    ("void(float64[:], double)", "(f64[:], f64)"),
    ("void(f8[:], f8)", "(f64[:], f64)"),
    ("void(int64[:], i8)", "(i64[:], i64)"),
    ("void(uint8[:], u1)", "(u8[:], u8)"),
    ("void(float32[::1], float32)", "(f32[:], f32)"),
    ("void(int32[::1,:,:], int32)", "(i32[:, :, :], i32)"),
    ("void(float32[:, ::1], intp)", "(f32[:, :], i64)"),
    ("(float32[:], int_)", "(f32[:], i64)"),
    ("void(uint64[:],size_t)", "(u64[:], u64)"),
])
def test_signature_strings_with_numba_type_names(sig, want):
    args, ret = cuda.parse_signature(sig)
    assert ret is None and repr(args) == want


def test_signature_with_a_type_pyptx_lacks_says_so():
    with pytest.raises(ValueError, match="complex128"):
        cuda.jit("void(complex128[:])")(lambda x: None)


def _add_one(a, b):
    i = cuda.grid(1)
    if i < a.size:
        b[i] = a[i] + 1


@pytest.mark.parametrize("sig", [
    (cuda.int32[:], cuda.int32[:]),
    [(cuda.int32[:], cuda.int32[:])],
    cuda.void(cuda.int32[:], cuda.int32[:]),
    pyptx.void(pyptx.int32[:], pyptx.int32[:]),
    "void(int32[:], int32[::1])",
])
def test_signature_as_tuple_list_or_type_objects(cpu_device, sig):
    k = cuda.jit(sig)(_add_one)
    a = np.arange(5, dtype=np.int32)
    b = np.zeros(5, np.int32)
    k[1, 32](a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_kernel_signature_must_return_void():
    with pytest.raises(TypeError, match="void"):
        cuda.jit("int32(int32[:])")(lambda x: None)


@cuda.jit(["void(int64[:], int64)", "void(float64[:], float64)", "void(float32[:], float32)"])
def half_of(a, v):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = v / 2


def test_list_of_signatures_dispatches_on_argument_types(cpu_device):
    assert [repr(s) for s in half_of.signatures] == ["(i64[:], i64)", "(f64[:], f64)",
                                                      "(f32[:], f32)"]
    d = np.zeros(3)
    half_of[1, 32](d, 3.0)
    np.testing.assert_array_equal(d, 1.5)               # the float64 overload, not int64's
    n = np.zeros(3, np.int64)
    half_of[1, 32](n, 3)
    np.testing.assert_array_equal(n, 1)
    f = np.zeros(3, np.float32)
    half_of[1, 32](f, np.float32(5.0))
    np.testing.assert_array_equal(f, 2.5)
    f[:] = 0
    half_of[1, 32](f, 5.0)                               # a Python float converts to float32
    np.testing.assert_array_equal(f, 2.5)
    with pytest.raises(pyptx.LaunchError, match="no signature matches"):
        half_of[1, 32](np.zeros(3, np.int32), 1)


def test_overloads_on_the_fake_gpu(fake):
    d = cuda.to_device(np.zeros(4))
    half_of[1, 32](d, 7.0)
    np.testing.assert_array_equal(d.copy_to_host(), 3.5)


def test_fastmath_is_accepted(cpu_device):
    @cuda.jit(fastmath=True)
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = 1.0 / x[i] + x[i] ** 0.5
    x = np.random.default_rng(3).random(40).astype(np.float32) + np.float32(0.5)
    out = np.zeros_like(x)
    k[2, 32](x, out)
    np.testing.assert_allclose(out, 1 / x + np.sqrt(x), rtol=1e-6)
    assert k.fastmath


def test_fastmath_emits_approximate_instructions():
    import math

    @cuda.jit("void(float32[:], float32[:])", fastmath=True)
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = 1.0 / x[i] + math.sqrt(x[i])
    ptx = pyptx.compile(k).ptx
    assert "div.approx.f32" in ptx or "div.full.f32" in ptx
    assert "sqrt.approx.f32" in ptx


# ---- atomics -------------------------------------------------------------------------------------

@cuda.jit
def cas_first(a, old, expect, val):
    if cuda.grid(1) == 0:
        old[0] = cuda.atomic.compare_and_swap(a, expect, val)


@pytest.mark.parametrize("shape,dtype", [((3,), np.int32), ((2, 2), np.int64),
                                         ((2, 2, 2), np.uint32)])
def test_compare_and_swap_works_on_the_first_element(cpu_device, shape, dtype):
    a = np.zeros(shape, dtype)
    old = np.full(1, 99, dtype)
    cas_first[1, 32](a, old, dtype(0), dtype(5))        # matches: swapped
    assert a.flat[0] == 5 and old[0] == 0 and (a.ravel()[1:] == 0).all()
    cas_first[1, 32](a, old, dtype(1), dtype(7))        # does not match: unchanged
    assert a.flat[0] == 5 and old[0] == 5


def test_cas_with_an_index(cpu_device):
    @cuda.jit
    def k(a, old):
        i = cuda.grid(1)
        if i < a.size:
            old[i] = cuda.atomic.cas(a, i, i, 100 + i)
    a = np.array([0, 5, 2, 7], np.int32)
    old = np.zeros(4, np.int32)
    k[1, 32](a, old)
    np.testing.assert_array_equal(a, [100, 5, 102, 7])
    np.testing.assert_array_equal(old, [0, 5, 2, 7])


# ---- streams, events, launches -------------------------------------------------------------------

def test_stream_launch_forms(where):
    s = cuda.stream()
    d = cuda.device_array(40, np.float32)
    fill[2, 32, s](d, np.float32(2.5))
    s.synchronize()
    assert (d.copy_to_host(stream=s) == 2.5).all()
    fill[2, 32, s, 0](d, np.float32(-1.0))
    with s.auto_synchronize():
        host = d.copy_to_host()
    assert (host == -1.0).all()
    fill[2, 32, 0](d, np.float32(3.0))
    fill[2, 32, cuda.default_stream()](d, np.float32(4.0))
    cuda.synchronize()
    assert (d.copy_to_host() == 4.0).all()
    if where is not None:                               # the fake GPU: a real driver stream
        assert where.count("cuStreamCreate") == 1
        launch_streams = [int(l.stream) for l in where.launches]
        assert launch_streams[0] == s.handle != 0 and launch_streams[1] == s.handle
        assert launch_streams[2:] == [0, 0]
    else:
        assert s.handle == 0


def test_events_time_a_launch(where):
    s = cuda.stream()
    e0, e1 = cuda.event(), cuda.event(timing=True)
    d = cuda.to_device(np.zeros(64, np.float32), stream=s)
    e0.record(stream=s)
    fill[2, 32, s](d, np.float32(1.0))
    e1.record(s)
    e1.synchronize()
    e0.wait(s)
    ms = cuda.event_elapsed_time(e0, e1)
    assert isinstance(ms, float) and ms >= 0.0
    assert e0.elapsed_time(e1) == pytest.approx(ms) and e1.query()
    if where is not None:
        assert where.count("cuEventRecord") >= 2 and where.count("cuEventElapsedTime") >= 1


def test_event_not_recorded_is_an_error(cpu_device):
    with pytest.raises(ValueError, match="recorded"):
        cuda.event_elapsed_time(cuda.event(), cuda.event())


def test_forall(where):
    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = i * 2
    a = np.zeros(300, np.int32)
    k.forall(300)(a)
    np.testing.assert_array_equal(a, np.arange(300) * 2)
    b = np.zeros(5, np.int32)
    k.forall(5, tpb=2)(b)
    np.testing.assert_array_equal(b, np.arange(5) * 2)
    k.forall(0)(b)                                      # nothing to do
    with pytest.raises(ValueError):
        k.forall(-1)


# ---- host arrays ---------------------------------------------------------------------------------

def test_pinned_and_mapped_arrays(where):
    p = cuda.pinned_array((4, 8), dtype=np.float32)
    m = cuda.mapped_array(32, dtype=pyptx.float32)
    assert p.shape == (4, 8) and p.dtype == np.float32 and m.dtype == np.float32
    assert cuda.pinned_array_like(p).shape == (4, 8)
    assert cuda.mapped_array_like(m).dtype == np.float32
    fill[1, 32](m, np.float32(6.0))
    cuda.synchronize()
    assert (m == 6.0).all()
    with cuda.pinned(p):
        d = cuda.to_device(p)
    assert d.shape == (4, 8)
    with cuda.mapped(m) as dm:
        fill[1, 32](dm, np.float32(7.0))
    assert (m == 7.0).all()


def test_device_array_forms(where):
    d = cuda.device_array((3, 4), dtype=cuda.float32)
    assert d.shape == (3, 4) and d.dtype == np.float32
    assert cuda.device_array(5).dtype == np.float64
    like = cuda.device_array_like(np.zeros((2, 3), np.int16))
    assert like.shape == (2, 3) and like.dtype == np.int16
    empty = cuda.to_device(np.ones(6, np.int32), copy=False)
    assert empty.shape == (6,) and empty.dtype == np.int32
    into = cuda.device_array(3, np.float64)
    assert cuda.to_device(np.array([1.0, 2.0, 3.0]), to=into) is into
    np.testing.assert_array_equal(into.copy_to_host(), [1, 2, 3])
    assert cuda.is_cuda_array(into) and not cuda.is_cuda_array(np.zeros(2))


def test_device_array_item_and_slice_assignment(where):
    d = cuda.to_device(np.zeros(8))
    d[3] = 1.0
    d[1:3] = np.array([5.0, 6.0])
    d[-1] = 9
    d[5:7] = 4.0                                        # broadcast
    np.testing.assert_array_equal(d.copy_to_host(), [0, 5, 6, 1, 0, 4, 4, 9])
    assert d[3] == 1.0 and d[-1] == 9.0
    m = cuda.to_device(np.zeros((3, 4), np.int32))
    m[1] = np.arange(4)
    m[2, 1:3] = 7
    m[0, 0] = -1
    m[::2, 3] = 5                                       # strided: read-modify-write
    exp = np.zeros((3, 4), np.int32)
    exp[1] = np.arange(4); exp[2, 1:3] = 7; exp[0, 0] = -1; exp[::2, 3] = 5
    np.testing.assert_array_equal(m.copy_to_host(), exp)
    assert m[2, 1] == 7
    np.testing.assert_array_equal(m[1].copy_to_host(), exp[1])    # a row is a view
    m[1][2] = 42
    assert m.copy_to_host()[1, 2] == 42
    m.setitem((0, 1), 3, stream=cuda.stream())
    assert m[0, 1] == 3
    with pytest.raises(IndexError):
        d[8] = 1.0
    with pytest.raises(IndexError):
        m[0, 0, 0] = 1


def test_copy_to_device(where):
    d = cuda.device_array(5, np.float64)
    d.copy_to_device(np.arange(5.0))
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(5.0))
    e = cuda.device_array_like(d)
    e.copy_to_device(d, stream=cuda.stream())           # device to device
    np.testing.assert_array_equal(e.copy_to_host(), np.arange(5.0))
    col = cuda.device_array((5, 1), np.float64)
    col.copy_to_device(np.arange(5.0) * 2)              # shapes differing by length-1 axes
    np.testing.assert_array_equal(col.copy_to_host().ravel(), np.arange(5.0) * 2)
    with pytest.raises(TypeError, match="dtype"):
        d.copy_to_device(np.arange(5, dtype=np.int32))
    with pytest.raises(ValueError, match="shape"):
        d.copy_to_device(np.arange(4.0))


def test_devices_on_the_fake_gpu(fake, capsys):
    assert cuda.detect() is True
    assert "Found" in capsys.readouterr().out
    dev = cuda.get_current_device()
    assert dev.id == 0 and isinstance(dev.name, str) and len(dev.compute_capability) == 2


# ---- Numba's type names in pyptx ----------------------------------------------------------------

def test_numba_type_names_from_pyptx():
    from pyptx import (boolean, complex64, double, float16, float32, float64, int8, int16,
                       int32, int64, uint8, uint16, uint32, uint64, void)
    assert (float16, float32, float64, double) == (pyptx.f16, pyptx.f32, pyptx.f64, pyptx.f64)
    assert (int8, int16, int32, int64) == (pyptx.i8, pyptx.i16, pyptx.i32, pyptx.i64)
    assert (uint8, uint16, uint32, uint64) == (pyptx.u8, pyptx.u16, pyptx.u32, pyptx.u64)
    assert boolean is pyptx.bool_ and complex64 is pyptx.c64 and void is cuda.void
    # pyptx's own short names keep their meaning; Numba's short names are in pyptx.cuda
    assert pyptx.i8.bits == 8 and cuda.i8 is pyptx.int64 and cuda.u8 is pyptx.uint64
    ns: dict = {}
    exec("from pyptx import *", ns)
    assert "float32" not in ns and "void" not in ns


def test_numba_names_in_a_kernel(cpu_device):
    from pyptx import float32, int32, void

    @cuda.jit(void(float32[:], int32))
    def k(x, n):
        buf = cuda.shared.array(32, dtype=float32)
        i = cuda.grid(1)
        buf[cuda.threadIdx.x] = float32(i) * 2
        cuda.syncthreads()
        if i < n:
            x[i] = buf[cuda.threadIdx.x]
    x = np.zeros(40, np.float32)
    k[2, 32](x, 40)
    np.testing.assert_array_equal(x, np.arange(40) * 2)


# ---- warp matching in a partial warp ------------------------------------------------------------

@cuda.jit
def match_all_full_mask(x, masks, preds):
    i = cuda.threadIdx.x
    m, p = cuda.match_all_sync(0xFFFFFFFF, x[i])
    masks[i] = m
    preds[i] = p


@pytest.mark.parametrize("n", [10, 32, 45])
def test_match_all_sync_counts_only_existing_lanes(cpu_device, n):
    masks = np.zeros(n, np.uint32)
    preds = np.full(n, -1, np.int32)
    match_all_full_mask[1, n](np.ones(n, np.int32), masks, preds)
    lanes = [min(32, n - 32 * (t // 32)) for t in range(n)]
    np.testing.assert_array_equal(masks, [(1 << k) - 1 for k in lanes])
    assert (preds == 1).all()
    x = np.ones(n, np.int32)
    x[3] = 2
    match_all_full_mask[1, n](x, masks, preds)
    assert (masks[:32] == 0).all() and (preds[:32] == 0).all()


def test_layout_markers_on_type_objects():
    from pyptx import float32, int32
    args, _ = cuda.signature_types((float32[::1], int32[:, ::1]))
    assert repr(args) == "(f32[:], i32[:, :])"


def test_scalar_signatures_written_with_type_objects():
    """`float32(float32, float32)` (a device function's Numba signature) and
    `void(float32[::1], ...)` are Signatures built from pyptx's types."""
    import numpy as np
    from pyptx import float32, int32, void
    sig = float32(float32, int32)
    assert cuda.signature_types(sig) == ((pyptx.f32, pyptx.i32), pyptx.f32)
    assert float32(1.5) == np.float32(1.5)                 # a value is still a conversion

    @cuda.jit(float32(float32, float32), device=True)
    def addf(a, b):
        return a + b

    @cuda.jit(void(float32[::1], float32[::1]))
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = addf(x[i], 1.0)
    x = np.arange(8, dtype=np.float32)
    o = np.zeros(8, np.float32)
    k[1, 32](x, o)
    np.testing.assert_array_equal(o, x + 1)
