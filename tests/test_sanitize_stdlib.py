"""Every public stdlib function runs clean under `pyptx.sanitize(race=True, init=True)` and still
gives the numpy answer.

The table is the whole test: to cover a new kernel, add one `Case(label, run)` where `run(r)`
calls the public function on random inputs and returns `(got, want, rtol, atol)` (atol may be a
per-element bound from an error analysis, e.g. `gemm_bound`).  A finding
is a bug in the kernel (fix it there), never something to suppress here.
"""
from __future__ import annotations

import zlib
from typing import Callable, NamedTuple

import numpy as np
import pytest

import pyptx
import qmatmul_reference as R
import stdlib_kernels as S
from test_stdlib_gemm_tc import gemm_bound
from test_stdlib_refs import (decode_ref, layernorm_ref, randn, rmsnorm_ref, rope_ref,
                              softmax_ref, swiglu_ref)


class Case(NamedTuple):
    label: str
    run: Callable        # rng -> (got, want, rtol, atol); atol a scalar or per-element array


def _gemm(variant):
    def run(r):
        a, b = randn(r, 37, 45), randn(r, 45, 29)
        return S.gemm(a, b, variant), a.astype(np.float64) @ b, 1e-4, 1e-4
    return run


def _rope(layout, ndim, hd=16):
    def run(r):
        x = randn(r, 5, 3, hd) if ndim == 3 else randn(r, 5, hd)
        pos = r.integers(0, 100, 5).astype(np.int32)
        return S.rope(x, pos, layout=layout), rope_ref(x, pos, 10000.0, layout), 1e-4, 1e-5
    return run


def _softmax_streamed(r):
    """The streamed block kernel (CHUNKS = 0) on misaligned rows whose references move."""
    x = randn(r, 3, 1001, scale=30.0)
    out = np.full_like(x, np.nan)
    S.softmax_block_kernel[3, 64](out, x, 64, 1, 0)
    return out, softmax_ref(x), 1e-5, 1e-10


def _decode(seq_len, max_seq, num_splits=None):
    def run(r):
        q, kc, vc = randn(r, 4, 32), randn(r, 2, max_seq, 32), randn(r, 2, max_seq, 32)
        got = S.decode_attention(q, kc, vc, seq_len, num_splits=num_splits)
        return got, decode_ref(q, kc, vc, seq_len), 1e-4, 1e-5
    return run


def _kv_scatter(r):
    src, cache = randn(r, 2 * 16), randn(r, 2, 8, 16)
    want = cache.copy()
    want[:, 3, :] = src.reshape(2, 16)
    S.kv_scatter(src, cache, 3)
    return cache, want, 0, 0


def _gate_up(k):
    def run(r):
        return _gate_up_k(r, k)
    return run


def _gate_up_k(r, k):
    x, wg, wu = randn(r, 3, k), randn(r, 50, k), randn(r, 50, k)
    x64 = x.astype(np.float64)
    return S.gate_up_swiglu(x, wg, wu), swiglu_ref(x64 @ wg.T, x64 @ wu.T), 1e-4, 1e-4


def _gemm_tc(r):
    a, b = randn(r, 37, 41).astype(np.float16), randn(r, 41, 53).astype(np.float16)
    want, bound = gemm_bound(a, b)              # the error analysis of test_stdlib_gemm_tc
    return S.gemm(a, b, "tensor_core"), want, 0, bound


def _flash(dtype, causal):
    """Against the float64 reference within the attention error bound
    (test_stdlib_flash_attention.error_bound: the analysis of the f32 and f16 paths)."""
    from test_stdlib_flash_attention import error_bound

    def run(r):
        q, k, v = randn(r, 4, 37, 64), randn(r, 2, 45, 64), randn(r, 2, 45, 64)
        q, k, v = (a.astype(dtype) for a in (q, k, v))
        want = _attention_ref(q, k, v, causal)
        _, bound = error_bound(q, k, v, causal, kind="f32" if dtype == np.float32 else "f16")
        return S.flash_attention(q, k, v, causal=causal).astype(np.float64), want, 0.0, bound
    return run


def _attention_ref(q, k, v, causal):
    """float64 softmax(q kᵀ / sqrt(d)) v, grouped-query heads, causal mask aligned to the end."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    k, v = (np.repeat(a, q.shape[0] // a.shape[0], axis=0) for a in (k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _quant(fmt, path, m):
    """A fused GGUF matmul on one path against x @ dequant(w).T in float64."""
    from stdlib_kernels import quant as Q
    fn = {"q4_k": S.q4k_matmul, "q6_k": S.q6k_matmul, "q8_0": S.q8_0_matmul}[fmt]

    def run(r):
        n, k = 5, 256
        w = getattr(Q, f"quantize_{fmt}")(randn(r, n, k))
        x = randn(r, m, k)
        b = R.Bounds(x, w, fmt)             # the error in units of its path's bound: ≤ 1
        return (fn(x, w, n, path=path) - b.ref) / b.bound(path), 0 * b.ref, 0, 1
    return run


def _paged(page_size, max_pages, lens):
    def run(r):
        from test_stdlib_paged import make, paged_ref
        q, kp, vp, bt, sl = make(r, len(lens), 4, 2, 32, page_size, max_pages, lens)
        return S.paged_attention(q, kp, vp, bt, sl), paged_ref(q, kp, vp, bt, sl), 1e-4, 1e-5
    return run


def _paged_scatter(r):
    kp, vp, k, v = randn(r, 5, 2, 8, 16), randn(r, 5, 2, 8, 16), randn(r, 3, 2, 16), \
        randn(r, 3, 2, 16)
    slots = np.array([39, 0, 9], np.int32)
    want = kp.copy()
    want[slots // 8, :, slots % 8] = k
    S.paged_kv_scatter(k, v, kp, vp, slots)
    return kp, want, 0, 0


def _q4k_gate_up(r):
    from stdlib_kernels import quant as Q
    n, k = 6, 256
    wg, wu = Q.quantize_q4_k(randn(r, n, k)), Q.quantize_q4_k(randn(r, n, k))
    x = randn(r, 2, k)
    want, bound = R.swiglu_bound(x, wg, wu)
    return (S.q4k_gate_up_swiglu(x, wg, wu, n) - want) / bound, 0 * want, 0, 1


def _mover_cases():
    """The data-movement kernels (exact: they only move and widen f16 -> f32): every path."""
    from stdlib_kernels.elementwise import copy_kernel
    from stdlib_kernels.llama.kernels import gather_heads, swap01

    def copy(vec, n):
        def run(r):
            src = r.integers(0, 2**16, n).astype(np.uint16)
            dst = np.zeros(n, np.uint16)
            copy_kernel[(n // vec + 1 + 63) // 64, 64](dst, src, vec)
            return dst, src, 0, 0
        return run

    def swap(d):
        return lambda r: (lambda x: (swap01(x), x.transpose(1, 0, 2), 0, 0))(randn(r, 5, 3, d))

    def gather(dtype, d):
        def run(r):
            pages = randn(r, 3, 2, 4, d).astype(dtype)
            want = pages.transpose(1, 0, 2, 3).reshape(2, 12, d)[:, :10].astype(np.float32)
            return gather_heads(pages, 10), want, 0, 0
        return run

    return [*(Case(f"copy_kernel VEC={v}", copy(v, 75)) for v in (1, 2, 4, 8)),
            Case("swap01 vector", swap(8)), Case("swap01 per element", swap(6)),
            Case("gather_heads f32 vector", gather(np.float32, 12)),
            Case("gather_heads f16 vector", gather(np.float16, 16)),
            Case("gather_heads f16 per element", gather(np.float16, 12))]


CASES = [
    Case("softmax warp path", lambda r: (lambda x: (S.softmax(x), softmax_ref(x), 1e-5, 1e-7))(
        randn(r, 9, 100))),
    Case("softmax block path", lambda r: (lambda x: (S.softmax(x), softmax_ref(x), 1e-5, 1e-8))(
        randn(r, 3, 2000))),
    Case("softmax streamed path", _softmax_streamed),
    Case("rmsnorm", lambda r: (lambda x, w: (S.rmsnorm(x, w), rmsnorm_ref(x, w, 1e-6), 1e-5,
                                             1e-6))(randn(r, 4, 300), randn(r, 300))),
    Case("layernorm", lambda r: (lambda x, g, b: (S.layernorm(x, g, b),
                                                  layernorm_ref(x, g, b, 1e-5), 1e-4, 1e-5))(
        randn(r, 4, 300), randn(r, 300), randn(r, 300))),
    Case("gemm naive", _gemm("naive")),
    Case("gemm tiled", _gemm("tiled")),
    Case("gemm tensor_core", _gemm_tc),
    Case("flash_attention f32 causal", _flash(np.float32, True)),
    Case("flash_attention f16 tensor cores", _flash(np.float16, False)),
    Case("kv_scatter", _kv_scatter),
    Case("decode_attention", _decode(40, 64)),
    Case("decode_attention split-K", _decode(600, 640)),
    Case("decode_attention forced splits", _decode(50, 64, num_splits=3)),
    Case("rope neox", _rope("neox", 3)),
    Case("rope gptj", _rope("gptj", 2)),
    Case("rope neox misaligned heads", _rope("neox", 3, 10)),
    Case("rope gptj misaligned heads", _rope("gptj", 3, 10)),
    Case("swiglu", lambda r: (lambda g, u: (S.swiglu(g, u), swiglu_ref(g, u), 1e-5, 1e-6))(
        randn(r, 1000), randn(r, 1000))),
    Case("gate_up_swiglu", _gate_up(40)),
    Case("gate_up_swiglu misaligned k", _gate_up(37)),
    *[Case(f"{name} {path} m={m}", _quant(fmt, path, m))
      for name, fmt in (("q4k_matmul", "q4_k"), ("q6k_matmul", "q6_k"), ("q8_0_matmul", "q8_0"))
      for path, m in (("f32", 1), ("dp4a", 3), ("tiled", 9), ("mma", 9))],
    Case("q4k_gate_up_swiglu", _q4k_gate_up),
    Case("paged_attention", _paged(16, 5, [0, 1, 37])),
    Case("paged_attention split-K", _paged(8, 40, [300, 5, 2])),
    Case("paged_kv_scatter", _paged_scatter),
    Case("add", lambda r: (lambda a, b: (S.add(a, b), a + b, 0, 0))(
        randn(r, 4, 300), randn(r, 4, 300))),
    *_mover_cases(),
]


def test_the_table_covers_every_public_function():
    public = {n for n in S.__all__ if not n.endswith("_kernel")}
    covered = {c.label.split()[0] for c in CASES}
    assert public <= covered, f"add a Case for: {sorted(public - covered)}"


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_stdlib_runs_clean_under_the_sanitizer(case, monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    r = np.random.default_rng(zlib.crc32(case.label.encode()))
    with pyptx.sanitize(race=True, init=True):
        got, want, rtol, atol = case.run(r)
    if np.ndim(atol):                           # a per-element bound from an error analysis
        err = np.abs(np.asarray(got, np.float64) - want)
        assert (err <= atol + rtol * np.abs(want)).all(), f"error {err.max():.3g} past the bound"
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ---- multi-stage kernels: at least 3 tiles in each pipelined dimension ----------------------
#
# A kernel that walks K (or the keys) in tiles refills a shared buffer that other warps may still
# be reading: a double-buffered stage is refilled two tiles later, a single buffer one tile later,
# and only the barrier that ends each step orders the reads before the refill.  The first place a
# missing barrier shows is tile 1 prefetching tile 2 into tile 0's stage, so these runs use >= 3
# tiles (with 2, nothing is refilled while still in use and the race sanitizer has nothing to
# see); otherwise they are as small as the kernels allow (one block: the executor is slow).

def _dot_bound(a, b):
    """float64 a @ b and the bound on an f32 kernel's error: K steps c + x·y, each one fma.rn
    (contracted by the compiler), so K roundings of at most 2^-24·Σ_k|a_k b_k| each."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a @ b, (a.shape[1] + 1) * 2.0**-24 * (np.abs(a) @ np.abs(b))


def _pipe_gemm_tc(k):
    def run(r):
        a, b = randn(r, 16, k).astype(np.float16), randn(r, k, 8).astype(np.float16)
        want, bound = gemm_bound(a, b)
        return S.gemm(a, b, "tensor_core"), want, bound
    return run


def _pipe_flash(d, sk, causal):
    def run(r):
        from test_stdlib_flash_attention import error_bound
        q, k, v = (randn(r, 1, n, d).astype(np.float16) for n in (16, sk, sk))
        want, bound = error_bound(q, k, v, causal)
        return S.flash_attention(q, k, v, causal=causal).astype(np.float64), want, bound
    return run


def _pipe_gemm_tiled(k):
    def run(r):
        a, b = randn(r, 8, k), randn(r, k, 8)
        return (S.gemm(a, b, "tiled"), *_dot_bound(a, b))
    return run


def _pipe_qtiled(r):
    from stdlib_kernels import quant as Q
    w = Q.quantize_q8_0(randn(r, 3, 96))
    x = randn(r, 2, 96)
    want, bound = _dot_bound(x, Q.dequantize_q8_0(w).T)      # f16 scale · int8: exact in f32
    return S.q8_0_matmul(x, w, 3, path="tiled"), want, bound


def _pipe_qmma(fmt, k):
    def run(r):
        from stdlib_kernels import quant as Q
        fn = {"q4_k": S.q4k_matmul, "q6_k": S.q6k_matmul, "q8_0": S.q8_0_matmul}[fmt]
        w = Q.quantize(randn(r, 3, k), fmt)
        x = randn(r, 2, k)
        b = R.Bounds(x, w, fmt)
        return fn(x, w, 3, path="mma"), b.ref, b.bound("mma")
    return run


def _tiles(n, tile):
    return -(-n // tile)


PIPELINED = [  # (label, run: rng -> (got, want, per-element bound), tiles in the pipelined dim)
    ("gemm_tc cp.async, K = 96", _pipe_gemm_tc(96), _tiles(96, 32)),
    ("gemm_tc element-wise staging, K = 97", _pipe_gemm_tc(97), _tiles(97, 32)),
    ("flash_attention_tc causal, 70 keys", _pipe_flash(16, 70, True), _tiles(70, 32)),
    ("flash_attention_tc_wide, 48 keys", _pipe_flash(144, 48, False), _tiles(48, 16)),
    ("gemm tiled, K = 48", _pipe_gemm_tiled(48), _tiles(48, 16)),
    ("q8_0_matmul tiled, K = 96", _pipe_qtiled, _tiles(96, 32)),
    ("q4k_matmul mma, K = 512", _pipe_qmma("q4_k", 512), _tiles(512, 128)),
    ("q6k_matmul mma, K = 512", _pipe_qmma("q6_k", 512), _tiles(512, 128)),
    ("q8_0_matmul mma, K = 288", _pipe_qmma("q8_0", 288), _tiles(288, 128)),
]


@pytest.mark.parametrize("label, run, tiles", PIPELINED, ids=[p[0] for p in PIPELINED])
def test_pipelined_kernels_run_clean_over_three_tiles(label, run, tiles, monkeypatch):
    assert tiles >= 3                     # a stage is refilled while in use
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    r = np.random.default_rng(zlib.crc32(label.encode()))
    with pyptx.sanitize(race=True, init=True):
        got, want, bound = run(r)
    err = np.abs(np.asarray(got, np.float64) - want)
    assert (err <= bound).all(), f"error {err.max():.3g} past the bound"
