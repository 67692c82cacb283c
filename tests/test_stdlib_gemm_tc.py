"""gemm(variant="tensor_core"): f16 and bf16 inputs, f32 accumulation, odd shapes (masked tails,
the element-wise staging path when rows are not 16-byte aligned), against a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from pyptx.bfloat16 import from_bf16, to_bf16
from stdlib_kernels.gemm_tc import gemm_tc_bits

rng = np.random.default_rng(77)


def _rel_err(got, ref):
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@pytest.mark.parametrize("m, n, k", [(64, 64, 32), (1, 1, 1), (37, 53, 41), (70, 72, 80),
                                     (130, 9, 200), (16, 136, 24)])
def test_f16_odd_shapes(m, n, k):
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = sk.gemm(a, b, variant="tensor_core")
    assert c.dtype == np.float32 and c.shape == (m, n)
    assert _rel_err(c, a.astype(np.float64) @ b.astype(np.float64)) < 2e-3


@pytest.mark.parametrize("m, n, k", [(48, 40, 64), (33, 17, 35)])
def test_bf16(m, n, k):
    a = to_bf16(rng.standard_normal((m, k)))
    b = to_bf16(rng.standard_normal((k, n)))
    c = gemm_tc_bits(a, b, True)
    ref = from_bf16(a).astype(np.float64) @ from_bf16(b).astype(np.float64)
    assert _rel_err(c, ref) < 2e-3


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
    assert _rel_err(c, a.astype(np.float64) @ b.astype(np.float64)) < 2e-3


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
    assert _rel_err(sk.gemm(a, b, variant="tensor_core"),
                    a.astype(np.float64) @ b.astype(np.float64)) < 2e-3


def test_zero_fill_edges_are_clean_under_the_sanitizer():
    """Aligned rows with ragged m, n, k: edge chunks are zero-fill cp_asyncs; the sanitizer sees
    every shared byte written (zeros included) and nothing read past the matrices."""
    import pyptx
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 24)).astype(np.float16)
    with pyptx.sanitize(race=True, init=True):
        c = sk.gemm(a, b, variant="tensor_core")
    assert _rel_err(c, a.astype(np.float64) @ b.astype(np.float64)) < 2e-3
