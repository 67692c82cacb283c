"""Row kernels on rows whose length is not a multiple of 4: rows then start at every offset from
a 16-byte boundary (row·n mod 4 = 0..3), so each kernel reads a partial head chunk, aligned
128-bit chunks and a partial tail.  The CPU executor faults on a misaligned 16-byte access and
on any out-of-row access; outputs are NaN-poisoned so an element left unwritten fails."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import _rows
from test_stdlib_refs import layernorm_ref, poisoned, randn, rmsnorm_ref, rng, softmax_ref

RTOL, ATOL = 2e-5, 1e-6
ROWS = 5                      # rows 0..4 start at offsets 0, n, 2n, 3n, 4n: every residue mod 4


@pytest.mark.parametrize("n", [5, 7, 1001, 4097])
def test_wrappers_on_misaligned_rows(n):
    r = rng(400 + n)
    x, w, b = randn(r, ROWS, n, scale=3.0), randn(r, n), randn(r, n)
    np.testing.assert_allclose(sk.softmax(x), softmax_ref(x), rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(sk.rmsnorm(x, w), rmsnorm_ref(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sk.layernorm(x, w, b), layernorm_ref(x, w, b, 1e-5), rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("block,n,chunks", [(32, 5, 1), (32, 1001, 8), (128, 1001, 0),
                                            (256, 4097, 8), (256, 4097, 0), (64, 3, 0)])
def test_row_kernels_both_paths_every_offset(block, n, chunks):
    """Register-resident (chunks > 0) and streamed (chunks == 0) paths with VEC = 1."""
    r = rng(500 + n + chunks)
    x, w, b = randn(r, ROWS, n, scale=3.0), randn(r, n), randn(r, n)
    out = poisoned(x.shape)
    sk.softmax_block_kernel[ROWS, block](out, x, block, 1, chunks)
    np.testing.assert_allclose(out, softmax_ref(x), rtol=RTOL, atol=1e-10)
    out = poisoned(x.shape)
    sk.rmsnorm_kernel[ROWS, block](out, x, w, 1e-6, block, 1, chunks)
    np.testing.assert_allclose(out, rmsnorm_ref(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    out = poisoned(x.shape)
    sk.layernorm_kernel[ROWS, block](out, x, w, b, 1e-5, block, 1, chunks)
    np.testing.assert_allclose(out, layernorm_ref(x, w, b, 1e-5), rtol=RTOL, atol=ATOL)


def test_warp_softmax_every_offset():
    x = randn(rng(600), 11, 1001, scale=3.0)
    out = poisoned(x.shape)
    cfg = _rows.row_config(1001, 32)
    sk.softmax_warp_kernel[2, 256](out, x, cfg.vec, cfg.chunks)
    np.testing.assert_allclose(out, softmax_ref(x), rtol=RTOL, atol=1e-10)


def test_softmax_partial_chunks_do_not_count_fill():
    """Rows of -FLT_MAX equal the -FLT_MAX fill of a partial chunk's outside columns, so
    e^(fill - max) = 1: those columns must be left out of the sum (each output is 1/n)."""
    x = np.full((4, 5), np.finfo(np.float32).min, np.float32)
    np.testing.assert_allclose(sk.softmax(x), np.full((4, 5), 0.2, np.float32), rtol=1e-6)


@pytest.mark.parametrize("kernel,cx", [
    (sk.softmax_warp_kernel, {"VEC": 1, "CHUNKS": 8}),
    (sk.softmax_block_kernel, {"BLOCK": 256, "VEC": 1, "CHUNKS": 0}),
    (sk.rmsnorm_kernel, {"BLOCK": 256, "VEC": 1, "CHUNKS": 4}),
    (sk.layernorm_kernel, {"BLOCK": 1024, "VEC": 1, "CHUNKS": 0}),
])
def test_misaligned_row_kernels_use_128_bit_accesses(kernel, cx):
    ptx = pyptx.compile(kernel, constexprs=cx).ptx
    assert ".v4.f32" in ptx and "ld.global" in ptx
    assert any("ld.global" in line and ".v4.f32" in line for line in ptx.splitlines())
    assert any("st.global" in line and ".v4.f32" in line for line in ptx.splitlines())
