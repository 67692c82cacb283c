"""stdlib softmax against a float64 reference: odd row lengths, both kernels, ±80 inputs, axes."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from test_stdlib_refs import SIZES, poisoned, randn, rng, softmax_ref

RTOL, ATOL = 2e-5, 1e-10


@pytest.mark.parametrize("n", SIZES)
def test_softmax_rows_of_odd_lengths(n):
    x = randn(rng(n), 3, n, scale=4.0)
    np.testing.assert_allclose(sk.softmax(x), softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n_rows,n", [(1, 7), (9, 33), (3, 1000)])
def test_softmax_warp_kernel_writes_every_element(n_rows, n):
    x = randn(rng(10 + n), n_rows, n, scale=3.0)
    out = poisoned(x.shape)
    vec = 4 if n % 4 == 0 else 1
    chunks = -(-n // (32 * vec))
    sk.softmax_warp_kernel[(n_rows + 7) // 8, 256](out, x, vec, 1 << (chunks - 1).bit_length())
    np.testing.assert_allclose(out, softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("block,n,chunks", [(32, 1, 1), (128, 33, 0), (256, 1000, 1),
                                            (1024, 4097, 0), (1024, 4100, 0), (256, 4100, 8)])
def test_softmax_block_kernel_writes_every_element(block, n, chunks):
    """Both paths: row in registers (chunks > 0) and streamed (chunks == 0)."""
    x = randn(rng(20 + n), 2, n, scale=3.0)
    out = poisoned(x.shape)
    sk.softmax_block_kernel[2, block](out, x, block, 4 if n % 4 == 0 else 1, chunks)
    np.testing.assert_allclose(out, softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n", [33, 4097])
def test_softmax_is_stable_at_plus_minus_80(n):
    r = rng(30 + n)
    x = (r.choice([-80.0, 80.0], size=(2, n)) + r.uniform(-1, 1, (2, n))).astype(np.float32)
    x[1] = -80.0 - r.uniform(0, 1, n).astype(np.float32)      # a row with only large negatives
    y = sk.softmax(x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, softmax_ref(x), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-5)


def test_softmax_huge_magnitudes_do_not_overflow():
    x = randn(rng(40), 2, 50, scale=1e30)
    y = sk.softmax(x)
    np.testing.assert_allclose(y, softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_softmax_along_any_axis(axis):
    x = randn(rng(50), 3, 5, 7, scale=2.0)
    y = sk.softmax(x, axis=axis)
    assert y.shape == x.shape
    np.testing.assert_allclose(y, softmax_ref(x, axis=axis), rtol=RTOL, atol=ATOL)


def test_softmax_one_dimensional_and_empty():
    x = randn(rng(60), 300)
    np.testing.assert_allclose(sk.softmax(x), softmax_ref(x), rtol=RTOL, atol=ATOL)
    assert sk.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)


def test_softmax_llama_vocab_row():
    """A Llama-vocabulary logits row (32000) goes through the block kernel."""
    x = randn(rng(70), 1, 32000, scale=5.0)
    np.testing.assert_allclose(sk.softmax(x), softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.slow
def test_softmax_100k_row():
    x = randn(rng(80), 2, 100_000, scale=10.0)
    np.testing.assert_allclose(sk.softmax(x), softmax_ref(x), rtol=RTOL, atol=ATOL)
