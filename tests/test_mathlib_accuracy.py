"""Accuracy of pyptx.mathlib's f64 functions, measured through their numpy mirror
(tests/mathlib_emulation.py) against numpy float64 (glibc, < 1 ulp).  The f32 functions are
tested through kernels in tests/test_mathlib_f32.py.
"""
from fractions import Fraction

import numpy as np
import pytest

import mathlib_emulation as E

N = 200_000
NUMPY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin,
         "cos": np.cos, "tanh": np.tanh}


def _inputs(name, rng, n=N):
    if name == "exp":
        return np.concatenate([rng.uniform(-745.5, 710, n), rng.uniform(-2, 2, n // 4),
                               rng.uniform(-104, 89, n)])
    if name == "exp2":
        return np.concatenate([rng.uniform(-1076, 1025, n), rng.uniform(-2, 2, n // 4),
                               rng.uniform(-150, 129, n)])
    if name in ("log", "log2"):
        return np.concatenate([np.exp(rng.uniform(-744, 709, n)), rng.uniform(0.5, 2, n),
                               np.abs(rng.standard_normal(n // 4)),
                               rng.uniform(1e-45, 1e-38, n // 8)])
    if name in ("sin", "cos"):
        return np.concatenate([rng.uniform(-1e5, 1e5, n), rng.uniform(-4, 4, n // 4),
                               rng.integers(-63000, 63000, n // 4) * (np.pi / 2),
                               rng.standard_normal(n // 8) * 1e-3])
    return np.concatenate([rng.uniform(-25, 25, n), rng.uniform(-1, 1, n // 2),
                           rng.uniform(-1e-4, 1e-4, n // 8)])


def ulp_distance(a, b):
    """Number of representable values between a and b (same dtype), 0 for equal/both nan."""
    it = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = (v.view(it).astype(np.int64) for v in (a, b))
    lo = np.iinfo(it).min
    ia = np.where(ia < 0, lo - ia, ia)
    ib = np.where(ib < 0, lo - ib, ib)
    d = np.abs(ia - ib)
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def _run(name, dtype, x):
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    with np.errstate(all="ignore"):
        ours = E.FUNCS[f"{name}_f64"](x)
        ref = NUMPY[name](x)
        cr = NUMPY[name](x.astype(np.float64)).astype(dtype)
    return x, ours, ref, cr


def test_fma_emulation_is_exact():
    rng = np.random.default_rng(11)
    n = 3000
    a = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    c = -(a * b) * (1 + rng.standard_normal(n) * np.exp2(rng.integers(-60, 0, n)))
    c[:1000] = rng.standard_normal(1000)
    a[1000:1500] = rng.integers(1, 2**27, 500)
    b[1000:1500] = rng.integers(1, 2**27, 500)
    c[1000:1500] = rng.integers(-2**52, 2**52, 500)
    got = E.fma64(a, b, c)
    want = [float(Fraction(p) * Fraction(q) + Fraction(r)) for p, q, r in zip(a, b, c)]
    assert np.array_equal(got, np.array(want))


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_f64_within_2ulp_of_numpy(name):
    x, ours, ref, _ = _run(name, np.float64, _inputs(name, np.random.default_rng(3)))
    d = ulp_distance(ours, ref)
    assert d.max() <= 2, x[d.argmax()]
    assert np.mean(d == 0) > 0.8


SPECIALS = [
    ("exp", np.inf, np.inf), ("exp", -np.inf, 0.0), ("exp", np.nan, np.nan), ("exp", 0.0, 1.0),
    ("exp", -0.0, 1.0), ("exp", 1000.0, np.inf), ("exp", -1000.0, 0.0),
    ("exp2", np.inf, np.inf), ("exp2", -np.inf, 0.0), ("exp2", np.nan, np.nan),
    ("exp2", 10.0, 1024.0), ("exp2", -1074.0, 5e-324), ("exp2", 2000.0, np.inf),
    ("log", 0.0, -np.inf), ("log", -0.0, -np.inf), ("log", -1.0, np.nan), ("log", np.inf, np.inf),
    ("log", -np.inf, np.nan), ("log", np.nan, np.nan), ("log", 1.0, 0.0),
    ("log2", 0.0, -np.inf), ("log2", -2.0, np.nan), ("log2", np.inf, np.inf), ("log2", 8.0, 3.0),
    ("log2", 5e-324, -1074.0), ("log2", 1.0, 0.0),
    ("sin", np.inf, np.nan), ("sin", -np.inf, np.nan), ("sin", np.nan, np.nan), ("sin", -0.0, -0.0),
    ("sin", 0.0, 0.0), ("cos", np.inf, np.nan), ("cos", np.nan, np.nan), ("cos", -0.0, 1.0),
    ("tanh", np.inf, 1.0), ("tanh", -np.inf, -1.0), ("tanh", 50.0, 1.0), ("tanh", -50.0, -1.0),
    ("tanh", -0.0, -0.0), ("tanh", np.nan, np.nan),
]


@pytest.mark.parametrize("name,x,want", SPECIALS)
def test_special_values(name, x, want):
    dtype = np.float64
    got = E.FUNCS[f"{name}_f64"](np.array([x], dtype))[0]
    want = dtype(want)
    assert got.dtype == dtype
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == want and np.signbit(got) == np.signbit(want)


def test_denormal_results_match_numpy():
    rng = np.random.default_rng(4)
    x = rng.uniform(-745.1, -708.4, 20000)
    assert ulp_distance(E.FUNCS["exp_f64"](x), np.exp(x)).max() <= 1


def test_dsl_source_matches_emulation():
    """The DSL functions' own Python bodies, run on numpy scalars, give the mirror's bits."""
    rng = np.random.default_rng(6)
    for name in NUMPY:
        x = _inputs(name, rng, 40)[::3]
        x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -3.0]])
        for suffix, dt in (("f64", np.float64),):
            with np.errstate(over="ignore"):
                xs = x.astype(dt)
            with np.errstate(all="ignore"):
                want = E.FUNCS[f"{name}_{suffix}"](xs)
            got = E.run_dsl_source(f"{name}_{suffix}", xs)
            assert got.dtype == dt
            assert np.array_equal(got, want, equal_nan=True), (name, suffix)
            num = ~np.isnan(want)                    # a NaN's sign bit is not specified
            assert np.array_equal(np.signbit(got[num]), np.signbit(want[num])), (name, suffix)
