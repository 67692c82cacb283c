"""gemm(variant="tensor_core"): f16 and bf16 inputs, f32 accumulation, odd shapes (masked tails,
the element-wise staging path when rows are not 16-byte aligned), against a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from pyptx.bfloat16 import from_bf16, to_bf16
from stdlib_kernels.gemm_tc import gemm_tc_bits

rng = np.random.default_rng(77)


def gemm_bound(a, b):
    """(float64 reference, per-element bound on |C − A B|) for the tensor-core GEMM: the error
    analysis behind every tolerance here (the old blanket 2e-3 relative was ~2e4x the measured
    ~8e-8).

    f16/bf16 products are exact in f32 (11 + 11 or 8 + 8 significand bits), so every error is
    a rounding of a sum.  The kernel runs one m16n8k16 mma per 16 of K, on the k-slices
    [16t, 16t + 16) (the zero padding past K adds exact zeros), each adding 16 products to the
    accumulator c_t: by `assert_mma_close`'s reasoning (test_tensorcore.py), at most
    17·2^-24·(|c_t| + S_t), S_t = Σ_{k in slice t}|a_k b_k|, whatever order and rounding the
    tensor core uses inside an mma (PTX specifies neither).  Summed over the mmas with c_t the
    exact partial product (first order): 17·2^-24·Σ_t (|c_t| + S_t).  That is at most about
    (K + K/16)·2^-24·Σ_k|a_k b_k|, the plain worst case, and ~2-5x tighter on random data, where
    |c_t| grows like √t.  Measured on the CPU executor (in-order round-to-nearest sums): 2-4 % of
    it; it cannot be ~10x the measurement without assuming the tensor core's internal order
    and rounding (16 roundings at full size per mma is what PTX allows)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    ref = a @ b
    bound = np.zeros_like(ref)
    c = np.zeros_like(ref)
    for k0 in range(0, a.shape[1], 16):
        sa, sb = a[:, k0:k0 + 16], b[k0:k0 + 16]
        bound += 17 * 2.0**-24 * (np.abs(c) + np.abs(sa) @ np.abs(sb))
        c += sa @ sb
    return ref, bound


def assert_gemm_close(got, a, b):
    """|got − a b| ≤ gemm_bound everywhere (exact where the bound is 0: K = 0 or zero rows);
    returns the fraction of the bound used."""
    ref, bound = gemm_bound(a, b)
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert (err <= bound).all(), (f"error {err.max():.3g} exceeds the bound at "
                                  f"{np.unravel_index((err - bound).argmax(), err.shape)}")
    return float((err / np.where(bound > 0, bound, 1)).max())


@pytest.mark.parametrize("m, n, k", [(64, 64, 32), (1, 1, 1), (37, 53, 41), (70, 72, 80),
                                     (130, 9, 200), (16, 136, 24)])
def test_f16_odd_shapes(m, n, k):
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = sk.gemm(a, b, variant="tensor_core")
    assert c.dtype == np.float32 and c.shape == (m, n)
    assert_gemm_close(c, a, b)


@pytest.mark.parametrize("m, n, k", [(48, 40, 64), (33, 17, 35)])
def test_bf16(m, n, k):
    a = to_bf16(rng.standard_normal((m, k)))
    b = to_bf16(rng.standard_normal((k, n)))
    c = gemm_tc_bits(a, b, True)
    assert_gemm_close(c, from_bf16(a), from_bf16(b))


def test_every_output_written():
    """The kernel writes each element: launch it directly into a NaN-poisoned output."""
    from stdlib_kernels.gemm_tc import gemm_tc_kernel, BM, BN, THREADS
    m, n, k = 65, 66, 40
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    gemm_tc_kernel[(-(-n // BN), -(-m // BM)), THREADS](c, a.view(np.uint16), b.view(np.uint16),
                                                         False, True, False)
    assert not np.isnan(c).any()
    assert_gemm_close(c, a, b)


def test_empty_and_validation():
    z = sk.gemm(np.zeros((3, 0), np.float16), np.zeros((0, 5), np.float16), "tensor_core")
    np.testing.assert_array_equal(z, np.zeros((3, 5), np.float32))
    with pytest.raises(TypeError, match="a"):
        sk.gemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float16), "tensor_core")
    with pytest.raises(ValueError, match="b"):
        sk.gemm(np.ones((4, 4), np.float16), np.ones((5, 4), np.float16), "tensor_core")


@pytest.mark.slow
def test_larger_f16():
    a = rng.standard_normal((300, 257)).astype(np.float16)
    b = rng.standard_normal((257, 200)).astype(np.float16)
    assert_gemm_close(sk.gemm(a, b, variant="tensor_core"), a, b)


def test_zero_fill_edges_are_clean_under_the_sanitizer():
    """Aligned rows with ragged m, n, k: edge chunks are zero-fill cp_asyncs; the sanitizer sees
    every shared byte written (zeros included) and nothing read past the matrices."""
    import pyptx
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 24)).astype(np.float16)
    with pyptx.sanitize(race=True, init=True):
        c = sk.gemm(a, b, variant="tensor_core")
    assert_gemm_close(c, a, b)
