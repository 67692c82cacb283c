"""The data-movement kernels: `copy_words` (the device copy behind `out=` and `V.aligned`'s
misaligned-view copy), `swap01` and `gather_heads` (the llama prefill's layout changes).

They only move bits (and widen f16 -> f32, which is exact), so every check is bit-exact equality
with a numpy reference built from the definition: no tolerance is needed.  Outputs start
poisoned (NaN / 0xFFFF) so an element no thread writes shows.  Every path runs: the 16-byte
vector body, the copy's narrower widths and its scalar tail, the per-element fallbacks
(head_dim not a multiple of the vector, rows past grid.y's limit), misaligned device views on the
fake GPU (whose executor faults on a misaligned vector access, as a GPU does), and the SASS has
the 128-bit accesses."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from stdlib_kernels import _validate as V
from stdlib_kernels.elementwise import copy_kernel, copy_lanes, copy_words
from stdlib_kernels.llama import kernels as M

from fake_driver import FakeDriver, on_fake_gpu

POISON16 = 0xFFFF


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


def _words(r, n):
    """u16 data that never equals the poison."""
    return r.integers(0, POISON16, n).astype(np.uint16)


# ---- copy ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("vec", [1, 2, 4, 8])
@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 2**31))
def test_copy_kernel_every_width_and_tail(cpu, vec, n, seed):
    """n // vec whole vectors and an n % vec tail (the thread right after the last vector)."""
    src = _words(np.random.default_rng(seed), n)
    dst = np.full(n, POISON16, np.uint16)
    copy_kernel[V.ceil_div(n // vec + 1, 64), 64](dst, src, vec)
    np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("pointers,lanes", [
    ((0, 0), 8), ((256, 4096), 8), ((16, 32), 8),
    ((8, 0), 4), ((0, 24), 4),
    ((4, 0), 2), ((12, 16), 2), ((4, 8), 2),
    ((2, 0), 1), ((0, 6), 1), ((14, 30), 1)])
def test_copy_lanes_is_the_widest_access_both_addresses_allow(pointers, lanes):
    """u16 lanes = (the largest power of two dividing both addresses, at most 16 bytes) / 2."""
    assert copy_lanes(*pointers) == lanes


@pytest.mark.parametrize("offset", range(8))
@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 263])
def test_copy_words_from_a_misaligned_device_view(fake, monkeypatch, offset, n):
    """A source view `offset` u16 words into its allocation (0..14 bytes off the 16-byte grid;
    `V.aligned`'s case) into a fresh array: the launch uses the widest access the view's address
    allows (the executor re-bases each argument, so the width is checked here against the
    address, as a GPU would fault on it) and copies every word."""
    import stdlib_kernels.elementwise as E
    launched = []
    real = E.copy_kernel

    class Spy:
        def __getitem__(self, cfg):
            return lambda dst, src, vec: (launched.append(vec), real[cfg](dst, src, vec))

    monkeypatch.setattr(E, "copy_kernel", Spy())
    r = np.random.default_rng(100 * offset + n)
    host = _words(r, n + 8)
    d = pyptx.to_device(host)
    view = d[offset:offset + n]
    assert view.device_pointer % 16 == (2 * offset) % 16
    dst = pyptx.to_device(np.full(n, POISON16, np.uint16))
    assert dst.device_pointer % 16 == 0
    copy_words(dst, view)
    np.testing.assert_array_equal(dst.copy_to_host(), host[offset:offset + n])
    byte_offset = 2 * offset
    widest = 16 if byte_offset == 0 else byte_offset & -byte_offset      # lowest set bit
    assert launched == [widest // 2]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8])
def test_copy_words_every_result_dtype_and_shape(cpu, dtype):
    """A 2-D result of each element size (int8: an odd byte count is not a stdlib result, so an
    even one), copied through u16 words."""
    r = np.random.default_rng(5)
    x = r.integers(-100, 100, (6, 10)).astype(dtype)
    src, dst = pyptx.to_device(x), pyptx.to_device(np.zeros_like(x))
    copy_words(dst, src)
    np.testing.assert_array_equal(dst.copy_to_host(), x)


# ---- swap01 --------------------------------------------------------------------------------------

def swap01_ref(x):
    """out[b, a, e] = x[a, b, e], element by element."""
    A, B, d = x.shape
    out = np.empty((B, A, d), x.dtype)
    for a in range(A):
        for b in range(B):
            out[b, a] = x[a, b]
    return out


@settings(max_examples=25, deadline=None)
@given(A=st.integers(1, 9), B=st.integers(1, 9), d=st.sampled_from([4, 6, 8, 12, 20, 64, 66]),
       seed=st.integers(0, 2**31))
def test_swap01(cpu, A, B, d, seed):
    """d % 4 == 0: the 128-bit kernel; else the per-element fallback."""
    x = np.random.default_rng(seed).standard_normal((A, B, d)).astype(np.float32)
    np.testing.assert_array_equal(M.swap01(x), swap01_ref(x))


@pytest.mark.parametrize("d", [8, 128])
def test_swap01_vec_kernel_writes_every_element(cpu, d):
    A, B = 5, 7
    x = np.random.default_rng(d).standard_normal((A, B, d)).astype(np.float32)
    out = np.full(A * B * d, np.nan, np.float32)
    M.swap01_vec_kernel[(V.ceil_div(B * d // 4, M.THREADS), A), M.THREADS](
        out, x.reshape(-1), A, B, d)
    np.testing.assert_array_equal(out.reshape(B, A, d), swap01_ref(x))


def test_swap01_past_the_grid_y_limit_takes_the_fallback(cpu, monkeypatch):
    """More rows than grid.y holds (65535; lowered here to 3) -> the per-element kernel."""
    monkeypatch.setattr(M, "_GRID_Y", 3)
    used = []
    monkeypatch.setattr(M, "swap01_kernel", _spy(M.swap01_kernel, used))
    x = np.random.default_rng(1).standard_normal((4, 3, 8)).astype(np.float32)
    np.testing.assert_array_equal(M.swap01(x), swap01_ref(x))
    assert used


def _spy(kernel, used):
    class Spy:
        def __getitem__(self, cfg):
            used.append(cfg)
            return kernel[cfg]
    return Spy()


# ---- gather_heads --------------------------------------------------------------------------------

def gather_ref(pages, L):
    """out[g, t, e] = pages[t // PS, g, t % PS, e] (f32), element by element."""
    _, KV, PS, d = pages.shape
    out = np.empty((KV, L, d), np.float32)
    for g in range(KV):
        for t in range(L):
            out[g, t] = pages[t // PS, g, t % PS].astype(np.float32)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@settings(max_examples=20, deadline=None)
@given(KV=st.integers(1, 4), PS=st.sampled_from([1, 2, 4, 16]),
       d=st.sampled_from([4, 8, 12, 16, 24, 64, 128, 6]), L=st.integers(1, 40),
       seed=st.integers(0, 2**31))
def test_gather_heads(cpu, dtype, KV, PS, d, L, seed):
    """The first L tokens (a partial last page); f32 pages: d % 4 == 0 takes the vector kernel,
    f16: d % 8 == 0 (12, 24: f32 vector, f16 fallback; 6: both fall back)."""
    P = V.ceil_div(L, PS) + 1
    pages = np.random.default_rng(seed).standard_normal((P, KV, PS, d)).astype(dtype)
    np.testing.assert_array_equal(M.gather_heads(pages, L), gather_ref(pages, L))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gather_heads_past_the_grid_y_limit_takes_the_fallback(cpu, monkeypatch, dtype):
    """More KV heads than grid.y holds (65535; lowered here to 2) -> the per-element kernel."""
    monkeypatch.setattr(M, "_GRID_Y", 2)
    used = []
    monkeypatch.setattr(M, "gather_heads_kernel", _spy(M.gather_heads_kernel, used))
    pages = np.random.default_rng(2).standard_normal((3, 3, 4, 16)).astype(dtype)
    np.testing.assert_array_equal(M.gather_heads(pages, 9), gather_ref(pages, 9))
    assert used


@pytest.mark.parametrize("dtype,vec", [(np.float32, 4), (np.float16, 8)])
def test_gather_heads_vec_kernel_writes_every_element(cpu, dtype, vec):
    KV, PS, d, L = 3, 4, 16, 10
    pages = np.random.default_rng(vec).standard_normal((4, KV, PS, d)).astype(dtype)
    k = M.gather_heads_vec_kernel if vec == 4 else M.gather_heads_f16_kernel()
    out = np.full(KV * L * d, np.nan, np.float32)
    k[(V.ceil_div(L * d // vec, M.THREADS), KV), M.THREADS](out, pages.reshape(-1), KV, L, PS,
                                                             d, vec)
    np.testing.assert_array_equal(out.reshape(KV, L, d), gather_ref(pages, L))


def test_gather_heads_on_device_arrays(cpu):
    pages = np.random.default_rng(3).standard_normal((3, 2, 16, 64)).astype(np.float16)
    got = M.gather_heads(pyptx.to_device(pages), 33)
    np.testing.assert_array_equal(got.copy_to_host(), gather_ref(pages, 33))


# ---- SASS ----------------------------------------------------------------------------------------

def test_the_vector_kernels_move_16_bytes_per_access_in_few_instructions():
    """sm_90 SASS: one LDG.E.128 and STG.E.128 on the hot path, no f64, no MUFU (no division by
    a runtime value), and at most a third of the per-element kernels' instructions per 16 bytes
    (measured: docs/benchmarks.md, "Data movement")."""
    from benchmarks import bench_movers_sass as B
    from benchmarks.sass_report import find_cuobjdump
    from pyptx.toolchain import find_ptxas
    if find_ptxas() is None or find_cuobjdump() is None:
        pytest.skip("no ptxas / cuobjdump")
    rows = {r.label: r for r in B.rows("sm_90")}
    assert not [r for r in rows.values() if r.error]
    pairs = [("copy_words (VEC=1: the old u16 copy)", "copy_words VEC=8"),
             ("swap01 per element", "swap01_vec D=128"),
             ("gather_heads f32 per element", "gather_heads_vec f32 D=128 PS=16"),
             ("gather_heads f16 per element", "gather_heads_vec f16 D=128 PS=16")]
    for old, new in pairs:
        o, n = rows[old], rows[new]
        assert "LDG.E.128" in n.ldg.split(",") and "STG.E.128" in n.stg.split(","), n
        assert n.f64 == 0 and n.mufu == 0, n
        assert o.mufu > 0 or old.startswith("copy"), o       # the fallbacks divide by d, B, L
        assert n.per_16_bytes * 3 <= o.per_16_bytes, (o, n)
        assert n.per_16_bytes <= 40, n
