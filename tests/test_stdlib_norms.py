"""stdlib RMSNorm and LayerNorm against float64 references: odd hidden sizes, every block size."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from test_stdlib_refs import SIZES, layernorm_ref, poisoned, randn, rmsnorm_ref, rng

RTOL, ATOL = 2e-5, 2e-6


@pytest.mark.parametrize("h", SIZES)
def test_rmsnorm_odd_hidden_sizes(h):
    r = rng(h)
    x, w = randn(r, 3, h, scale=2.0), randn(r, h)
    np.testing.assert_allclose(sk.rmsnorm(x, w, 1e-6), rmsnorm_ref(x, w, 1e-6),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("h", SIZES)
def test_layernorm_odd_hidden_sizes(h):
    r = rng(100 + h)
    x, g, b = randn(r, 3, h, scale=2.0) + 3.0, randn(r, h), randn(r, h)
    np.testing.assert_allclose(sk.layernorm(x, g, b, 1e-5), layernorm_ref(x, g, b, 1e-5),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("block,h,chunks", [(32, 7, 1), (128, 1000, 2), (256, 33, 0),
                                            (1024, 4097, 0), (128, 4100, 0), (32, 1000, 8)])
def test_norm_kernels_write_every_element(block, h, chunks):
    """Both paths: row in registers (chunks > 0) and streamed (chunks == 0)."""
    r = rng(200 + h)
    x, w, b = randn(r, 2, h), randn(r, h), randn(r, h)
    vec = 4 if h % 4 == 0 else 1
    out = poisoned(x.shape)
    sk.rmsnorm_kernel[2, block](out, x, w, 1e-6, block, vec, chunks)
    np.testing.assert_allclose(out, rmsnorm_ref(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    out = poisoned(x.shape)
    sk.layernorm_kernel[2, block](out, x, w, b, 1e-5, block, vec, chunks)
    np.testing.assert_allclose(out, layernorm_ref(x, w, b, 1e-5), rtol=RTOL, atol=ATOL)


def test_layernorm_defaults_and_large_mean():
    """Two-pass variance: a row with mean 1e4 and unit spread keeps its precision."""
    x = randn(rng(300), 2, 257) + np.float32(1e4)
    ones, zeros = np.ones(257), np.zeros(257)
    np.testing.assert_allclose(sk.layernorm(x), layernorm_ref(x, ones, zeros, 1e-5),
                               rtol=1e-3, atol=1e-3)


def test_norms_keep_leading_axes():
    r = rng(400)
    x, w = randn(r, 2, 3, 40), randn(r, 40)
    assert sk.rmsnorm(x, w).shape == (2, 3, 40)
    np.testing.assert_allclose(sk.rmsnorm(x, w), rmsnorm_ref(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    y = randn(r, 40)
    np.testing.assert_allclose(sk.layernorm(y, w, w), layernorm_ref(y, w, w, 1e-5),
                               rtol=RTOL, atol=ATOL)


def test_rmsnorm_llama_hidden():
    r = rng(500)
    x, w = randn(r, 2, 4096), randn(r, 4096)
    np.testing.assert_allclose(sk.rmsnorm(x, w, 1e-5), rmsnorm_ref(x, w, 1e-5),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.slow
def test_norms_hidden_16k():
    r = rng(600)
    x, w, b = randn(r, 2, 16384), randn(r, 16384), randn(r, 16384)
    np.testing.assert_allclose(sk.rmsnorm(x, w), rmsnorm_ref(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sk.layernorm(x, w, b), layernorm_ref(x, w, b, 1e-5),
                               rtol=RTOL, atol=ATOL)
