"""stdlib GEMM (naive and tiled) against a float64 reference, for shapes that are not tile
multiples."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from test_stdlib_refs import gemm_tol, poisoned, randn, rng

SHAPES = [(1, 1, 1), (7, 33, 1), (1, 7, 33), (33, 7, 65), (65, 100, 70), (7, 1000, 33),
          (70, 16, 64), (1, 4097, 7)]


def check(c, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - ref) <= gemm_tol(a, b)), np.max(np.abs(c - ref))


@pytest.mark.parametrize("variant", ["naive", "tiled"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_gemm_any_shape(variant, m, k, n):
    r = rng(m * 10000 + k * 100 + n)
    a, b = randn(r, m, k), randn(r, k, n)
    check(sk.gemm(a, b, variant), a, b)


def test_gemm_kernels_write_every_element():
    r = rng(1)
    a, b = randn(r, 70, 20), randn(r, 20, 67)
    c = poisoned((70, 67))
    sk.gemm_tiled_kernel[(2, 2), 256](c, a, b, 1)
    check(c, a, b)
    a4, b4 = randn(r, 70, 20), randn(r, 20, 68)            # k, n multiples of 4: 128-bit path
    c = poisoned((70, 68))
    sk.gemm_tiled_kernel[(2, 2), 256](c, a4, b4, 4)
    check(c, a4, b4)
    c = poisoned((70, 67))
    sk.gemm_naive_kernel[(5, 5), (16, 16)](c, a, b)
    check(c, a, b)


def test_gemm_empty_inner_dimension_gives_zeros():
    a, b = np.ones((3, 0), np.float32), np.ones((0, 5), np.float32)
    for variant in ("naive", "tiled"):
        np.testing.assert_array_equal(sk.gemm(a, b, variant), np.zeros((3, 5), np.float32))


@pytest.mark.slow
def test_gemm_tiled_llama_projection_slice():
    """A decode-sized slice of a Llama projection: [4, 4096] @ [4096, 128]."""
    r = rng(2)
    a, b = randn(r, 4, 4096), randn(r, 4096, 128)
    check(sk.gemm(a, b, "tiled"), a, b)
