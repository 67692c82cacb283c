"""flash_attention against a float64 reference: f32 (SIMT) within 1e-4, f16 within 2e-3 and bf16
within 1.5e-2 (tensor cores); causal and not, batch, grouped-query K/V, seq_q < seq_k (mask
aligned to the end), lengths that are not multiples of the tiles, head_dim 64 and 128."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from pyptx.bfloat16 import from_bf16, to_bf16
from stdlib_kernels.flash_attention import (BQ, LOG2E, SIMT_WARPS, TC_THREADS,
                                            flash_attention_arrays, flash_attention_f32_kernel,
                                            flash_attention_tc_kernel)

rng = np.random.default_rng(4242)
TOL = {"f32": 1e-4, "f16": 2e-3, "bf16": 1.5e-2}


def reference(q, k, v, causal, scale=None):
    """float64 softmax(q kᵀ scale) v with GQA and the end-aligned causal mask."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    h, sq, d = q.shape[-3:]
    hk, skn = k.shape[-3], k.shape[-2]
    k = np.repeat(k, h // hk, axis=-3)
    v = np.repeat(v, h // hk, axis=-3)
    s = np.einsum("...qd,...kd->...qk", q, k) * (1 / np.sqrt(d) if scale is None else scale)
    if causal:
        s = np.where(np.arange(skn)[None, :] > np.arange(sq)[:, None] + skn - sq, -np.inf, s)
    with np.errstate(invalid="ignore"):          # rows that see no key: NaN
        s = s - s.max(-1, keepdims=True)
        p = np.exp(s)
        return (p / p.sum(-1, keepdims=True)) @ v


def _inputs(shape_q, shape_kv, dtype):
    return (rng.standard_normal(shape_q).astype(dtype), rng.standard_normal(shape_kv).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype))


CASES = [  # (q shape, kv shape, causal)
    ((2, 40, 64), (2, 40, 64), False),
    ((2, 40, 64), (2, 40, 64), True),
    ((4, 37, 64), (2, 70, 64), True),          # GQA, seq_q < seq_k, ragged tiles
    ((2, 2, 33, 64), (2, 1, 33, 64), False),   # batch + GQA
    ((1, 70, 128), (1, 70, 128), True),
    ((1, 5, 64), (1, 97, 64), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("qs, kvs, causal", CASES)
def test_matches_float64_reference(dtype, qs, kvs, causal):
    q, k, v = _inputs(qs, kvs, dtype)
    out = sk.flash_attention(q, k, v, causal=causal)
    assert out.dtype == dtype and out.shape == q.shape
    if dtype == np.float32 and qs[-1] == 64:      # head_dims that are not multiples of 32 or 4
        for d in (40, 33):                        # 128-bit loads / scalar loads
            o2 = sk.flash_attention(q[..., :d], k[..., :d], v[..., :d], causal=causal)
            assert np.abs(o2 - reference(q[..., :d], k[..., :d], v[..., :d], causal)).max() < 1e-4
    err = np.abs(out.astype(np.float64) - reference(q, k, v, causal)).max()
    assert err < TOL["f32" if dtype == np.float32 else "f16"]


@pytest.mark.parametrize("qs, kvs, causal", [((2, 40, 64), (1, 50, 64), True),
                                             ((1, 20, 128), (1, 20, 128), False)])
def test_bf16(qs, kvs, causal):
    q, k, v = (to_bf16(x) for x in _inputs(qs, kvs, np.float32))
    b = lambda x: x.reshape(-1, x.shape[-2], x.shape[-1])         # noqa: E731
    out = flash_attention_arrays("bf16", b(q), b(k), b(v), qs[-3] // kvs[-3], causal,
                                 1 / np.sqrt(qs[-1]))
    ref = reference(from_bf16(q), from_bf16(k), from_bf16(v), causal)
    assert np.abs(from_bf16(out).reshape(ref.shape) - ref).max() < TOL["bf16"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_scale_and_rows_without_keys(dtype):
    """scale= is used as given; with seq_q > seq_k, causal rows that see no key are 0."""
    q, k, v = _inputs((2, 20, 64), (2, 12, 64), dtype)
    out = sk.flash_attention(q, k, v, causal=True, scale=0.3)
    ref = reference(q, k, v, True, 0.3)
    seen = np.isfinite(ref).all(-1)
    assert (~seen).any() and not np.isnan(out.astype(np.float32)).any()
    np.testing.assert_array_equal(out[~seen].astype(np.float32), 0.0)
    assert np.abs(out[seen].astype(np.float64) - ref[seen]).max() < (1e-4 if dtype == np.float32
                                                                     else 2e-3)


def test_every_output_written():
    """Kernels launched directly into NaN-poisoned outputs."""
    q, k, v = _inputs((2, 45, 64), (1, 45, 64), np.float32)
    out = np.full(q.shape, np.nan, np.float32)
    flash_attention_f32_kernel[(-(-45 // SIMT_WARPS), 2), SIMT_WARPS * 32](
        out, q, k, v, 2, np.float32(LOG2E / 8), 2, 32, True, True)
    assert np.abs(out - reference(q, k, v, True)).max() < 1e-4
    h = [x.astype(np.float16) for x in (q, k, v)]
    out16 = np.full(q.shape, 0x7E00, np.uint16)                  # f16 NaN
    flash_attention_tc_kernel[(-(-45 // BQ), 2), TC_THREADS](
        out16, *(x.view(np.uint16) for x in h), 2, np.float32(LOG2E / 8), 64, True, False)
    got = out16.view(np.float16).astype(np.float64)
    assert np.abs(got - reference(*h, True)).max() < 2e-3


def test_validation():
    q, k, v = _inputs((2, 8, 64), (2, 8, 64), np.float32)
    with pytest.raises(TypeError, match="one dtype"):
        sk.flash_attention(q, k.astype(np.float16), v)
    with pytest.raises(ValueError, match="multiple of"):
        sk.flash_attention(q, k[:1].repeat(3, 0), v[:1].repeat(3, 0))
    with pytest.raises(ValueError, match="head_dim"):
        x = np.zeros((1, 4, 264), np.float32)
        sk.flash_attention(x, x, x)
    with pytest.raises(ValueError, match="v"):
        sk.flash_attention(q, k, v[:, :4])
    with pytest.raises(ValueError, match="head_dim"):
        x = np.zeros((1, 4, 40), np.float16)
        sk.flash_attention(x, x, x)
    with pytest.raises(TypeError, match="causal"):
        sk.flash_attention(q, k, v, causal="yes")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_larger_shapes(dtype):
    q, k, v = _inputs((2, 8, 300, 128), (2, 2, 300, 128), dtype)
    for causal in (False, True):
        out = sk.flash_attention(q, k, v, causal=causal)
        assert np.abs(out.astype(np.float64) - reference(q, k, v, causal)).max() < \
            TOL["f32" if dtype == np.float32 else "f16"]
