"""The f64 atan atan2 asin acos cbrt erf erfc (pyptx/mathlib/numba_parity_f64.py) through real kernels
on the CPU executor (= the GPU bit for bit: IEEE-exact operations only) against a correctly
rounded mpmath reference: >= 10^5 inputs each over the whole range (log-uniform magnitudes, both
signs, the reduction boundaries, the edges), every special value, integer arguments, and
fma contraction not changing any bit.  The measured maximum ulp errors are asserted (MAX_ULP,
docs/math.md) and printed (pytest -s)."""
import math

import numpy as np
import pytest

import pyptx
from pyptx import f32, f64, i32
from test_mathlib_accuracy import ulp_distance

mp = pytest.importorskip("mpmath")

N = 100_000
#: measured max ulp error against the correctly rounded result (the contract asks for <= 2)
MAX_ULP = {"atan": 1, "atan2": 1, "asin": 1, "acos": 1, "cbrt": 0, "erf": 1, "erfc": 1}
MP = {"atan": mp.atan, "atan2": mp.atan2, "asin": mp.asin, "acos": mp.acos,
      "cbrt": lambda v: mp.sign(v) * mp.cbrt(abs(v)), "erf": mp.erf, "erfc": mp.erfc}
TINY = 2.0 ** -1022


def correctly_rounded(name, *args):
    """RN(f(args)) in f64 from a 60-digit mpmath value (denormals rounded on their own grid)."""
    with mp.workdps(60):
        a = [mp.mpf(float(v)) for v in args]
        if name in ("asin", "acos") and abs(a[0]) > 1:
            return math.nan
        if name in ("erf", "erfc") and abs(a[0]) > 40:     # (mpmath overflows far out)
            return (math.copysign(1.0, a[0]) if name == "erf" else 1.0 - math.copysign(1.0, a[0]))
        v = MP[name](*a)
        if v == 0:                                  # mpmath has no -0.0
            if name == "atan2":
                return float(np.arctan2(*args))
            return math.copysign(0.0, args[0]) if name not in ("acos", "erfc") else 0.0
        if abs(v) < TINY:
            return math.copysign(float(mp.ldexp(mp.nint(mp.ldexp(v, 1074)), -1074)), v)
        return float(v)


def _logu(rng, n, lo, hi):
    """n values with log2 |x| uniform in [lo, hi), random signs."""
    return np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)


def _near(rng, points, n, ulps=64):
    """n values within `ulps` ulps of the given points."""
    p = rng.choice(np.asarray(points, np.float64), n)
    return p + rng.integers(-ulps, ulps + 1, n) * np.spacing(np.abs(p))


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 5e-324,
            -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308]


def _inputs(name, rng):
    q = N // 4
    if name == "atan":
        parts = [_logu(rng, q, -1074, 1024), _logu(rng, q, -30, 30), rng.uniform(-4, 4, q),
                 _near(rng, [7 / 16, 11 / 16, 1, 16 / 11, 16 / 7, 2 ** -27, 1e16], q)]
    elif name in ("asin", "acos"):
        parts = [rng.uniform(-1, 1, q), _logu(rng, q, -60, 0),
                 (1 - np.exp2(rng.uniform(-53, -1, q))) * rng.choice([-1.0, 1.0], q),
                 _near(rng, [0.5, -0.5, 1, -1, 0.9, -0.9], q)]
    elif name == "cbrt":
        k = rng.integers(1, 2 ** 17, q).astype(np.float64) * np.exp2(rng.integers(-300, 300, q))
        parts = [_logu(rng, q, -1074, 1024), _logu(rng, q, -10, 10), k ** 3 * rng.choice([-1, 1], q),
                 _near(rng, [1, 2, 4, 8, 1e-310, 1e300], q)]
    elif name == "erf":
        parts = [_logu(rng, q, -1074, 3), rng.uniform(-6, 6, q), rng.uniform(-1.5, 1.5, q),
                 _near(rng, [0.84375, -0.84375, 2, -2, 4, -4, 5.9, -5.9], q)]
    else:                                           # erfc
        parts = [_logu(rng, q, -1074, 5), rng.uniform(-6, 28, q), rng.uniform(26, 27.3, q),
                 _near(rng, [0.84375, -0.84375, 2, 4, 27.5, 0.5], q)]
    return np.concatenate([np.array(SPECIALS)] + parts)


def _kernel(name, ty, fma=True, binary=False, out_ty=f64):
    fn = getattr(pyptx.math, name)
    if binary:
        def k(out: out_ty[:], y: ty[:], x: ty[:], n: i32):
            i = pyptx.grid(1)
            if i < n:
                out[i] = fn(y[i], x[i])
    else:
        def k(out: out_ty[:], x: ty[:], n: i32):
            i = pyptx.grid(1)
            if i < n:
                out[i] = fn(x[i])
    k.__name__ = f"mathlib_f64_{name}_{ty}_{out_ty}_{int(fma)}"
    return pyptx.kernel(k, fma=fma)


def _run(name, *args, fma=True):
    out = np.full(len(args[0]), np.nan)
    n = len(out)
    _kernel(name, f64, fma, len(args) == 2)[(n + 255) // 256, 256](out, *args, n)
    return out


def _check(name, got, args):
    want = np.array([correctly_rounded(name, *a) for a in zip(*args)])
    d = ulp_distance(got, want)
    worst = int(d.argmax())
    print(f"\n{name}_f64: {len(got)} inputs, max {d.max()} ulp, "
          f"{100 * np.mean(d == 0):.2f} % correctly rounded")
    assert d.max() <= MAX_ULP[name] <= 2, ([a[worst] for a in args], got[worst], want[worst])
    num = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("name", ["atan", "asin", "acos", "cbrt", "erf", "erfc"])
def test_unary_against_mpmath(name, cpu_device):
    x = _inputs(name, np.random.default_rng(sorted(MAX_ULP).index(name)))
    _check(name, _run(name, x), (x,))


def _atan2_inputs(rng):
    q = N // 4
    y = np.concatenate([_logu(rng, q, -1074, 1024), _logu(rng, q, -20, 20),
                        rng.uniform(-3, 3, q), _logu(rng, q, -3, 3)])
    x = np.concatenate([_logu(rng, q, -1074, 1024), _logu(rng, q, -20, 20),
                        rng.uniform(-3, 3, q), _logu(rng, q, -3, 3)])
    # every quadrant near the diagonals and axes: y / x close to 0, +-7/16, +-11/16, +-1
    r = rng.choice([7 / 16, 11 / 16, 1.0, 16 / 11, 16 / 7], q) * (1 + rng.integers(-40, 40, q)
                                                                 * 2.0 ** -52)
    x[-q:] = _logu(rng, q, -10, 10)
    y[-q:] = x[-q:] * r * rng.choice([-1.0, 1.0], q)
    return y, x


def test_atan2_against_mpmath(cpu_device):
    y, x = _atan2_inputs(np.random.default_rng(20))
    _check("atan2", _run("atan2", y, x), (y, x))


def test_atan2_special_values_as_numpy(cpu_device):
    """Every pair of +-0, +-inf, nan, +-1, +-tiny, +-huge: C99 Annex F, as numpy.arctan2."""
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, -5e-324, 1e308,
                  -1e308, 3.0, -3.0])
    y, x = (a.ravel() for a in np.meshgrid(v, v))
    got = _run("atan2", y, x)
    want = np.arctan2(y, x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    num = ~np.isnan(want)
    assert np.array_equal(got[num], want[num])
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))


#: (function, x, exact result; None: the correctly rounded value, a denormal or inexact one)
SPECIAL_CASES = [
    ("atan", np.inf, math.pi / 2), ("atan", -np.inf, -math.pi / 2), ("atan", -0.0, -0.0),
    ("atan", 0.0, 0.0), ("atan", np.nan, np.nan), ("atan", 1e-320, 1e-320),
    ("atan", 1.0, math.pi / 4), ("atan", -1e300, -math.pi / 2),
    ("asin", 1.0, math.pi / 2), ("asin", -1.0, -math.pi / 2), ("asin", -0.0, -0.0),
    ("asin", 1.0000000000000002, np.nan), ("asin", -np.inf, np.nan), ("asin", np.nan, np.nan),
    ("acos", 1.0, 0.0), ("acos", -1.0, math.pi), ("acos", 0.0, math.pi / 2),
    ("acos", -0.0, math.pi / 2), ("acos", 2.0, np.nan), ("acos", np.inf, np.nan),
    ("cbrt", 0.0, 0.0), ("cbrt", -0.0, -0.0), ("cbrt", np.inf, np.inf), ("cbrt", -np.inf, -np.inf),
    ("cbrt", np.nan, np.nan), ("cbrt", -27.0, -3.0), ("cbrt", 5e-324, None),
    ("cbrt", 2.0 ** -1071, 2.0 ** -357), ("cbrt", 1e300, None), ("cbrt", -2.0 ** 1023, None),
    ("erf", np.inf, 1.0), ("erf", -np.inf, -1.0), ("erf", 0.0, 0.0), ("erf", -0.0, -0.0),
    ("erf", np.nan, np.nan), ("erf", 6.0, 1.0), ("erf", -1e-320, None), ("erf", 1e-300, None),
    ("erfc", np.inf, 0.0), ("erfc", -np.inf, 2.0), ("erfc", 0.0, 1.0), ("erfc", -0.0, 1.0),
    ("erfc", np.nan, np.nan), ("erfc", 27.3, 0.0), ("erfc", -7.0, 2.0), ("erfc", 1e-20, 1.0),
    ("erfc", 27.2, None), ("erfc", 26.6, None),
]


@pytest.mark.parametrize("name", sorted(MAX_ULP.keys() - {"atan2"}))
def test_special_values(name, cpu_device):
    cases = [(x, w) for n, x, w in SPECIAL_CASES if n == name]
    x = np.array([c[0] for c in cases])
    want = np.array([correctly_rounded(name, c[0]) if c[1] is None else c[1] for c in cases])
    got = _run(name, x)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (x, got)
    num = ~np.isnan(want)
    assert np.array_equal(got[num], want[num]), (x[num], got[num], want[num])
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))


def test_integer_arguments_compute_in_f64(cpu_device):
    """`math.atan(i)` with i: i32 is f64, as Python's math module gives floats."""
    def k(out: f64[:], i: i32[:], j: i32[:], n: i32):
        t = pyptx.grid(1)
        if t < n:
            out[3 * t] = math.atan(i[t])
            out[3 * t + 1] = math.atan2(i[t], j[t])
            out[3 * t + 2] = math.cbrt(i[t]) + math.erfc(j[t] // 100000000)
    rng = np.random.default_rng(9)
    i = rng.integers(-2 ** 31, 2 ** 31, 3000).astype(np.int32)
    j = rng.integers(-2 ** 31, 2 ** 31, 3000).astype(np.int32)
    i[:3] = [0, 1, -2 ** 31]
    out = np.full(3 * len(i), np.nan)
    pyptx.kernel(k)[12, 256](out, i, j, len(i))
    want = np.stack([[math.atan(a), math.atan2(a, b),
                      correctly_rounded("cbrt", float(a)) + math.erfc(int(b) // 100000000)]
                     for a, b in zip(i.tolist(), j.tolist())]).ravel()
    assert ulp_distance(out, want).max() <= 1
    assert "cvt.rn.f64.s32" in pyptx.compile(pyptx.kernel(k), arch="sm_80").ptx


@pytest.mark.parametrize("name", sorted(MAX_ULP))
def test_fma_contraction_does_not_change_bits(name, cpu_device):
    rng = np.random.default_rng(3)
    x = np.ascontiguousarray(_inputs(name if name != "atan2" else "atan", rng)[:: N // 2000])
    args = (x, x[::-1].copy()) if name == "atan2" else (x,)
    a = _run(name, *args, fma=True)
    b = _run(name, *args, fma=False)
    assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("name", sorted(MAX_ULP))
def test_ptx_is_ieee_exact_and_f32_unchanged(name):
    """No .approx instruction in the f64 versions; the f32 versions still compute in f32."""
    binary = name == "atan2"
    ptx = pyptx.compile(_kernel(name, f64, binary=binary), arch="sm_80").ptx
    assert ".approx" not in ptx and "fma.rn.f64" in ptx
    ptx32 = pyptx.compile(_kernel(name, f32, binary=binary, out_ty=f32), arch="sm_80").ptx
    assert not [ln for ln in ptx32.splitlines() if not ln.lstrip().startswith("//")
                and (".f64" in ln or "%fd" in ln)]
