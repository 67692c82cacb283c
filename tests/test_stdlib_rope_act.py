"""stdlib RoPE (both layouts), SwiGLU and the fused gate/up SwiGLU against float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from test_stdlib_refs import SIZES, poisoned, randn, rng, rope_ref, swiglu_ref

from stdlib_kernels.rope import inv_frequencies


@pytest.mark.parametrize("layout", ["neox", "gptj"])
@pytest.mark.parametrize("seq,n_heads,hd", [(1, 1, 2), (7, 3, 8), (5, 2, 66), (3, 4, 128)])
def test_rope_layouts(layout, seq, n_heads, hd):
    r = rng(seq * 100 + hd)
    x = randn(r, seq, n_heads, hd)
    pos = r.integers(0, 100, seq)
    # the angle is p·inv_freq rounded to float32: error ≲ |angle|·2^-23 per element
    np.testing.assert_allclose(sk.rope(x, pos, 10000.0, layout),
                               rope_ref(x, pos, 10000.0, layout), rtol=1e-5, atol=4e-5)


def test_rope_two_dimensional_x_and_theta():
    r = rng(1)
    x = randn(r, 9, 16)
    pos = np.arange(9, dtype=np.int64) * 3
    y = sk.rope(x, pos, theta=500000.0, layout="gptj")
    assert y.shape == x.shape
    np.testing.assert_allclose(y, rope_ref(x, pos, 500000.0, "gptj"), rtol=1e-5, atol=4e-5)


@pytest.mark.parametrize("neox", [True, False])
def test_rope_kernel_writes_every_element(neox):
    r = rng(2)
    x = randn(r, 7, 3, 10)
    pos = r.integers(0, 50, 7).astype(np.int32)
    out = poisoned(x.shape)
    sk.rope_kernel[7, 128](out, x, pos, inv_frequencies(10, 10000.0), neox, 1, shared_mem=40)
    np.testing.assert_allclose(out, rope_ref(x, pos, 10000.0, "neox" if neox else "gptj"),
                               rtol=1e-5, atol=4e-5)


def test_rope_llama_preset_shape():
    r = rng(3)
    x = randn(r, 2, 32, 128)
    pos = np.array([17, 4095])
    np.testing.assert_allclose(sk.rope(x, pos), rope_ref(x, pos, 10000.0, "neox"),
                               rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("n", SIZES)
def test_swiglu_odd_sizes(n):
    r = rng(n)
    g, u = randn(r, n, scale=4.0), randn(r, n)
    np.testing.assert_allclose(sk.swiglu(g, u), swiglu_ref(g, u), rtol=1e-5, atol=1e-7)


def test_swiglu_extremes_and_poison():
    g = np.array([-200.0, -88.0, -20.0, 0.5, 20.0, 88.0, 200.0], np.float32)
    u = np.linspace(-2, 3, 7).astype(np.float32)
    out = poisoned(7)
    sk.swiglu_kernel[1, 32](out, g, u)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, swiglu_ref(g, u), rtol=1e-5, atol=1e-30)
    x = randn(rng(4), 2, 3, 5)
    np.testing.assert_allclose(sk.swiglu(x, x), swiglu_ref(x, x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("m,k,ff", [(1, 1, 1), (2, 33, 7), (3, 100, 9), (1, 1000, 33)])
def test_gate_up_swiglu_fused(m, k, ff):
    r = rng(m * 1000 + k + ff)
    x, wg, wu = randn(r, m, k), randn(r, ff, k, scale=0.2), randn(r, ff, k, scale=0.2)
    ref = swiglu_ref(x.astype(np.float64) @ wg.T.astype(np.float64),
                     x.astype(np.float64) @ wu.T.astype(np.float64))
    np.testing.assert_allclose(sk.gate_up_swiglu(x, wg, wu), ref, rtol=1e-4, atol=1e-5)
    out = poisoned((m, ff))
    sk.gate_up_swiglu_kernel[(ff, m), 32](out, x, wg, wu, 4 if k % 4 == 0 else 1)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sk.gate_up_swiglu(x[0], wg, wu), ref[0], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_gate_up_swiglu_llama_decode_slice():
    """One decode token through a 256-column slice of a Llama MLP (hidden 4096)."""
    r = rng(5)
    x, wg, wu = randn(r, 4096), randn(r, 256, 4096, scale=0.02), randn(r, 256, 4096, scale=0.02)
    ref = swiglu_ref(wg.astype(np.float64) @ x, wu.astype(np.float64) @ x)
    np.testing.assert_allclose(sk.gate_up_swiglu(x, wg, wu), ref, rtol=1e-4, atol=1e-5)
