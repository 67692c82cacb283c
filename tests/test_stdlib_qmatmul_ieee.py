"""The fused GGUF matmuls on non-finite and extreme activations (CPU executor).

The result must be what the float product x @ dequant(w).T gives: ±inf where that is ±inf, NaN
only where it has a NaN (inf·0, inf − inf, a NaN in x), and finite, within the path's error bound
(tests/qmatmul_reference.py), for huge and tiny finite activations.  Regressions of an adversarial
trial: the GEMV paths gave NaN for ±inf (their offset sums turn inf into inf − inf), and the dp4a
path overflowed to ±inf for |x| ≈ 3e38 on Q6_K/Q8_0 (the block scale times an integer sum before
the weight scale, Σx per 16 in f32) and produced garbage for max|x| < 3.7e-37 (127/max|x| = inf).
"""
from __future__ import annotations

import numpy as np
import pytest

import qmatmul_reference as R
import stdlib_kernels as sk
from stdlib_kernels import qmatmul, quant as Q
from test_stdlib_qmatmul import poisoned  # noqa: F401  (autouse: NaN-poisoned outputs)

FUNCS = {"q4_k": sk.q4k_matmul, "q6_k": sk.q6k_matmul, "q8_0": sk.q8_0_matmul}
PATHS = ["f32", "dp4a", "tiled", "mma"]
N, K = 7, 512
#: x position whose weight in row 0 is exactly 0 (P < 32: inside Q4_K sub-block 0, whose min is 0)
P = 3


def weights(fmt, rng, scale=0.02):
    """[N, K] Gaussian·scale weights, quantised, with weight (0, P) exactly 0 and (j, P) ≠ 0 for
    j > 0: inf at x[P] must give NaN in column 0 only."""
    for _ in range(20):
        dense = (rng.standard_normal((N, K)) * scale).astype(np.float32)
        dense[0, :32] = np.abs(dense[0, :32])     # a Q4_K sub-block ≥ 0: min 0, so q = 0 is 0
        dense[0, P] = 0.0
        w = Q.quantize(dense, fmt)
        wd = R.dequant(w, fmt)
        if wd[0, P] == 0 and (wd[1:, P] != 0).all():
            return w
    raise AssertionError("no weights with the wanted zero pattern")


def compare(got, x, w, fmt, path):
    """Non-finite elements equal the float product's (NaN where it is NaN, the same infinity);
    finite ones are within the path's bound."""
    ref = R.product(x, R.dequant(w, fmt))
    got = np.asarray(got)
    assert got.shape == ref.shape
    bad = ~np.isfinite(ref)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=f"{fmt} {path}: NaNs")
    inf = np.isinf(ref)
    np.testing.assert_array_equal(got[inf], ref[inf], err_msg=f"{fmt} {path}: infinities")
    if (~bad).any():
        R.check_result(got, x, w, fmt, path, where=~bad)


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", PATHS)
def test_inf_follows_the_float_product(fmt, path):
    """Rows: +inf at P (column 0 meets a zero weight: NaN; the rest ±inf), −inf late in the row
    (another block and lane), +inf and −inf in one row (inf − inf where the two weights have the
    same sign), a NaN, a finite row (untouched by its neighbours), then rows 5..9 so that the
    GEMV paths take a second launch of 8 rows with a −inf in it."""
    rng = np.random.default_rng(1)
    w = weights(fmt, rng)
    x = rng.standard_normal((10, K)).astype(np.float32)
    x[0, P] = np.inf
    x[1, K - 5] = -np.inf
    x[2, 40], x[2, 300] = np.inf, -np.inf
    x[3, 77] = np.nan
    x[9, 129] = -np.inf
    ref = R.product(x, R.dequant(w, fmt))
    assert np.isnan(ref[0, 0]) and np.isinf(ref[0, 1:]).all() and np.isfinite(ref[4]).all()
    assert np.isnan(ref[2]).any() and np.isinf(ref[2]).any()       # both cases in the mixed row
    compare(FUNCS[fmt](x, w, N, path=path), x, w, fmt, path)


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", PATHS)
def test_huge_activations_stay_finite(fmt, path):
    """|x| up to 3e38 with weights ~0.02: the float product is ~1e36-1e37, finite.  Row 0 one
    3e38, row 1 a whole block of ±3e38 (Σ|x| over 16 overflows f32), row 2 one −3e38 late, row 3
    ordinary.  The f32 path's mantissa trick overflows there and its float fallback answers;
    dp4a and mma (the same x̃, xd applied last) must not need it: its arithmetic is exact under power-of-2 scaling as long as nothing
    overflows, so the result is bit for bit 2^100 times that of x·2^-100 (the fallback, which
    multiplies x instead of its quantised x̃, would differ)."""
    rng = np.random.default_rng(2)
    w = weights(fmt, rng)
    x = rng.standard_normal((4, K)).astype(np.float32)
    x[0, 5] = 3e38
    x[1, 32:64] = rng.choice([-3e38, 3e38], 32).astype(np.float32)
    x[2, K - 40] = -3e38
    ref = R.product(x, R.dequant(w, fmt))
    assert np.isfinite(ref).all() and np.abs(ref).max() > 1e36
    got = FUNCS[fmt](x, w, N, path=path)
    R.check_result(got, x, w, fmt, path)
    if path in ("dp4a", "mma"):
        small = FUNCS[fmt](x * np.float32(2.0 ** -100), w, N, path=path)
        np.testing.assert_array_equal(got, small * np.float32(2.0 ** 100))


@pytest.mark.parametrize("fmt", FUNCS)
@pytest.mark.parametrize("path", PATHS)
def test_tiny_activations(fmt, path):
    """max|x| per block below 127/FLT_MAX ≈ 3.7e-37 (127/max|x| overflows f32; the dp4a scale is
    then a subnormal), weights ~100 so that the products are normal floats."""
    rng = np.random.default_rng(3)
    w = weights(fmt, rng, scale=100.0)
    x = (rng.uniform(2e-37, 3.5e-37, (2, K)) * rng.choice([-1, 1], (2, K))).astype(np.float32)
    got = FUNCS[fmt](x, w, N, path=path)
    R.check_result(got, x, w, fmt, path)


def test_act_q8_scales_never_overflow():
    """act_q8_kernel's contract, block by block: |x − x̃| ≤ xd/508 + 4u·|x| + 2^-143, hi and lo in
    −127..127, xs = Σ(hi + lo/254) per 16 finite, for blocks of ordinary, huge (3e38, and a
    whole block of ±3e38) and tiny (1e-38, subnormals, zeros) activations; a block with an inf
    or NaN gets xd = NaN (its sums are recomputed in floats), the other blocks stay exact."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    x[1, 3] = 3e38
    x[2] = rng.choice([-3e38, 3e38], 32)
    x[3] *= np.float32(1e-38)
    x[4] = 0.0
    x[4, 7] = 1e-45
    x[5, 9] = np.inf
    x[6, 1] = -np.inf
    x[7, 30] = np.nan
    xh, xl, xd, xs = qmatmul.prepare_q8(x)
    fin = np.isfinite(x).all(1)
    assert np.isnan(xd[~fin]).all() and np.isfinite(xd[fin]).all()
    assert np.isfinite(xs.reshape(8, 2)[fin]).all()
    xt = R.x_tilde(xh, xl, xd).reshape(8, 32)[fin]
    xf = x[fin].astype(np.float64)
    d = np.abs(xf).max(1, keepdims=True) / 127
    assert (np.abs(xt - xf) <= d / (2 * R.RES) + R.X_REL * np.abs(xf) + R.X_ABS).all()
    assert (np.abs(xh) <= 127).all() and (np.abs(xl) <= 127).all()
    # xs = Σhi + Σlo·fl(1/254) in f32: Σhi exact, the product and the add round (u each), and
    # fl(1/254) is off by u relative
    hs = xh.astype(np.float64).reshape(8, 2, 16).sum(-1)[fin]
    ls = xl.astype(np.float64).reshape(8, 2, 16).sum(-1)[fin] / R.RES
    err = np.abs(xs.reshape(8, 2)[fin] - (hs + ls))
    assert (err <= 2 * R.U * np.abs(ls) + R.U * np.abs(hs + ls)).all()


def test_fused_gate_up_swiglu_follows_the_float_formula_on_non_finite_sums():
    """q4k_gate_up_swiglu = swiglu(x·Wgᵀ, x·Wuᵀ) with each sum as the float product gives it
    (docs/decisions.md): with ±inf / NaN activations the fused kernel's fast sums are redone in
    f32 like the GEMV's, so the result equals swiglu of `q4k_matmul`'s f32 path element for
    element — the same infinities, NaN exactly where the formula g/(1 + e^−g)·u is NaN (g = −inf:
    −inf/inf, as torch's silu and ggml's) — and huge finite activations (3e38) do not overflow
    the sums.  Finite elements: the two paths sum the same products in the same order except
    the fused epilogue's fast_exp (a few ulp, see qgemv.swiglu_f32) — measured 6e-8 relative on
    ordinary rows; bound 1e-5 relative to max(|result|, 1e-30)."""
    rng = np.random.default_rng(6)
    wg, wu = weights("q4_k", rng), weights("q4_k", rng)
    x = rng.standard_normal((10, K)).astype(np.float32)
    x[0, P] = np.inf
    x[1, K - 5] = -np.inf
    x[2, 40], x[2, 300] = np.inf, -np.inf
    x[3, 77] = np.nan
    x[5, 9] = 3e38
    x[9, 129] = -np.inf
    got = sk.q4k_gate_up_swiglu(x, wg, wu, N)
    g = sk.q4k_matmul(x, wg, N, path="f32")
    u = sk.q4k_matmul(x, wu, N, path="f32")
    want = sk.swiglu(g, u)
    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want[4]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    fin = np.isfinite(want)
    assert np.isfinite(g[5]).all() and np.isfinite(u[5]).all()     # 3e38 · 0.02 fits in f32
    rel = np.abs(got[fin] - want[fin]) / np.maximum(np.abs(want[fin]), 1e-30)
    assert rel.max() <= 1e-5, rel.max()
