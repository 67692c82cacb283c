"""stdlib_kernels.quant against gguf-py: dequantisation bit for bit on random valid blocks, the Q8_0
quantiser bit for bit, and Q4_K/Q6_K quantise→dequantise errors within llama.cpp-like bounds."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants as gq
from hypothesis import given, settings
from hypothesis import strategies as st

from stdlib_kernels import quant as Q

FORMATS = {"q4_k": (T.Q4_K, (0, 2)), "q6_k": (T.Q6_K, (208,)), "q8_0": (T.Q8_0, (0,))}


def random_blocks(rng, fmt, n_blocks, fp16_scale=1.0):
    """Random bytes with finite fp16 d (and dmin) fields: every bit pattern of the rest is valid."""
    nbytes = Q.SIZES[fmt][1]
    b = rng.integers(0, 256, (n_blocks, nbytes), dtype=np.uint8)
    for pos in FORMATS[fmt][1]:
        d = (rng.standard_normal(n_blocks) * fp16_scale).astype(np.float16)
        b[:, pos:pos + 2] = d.reshape(-1, 1).view(np.uint8)
    return b


@pytest.mark.parametrize("fmt", FORMATS)
@given(seed=st.integers(0, 2**32 - 1), n_blocks=st.integers(1, 40),
       scale=st.sampled_from([1e-4, 1.0, 1e3]))
@settings(max_examples=25, deadline=None)
def test_dequantize_bit_exact_vs_gguf_py(fmt, seed, n_blocks, scale):
    rng = np.random.default_rng(seed)
    raw = random_blocks(rng, fmt, n_blocks, scale).reshape(1, -1)
    got = Q.dequantize(raw, fmt)
    want = gq.dequantize(raw, FORMATS[fmt][0])
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_keeps_leading_dims(fmt):
    per, nbytes = Q.SIZES[fmt]
    raw = random_blocks(np.random.default_rng(1), fmt, 6).reshape(3, 2 * nbytes)
    got = Q.dequantize(raw, fmt)
    assert got.shape == (3, 2 * per)
    assert np.array_equal(got[1], Q.dequantize(raw[1], fmt))


@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 5), blocks=st.integers(1, 9),
       scale=st.sampled_from([1e-3, 1.0, 300.0]))
@settings(max_examples=30, deadline=None)
def test_quantize_q8_0_equals_gguf_py(seed, rows, blocks, scale):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 32 * blocks)) * scale).astype(np.float32)
    x[0, :32] = 0.0                                          # an all-zero block (d = 0)
    x[-1, -1] = 127.5 * np.abs(x[-1, -32:]).max() / 127      # a value that rounds exactly .5
    assert np.array_equal(Q.quantize_q8_0(x), gq.quantize(x, T.Q8_0))


# relative RMS error bounds on N(0,1) data: llama.cpp reports ~0.07 (Q4_K), ~0.018 (Q6_K),
# ~0.005 (Q8_0) for Gaussian weights; heavier tails (Laplace) cost a little more.
@pytest.mark.parametrize("fmt,bound", [("q4_k", 0.095), ("q6_k", 0.024), ("q8_0", 0.0075)])
@pytest.mark.parametrize("dist", ["normal", "uniform", "laplace"])
def test_roundtrip_error_bounds(fmt, bound, dist):
    rng = np.random.default_rng(7)
    x = getattr(rng, dist)(size=(8, 1024)).astype(np.float32) * 0.02
    q = Q.quantize(x, fmt)
    assert q.dtype == np.uint8 and q.shape == (8, 1024 // Q.SIZES[fmt][0] * Q.SIZES[fmt][1])
    y = Q.dequantize(q, fmt)
    rel = np.sqrt(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2))
    assert 0 < rel < bound
    # the error of each weight is bounded by its sub-block's step (no wild values)
    per_block = np.abs(y - x).reshape(-1, 32).max(axis=1)
    assert (per_block <= 0.5 * np.abs(x).reshape(-1, 32).max(axis=1) + 1e-6).all()


@pytest.mark.parametrize("fmt", ["q4_k", "q6_k"])
def test_quantize_k_special_blocks(fmt):
    """All-zero, constant, all-positive and tiny blocks quantise to finite, exact-enough values."""
    rng = np.random.default_rng(3)
    x = np.stack([np.zeros(256), np.full(256, 1.5), np.abs(rng.standard_normal(256)) + 2.0,
                  rng.standard_normal(256) * 1e-20]).astype(np.float32)
    y = Q.dequantize(Q.quantize(x, fmt), fmt)
    assert np.isfinite(y).all()
    assert not y[0].any()
    np.testing.assert_allclose(y[1], x[1], rtol=0.02)
    np.testing.assert_allclose(y[2], x[2], rtol=0.1)
    assert np.abs(y[3]).max() < 1e-19


def test_q4_k_nibble_order():
    """Low nibble of qs[32c + l] is weight 64c + l, the high nibble weight 64c + 32 + l."""
    raw = np.zeros((1, 144), np.uint8)
    raw[0, 0:2] = np.array([1.0], np.float16).view(np.uint8)      # d = 1, dmin = 0
    raw[0, 4:8] = 1                                               # scales 0..3 = 1
    raw[0, 8:12] = 0
    raw[0, 12:16] = 1                                             # scales 4..7 = 1 (low nibble)
    raw[0, 16 + 32 * 2 + 5] = 0x9 | (0x4 << 4)
    w = Q.dequantize_q4_k(raw)[0]
    assert w[64 * 2 + 5] == 9 and w[64 * 2 + 32 + 5] == 4
    assert np.count_nonzero(w) == 2


@pytest.mark.parametrize("fn,arg,exc,word", [
    (Q.dequantize_q4_k, np.zeros(143, np.uint8), ValueError, "144"),
    (Q.dequantize_q6_k, np.zeros(210, np.int8), TypeError, "uint8"),
    (Q.dequantize_q8_0, [0] * 34, TypeError, "data"),
    (Q.quantize_q4_k, np.zeros(100, np.float32), ValueError, "256"),
    (Q.quantize_q8_0, np.zeros(32, np.int32), TypeError, "float"),
    (Q.quantize_q6_k, np.full(256, np.nan, np.float32), ValueError, "finite"),
])
def test_bad_arguments(fn, arg, exc, word):
    with pytest.raises(exc, match=word):
        fn(arg)
