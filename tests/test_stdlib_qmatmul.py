"""Fused GGUF matmuls on the CPU executor against x @ dequant(w).T in float64.

Every path of every format, odd n, k multiples of the block, m in {1, 3, 17, 64}; scratch and
result arrays are poisoned (NaN / a byte pattern) before each run, so a value a kernel forgets to
write shows up.  Weights come from the library's quantisers applied to random data, plus raw
random blocks (every bit pattern of the quants and scales, not just what a quantiser makes).
Each element is held to its path's error bound (tests/qmatmul_reference.py: an error analysis,
about 10x the measured worst case), not to a blanket tolerance.  Non-finite and extreme
activations: tests/test_stdlib_qmatmul_ieee.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import qmatmul_reference as R
import stdlib_kernels as sk
from stdlib_kernels import qmatmul, quant as Q

FUNCS = {"q4_k": sk.q4k_matmul, "q6_k": sk.q6k_matmul, "q8_0": sk.q8_0_matmul}


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    def alloc(shape, dtype=np.float32):
        a = np.empty(shape, dtype)
        a[...] = np.nan if np.dtype(dtype).kind == "f" else 0x55
        return a
    monkeypatch.setattr(qmatmul, "_alloc", alloc)


def random_raw(rng, fmt, n, k):
    """Random block bytes with finite, moderate fp16 scales."""
    per, nbytes = Q.SIZES[fmt]
    raw = rng.integers(0, 256, (n * k // per, nbytes), dtype=np.uint8)
    pos = {"q4_k": (0, 2), "q6_k": (208,), "q8_0": (0,)}[fmt]
    for p in pos:
        d = (rng.uniform(0.5, 1.5, raw.shape[0]) * 0.01).astype(np.float16)
        raw[:, p:p + 2] = d.reshape(-1, 1).view(np.uint8)
    return raw.reshape(n, -1)


def check(fmt, path, m, n, k, seed, raw=False):
    rng = np.random.default_rng(seed)
    w = random_raw(rng, fmt, n, k) if raw else \
        Q.quantize(rng.standard_normal((n, k)).astype(np.float32), fmt)
    x = rng.standard_normal((m, k)).astype(np.float32)
    got = FUNCS[fmt](x, w, n, path=path)
    assert got.shape == (m, n) and got.dtype == np.float32
    R.check_result(got, x, w, fmt, path)


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", ["f32", "dp4a", "tiled", "mma"])
@pytest.mark.parametrize("m", [1, 3, 17, 64])
def test_paths_match_float64(fmt, path, m):
    k = 512 if m < 64 else 256
    check(fmt, path, m, 37, k, seed=m * 7 + len(path))


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", ["f32", "dp4a", "tiled", "mma"])
def test_raw_random_blocks(fmt, path):
    """Every scale/min/quant bit pattern decodes as gguf-py does (all 6-bit scales, int8 scales
    of both signs, Q8_0 values -128..127)."""
    check(fmt, path, 3, 21, 768, seed=11, raw=True)


def test_q8_0_small_k_and_flat_weight():
    rng = np.random.default_rng(5)
    w = Q.quantize_q8_0(rng.standard_normal((9, 96)).astype(np.float32))
    x = rng.standard_normal(96).astype(np.float32)
    for path in ("auto", "f32", "dp4a", "tiled", "mma"):
        got = sk.q8_0_matmul(x, w.reshape(-1), 9, path)
        assert got.shape == (9,)
        R.check_result(got, x, w, "q8_0", "dp4a" if path == "auto" else path)


@pytest.mark.parametrize("m", [1, 3, 17])
def test_gate_up_swiglu(m):
    rng = np.random.default_rng(m)
    n, k = 23, 512
    wg = Q.quantize_q4_k(rng.standard_normal((n, k)).astype(np.float32) * 0.05)
    wu = Q.quantize_q4_k(rng.standard_normal((n, k)).astype(np.float32) * 0.05)
    x = rng.standard_normal((m, k)).astype(np.float32)
    ref, bound = R.swiglu_bound(x, wg, wu)
    got = sk.q4k_gate_up_swiglu(x, wg, wu, n)
    assert got.shape == (m, n)
    assert (np.abs(got - ref) <= bound).all(), np.max(np.abs(got - ref) / bound)
    flat = sk.q4k_gate_up_swiglu(x[0], wg.reshape(-1), wu, n)
    assert flat.shape == (n,)
    np.testing.assert_array_equal(flat, got[0])         # the same kernel on the same row


def test_auto_path_and_zero_rows():
    rng = np.random.default_rng(2)
    w = Q.quantize_q6_k(rng.standard_normal((5, 256)).astype(np.float32))
    x = rng.standard_normal((9, 256)).astype(np.float32)
    np.testing.assert_array_equal(sk.q6k_matmul(x, w, 5), sk.q6k_matmul(x, w, 5, "mma"))
    R.check_result(sk.q6k_matmul(x, w, 5), x, w, "q6_k", "mma")            # m > 8: mma
    np.testing.assert_array_equal(sk.q6k_matmul(x[:2], w, 5), sk.q6k_matmul(x[:2], w, 5, "dp4a"))
    R.check_result(sk.q6k_matmul(x[:2], w, 5), x[:2], w, "q6_k", "dp4a")   # m ≤ 8: dp4a
    assert sk.q6k_matmul(x[:0], w, 5).shape == (0, 5)


@pytest.mark.parametrize("call,exc,word", [
    (lambda x, w: sk.q4k_matmul(x.astype(np.float64), w, 3), TypeError, "x"),
    (lambda x, w: sk.q4k_matmul(x[:, :100], w, 3), ValueError, "256"),
    (lambda x, w: sk.q4k_matmul(x, w.view(np.int8), 3), TypeError, "w"),
    (lambda x, w: sk.q4k_matmul(x, w[:, :-1], 3), ValueError, "w"),
    (lambda x, w: sk.q4k_matmul(x, w, 4), ValueError, "w"),
    (lambda x, w: sk.q4k_matmul(x, w, 0), ValueError, "n"),
    (lambda x, w: sk.q4k_matmul(x, w, 3.0), TypeError, "n"),
    (lambda x, w: sk.q4k_matmul(x, w, 2**30 + 1), ValueError, "2\\*\\*31"),
    (lambda x, w: sk.q4k_matmul(x, w, 3, path="fast"), ValueError, "path"),
    (lambda x, w: sk.q6k_matmul(x, w, 3), ValueError, "w"),
    (lambda x, w: sk.q4k_gate_up_swiglu(x, w, w[:2], 3), ValueError, "w_up"),
    (lambda x, w: sk.q4k_gate_up_swiglu(x, list(w), w, 3), TypeError, "w_gate"),
])
def test_bad_arguments(call, exc, word):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    w = Q.quantize_q4_k(rng.standard_normal((3, 256)).astype(np.float32))
    with pytest.raises(exc, match=word):
        call(x, w)


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", ["f32", "dp4a", "tiled", "mma"])
def test_nan_in_x_reaches_its_row_only(fmt, path):
    rng = np.random.default_rng(9)
    w = Q.quantize(rng.standard_normal((5, 256)).astype(np.float32), fmt)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    x[1, 77] = np.nan
    got = FUNCS[fmt](x, w, 5, path=path)
    assert np.isfinite(got[0]).all() and np.isnan(got[1]).all()
