"""pow / math.pow / run-time `x ** y` (pyptx/mathlib/pow.py, pyptx/frontend/power.py) through
real kernels on the CPU executor (which runs the same PTX as the GPU, with only IEEE-exact
operations in it, so the accuracy measured here is the GPU's).

f32: 2^20 input pairs in one launch (magnitudes log-uniform over the whole range, both signs,
integer y, y near 0, results near overflow / underflow and subnormal, x near 1 with large y)
against numpy float64 rounded to f32 and against numpy's own float32 np.power.  f64: 10^5 pairs
against a 60-digit mpmath reference.  Every C99 special case exactly, signs included.
"""
import math

import mpmath as mp
import numpy as np
import pytest

import pyptx
from pyptx import bf16, f16, f32, f64, i32, i64, u32
from test_mathlib_accuracy import ulp_distance
from test_mathlib_f32 import _bf16_to_f32, _f32_to_bf16

N32 = 1 << 20
N64 = 100_000
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 0.25, 1.5, -1.5, 2.5, -7.0,
           1e-45, -1e-45, 1e-40, 3.4028235e38, -3.4028235e38, 16777216.0, 16777217.0,
           -16777215.0, 33554432.0, 1e30, -1e30, np.inf, -np.inf, np.nan]


def _pow_kernel(ty, name, fma=True):
    def k(out: ty[:], x: ty[:], y: ty[:], n: i32):
        i = pyptx.grid(1)
        if i < n:
            out[i] = pyptx.math.pow(x[i], y[i])
    k.__name__ = name
    return pyptx.kernel(k, fma=fma)


POW32 = _pow_kernel(f32, "pow_f32_test")
POW64 = _pow_kernel(f64, "pow_f64_test")


def _run(kern, x, y):
    out = np.full_like(x, np.nan)                  # poisoned: every lane must write
    kern[(len(x) + 255) // 256, 256](out, x, y, len(x))
    return out


def _bits_spread(rng, n, max_abs, dtype=np.float32):
    """n values with random bit patterns up to max_abs (log-uniform magnitudes), random signs."""
    it = np.uint32 if dtype == np.float32 else np.uint64
    top = int(np.array(max_abs, dtype).view(it))
    v = rng.integers(0, top + 1, n, dtype=it).view(dtype)
    return v * rng.choice(np.array([-1, 1], dtype), n)


def _y_for(x, w):
    """y with y * log2|x| = w (so the result's magnitude is 2^w), in x's dtype."""
    with np.errstate(all="ignore"):
        return (w / np.log2(np.abs(x.astype(np.float64)))).astype(x.dtype)


def _inputs32(rng):
    q = N32 // 8
    xs, ys = [], []

    def add(x, y):
        xs.append(np.asarray(x, np.float32))
        ys.append(np.asarray(y, np.float32))

    x = _bits_spread(rng, 3 * q, 3.4028235e38)                       # whole range, any result
    y = _y_for(x, rng.uniform(-160, 135, 3 * q))
    y[::2] = np.rint(y[::2])                                          # integer y: negative x too
    add(x, y)
    x = _bits_spread(rng, q, 3.4028235e38)                            # y near 0
    add(x, _bits_spread(rng, q, 1e-3))
    x = _bits_spread(rng, q, 64.0)                                    # small integer powers
    add(x, rng.integers(-40, 41, q))
    x = _bits_spread(rng, q, 3.4028235e38)                            # near overflow/underflow,
    w = rng.choice([128.0, -126.0, -149.0, -150.0, -140.0], q)        # subnormal results
    add(x, _y_for(x, w + rng.uniform(-0.02, 0.02, q)))
    x = (1 + rng.integers(-1 << 14, 1 << 14, q) * 2.0 ** -24).astype(np.float32)  # x near 1
    add(x, _y_for(x, rng.uniform(-150, 128, q)))
    add(rng.uniform(0, 4, q), rng.uniform(-8, 8, q))
    sx, sy = np.meshgrid(np.float32(SPECIAL), np.float32(SPECIAL))
    add(sx.ravel(), sy.ravel())
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert len(x) >= 1_000_000
    return x, y


@pytest.fixture(scope="module")
def f32_results():
    x, y = _inputs32(np.random.default_rng(7))
    with pytest.MonkeyPatch.context() as mp_:
        mp_.setenv("PYPTX_DEVICE", "cpu")
        return x, y, _run(POW32, x, y)


def _f64_reference(x, y):
    """numpy's float64 pow of float32 inputs (exact inputs, < 1 f64 ulp) rounded to float32."""
    with np.errstate(all="ignore"):
        return np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)


def test_f32_within_1ulp_of_correctly_rounded(f32_results):
    x, y, out = f32_results
    cr = _f64_reference(x, y)
    d = ulp_distance(out, cr)
    i = d.argmax()
    assert d.max() <= 1, (x[i], y[i], out[i], cr[i])
    assert np.mean(d == 0) > 0.9
    assert np.array_equal(np.isnan(out), np.isnan(cr))
    num = ~np.isnan(cr)
    assert np.array_equal(np.signbit(out[num]), np.signbit(cr[num]))
    finite = np.isfinite(cr)
    assert finite.sum() > 0.7 * len(x) and (cr[finite] == 0).sum() > 1000     # real coverage
    sub = np.abs(cr) < np.float32(2.0 ** -126)
    assert (sub & (cr != 0)).sum() > 10_000                                   # subnormal results


def test_f32_within_2ulp_of_numpy_float32(f32_results):
    x, y, out = f32_results
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    assert ulp_distance(out, ref).max() <= 2


def test_fma_contraction_does_not_change_bits(f32_results, cpu_device):
    x, y, out = f32_results
    sx, sy = np.ascontiguousarray(x[::97]), np.ascontiguousarray(y[::97])
    got = _run(_pow_kernel(f32, "pow_f32_nofma", fma=False), sx, sy)
    assert np.array_equal(got, out[::97], equal_nan=True)


def _ulp64(a, b):
    """ulp distance of finite, same-sign-or-zero float64 values (exact integers)."""
    ia = a.view(np.int64).astype(object)
    ib = b.view(np.int64).astype(object)
    lo = -(1 << 63)
    ia = np.where(a < 0, [lo - v for v in ia], ia)
    ib = np.where(b < 0, [lo - v for v in ib], ib)
    return np.abs(ia - ib).astype(np.float64)


def _mp_pow(a: float, b: float) -> float:
    """Correctly rounded pow for finite a > 0 (60 digits, then one rounding to f64)."""
    v = mp.power(mp.mpf(a), mp.mpf(b))
    if v > mp.mpf(2) ** 1024:
        return math.inf
    if v < mp.mpf(2) ** -1022:                    # subnormal: round at the 2^-1074 grid
        return float(mp.nint(v * mp.mpf(2) ** 1074)) * 2.0 ** -1074
    return float(v)


def test_f64_within_1ulp_of_mpmath(cpu_device):
    rng = np.random.default_rng(11)
    n = N64 // 4
    x = np.concatenate([_bits_spread(rng, 2 * n, 1.7976931348623157e308, np.float64),
                        1 + rng.integers(-1 << 20, 1 << 20, n) * 2.0 ** -53,
                        rng.uniform(0, 4, n)])
    y = _y_for(x, rng.uniform(-1080, 1030, len(x)))
    y[1::3] = np.rint(y[1::3])
    y[2::7] = rng.uniform(-8, 8, len(y[2::7]))
    out = _run(POW64, x, y)
    with mp.workdps(60):
        ref = np.array([_mp_pow(abs(a), b) if a != 0 and (a > 0 or b == int(b)) else np.nan
                        for a, b in zip(x.tolist(), y.tolist())])
    odd = (np.rint(y) == y) & (np.abs(y) < 2.0 ** 53) & (np.abs(y) % 2 == 1)
    ref = np.where((x < 0) & odd, -ref, ref)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(out), fin) and fin.sum() > 0.8 * len(x)
    assert np.array_equal(np.signbit(out[fin]), np.signbit(ref[fin]))
    d = _ulp64(out[fin], ref[fin])
    assert d.max() <= 1 and np.mean(d == 0) > 0.9
    with np.errstate(all="ignore"):
        npref = np.power(x, y)
    assert _ulp64(out[fin], npref[fin]).max() <= 2


@pytest.mark.parametrize("ty, dt", [(f32, np.float32), (f64, np.float64)])
def test_special_cases_exactly_as_numpy(ty, dt, cpu_device):
    """C99 Annex F pow: pow(x, +-0) = 1 even for nan x, pow(1, y) = 1 even for nan y,
    pow(-1, +-inf) = 1, +-0 and +-inf bases by the sign and parity of y, negative x with a
    non-integer y is nan, +-inf exponents by |x| < 1 or > 1, overflow / underflow signed."""
    vals = SPECIAL + [1e300, -1e300, 5e-324, 2.0 ** 53 + 2, 1023.5, -1075.0] if dt == np.float64 \
        else SPECIAL
    sx, sy = np.meshgrid(np.array(vals, dt), np.array(vals, dt))
    x, y = sx.ravel(), sy.ravel()
    out = _run(POW32 if ty == f32 else POW64, x, y)
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    num = ~np.isnan(ref)
    assert np.array_equal(np.signbit(out[num]), np.signbit(ref[num]))
    exact = num & (np.isinf(ref) | (ref == 0) | (ref == 1) | np.isinf(x) | np.isinf(y))
    assert np.array_equal(out[exact], ref[exact])
    assert ulp_distance(out[num], ref[num]).max() <= 1


def test_exact_results_come_out_exact(cpu_device):
    """Representable results (small integer powers, powers of two, square roots of squares)
    are exact: the error before the last rounding is well under half an ulp."""
    b = np.arange(2, 12, dtype=np.float32)
    x, y = np.meshgrid(b, np.arange(-6, 12, dtype=np.float32))
    x, y = x.ravel(), y.ravel()
    sq = np.float32([4.0, 9.0, 0.25, 6.25, 1024.0])
    x = np.concatenate([x, sq, np.float32([2.0, 0.5, 8.0])])
    y = np.concatenate([y, np.full(5, 0.5, np.float32), np.float32([-149.0, 127.0, -1 / 3])])
    exact = (np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
             .astype(np.float64) == np.power(x.astype(np.float64), y.astype(np.float64)))
    out = _run(POW32, x, y)
    assert exact.sum() > 80
    assert np.array_equal(out[exact], np.power(x[exact].astype(np.float64),
                                               y[exact].astype(np.float64)).astype(np.float32))


def test_f32_pow_ptx_has_no_f64_and_no_approx():
    ptx = pyptx.compile(POW32, arch="sm_80").ptx
    body = [ln for ln in ptx.splitlines() if not ln.lstrip().startswith("//")]
    assert not [ln for ln in body if ".f64" in ln or "%fd" in ln]
    assert not [ln for ln in body if ".approx" in ln]


def _pair_kernel(ty, name):
    def k(out: ty[:], x: ty[:], y: ty[:], n: i32):
        i = pyptx.grid(1)
        if i < n:
            out[i] = x[i] ** y[i]
    k.__name__ = name
    return pyptx.kernel(k)


def test_f16_pow_rounds_once_from_f32(device):
    rng = np.random.default_rng(3)
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    y = rng.uniform(-4, 4, 1 << 16).astype(np.float16)
    y[::4] = np.rint(y[::4])
    out = _run(_pair_kernel(f16, "pow_f16_test"), x, y)
    with np.errstate(all="ignore"):
        cr = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float16)
    assert out.dtype == np.float16
    assert np.array_equal(np.isnan(out), np.isnan(cr))
    d = ulp_distance(out.astype(np.float32), cr.astype(np.float32))
    big = d > 0                    # only where the f32 result sits within 1 ulp of a midpoint
    assert np.mean(big) < 1e-3
    assert np.all(np.abs(out[big].astype(np.float64) - cr[big]) <=
                  np.spacing(np.abs(cr[big])).astype(np.float64))


def test_bf16_pow(cpu_device):
    rng = np.random.default_rng(4)
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    y = _f32_to_bf16(rng.uniform(-3, 3, 1 << 16).astype(np.float32))
    out = np.zeros_like(x)
    _pair_kernel(bf16, "pow_bf16_test")[256, 256](out, x, y, len(x))
    with np.errstate(all="ignore"):
        cr = _f32_to_bf16(np.power(_bf16_to_f32(x).astype(np.float64),
                                   _bf16_to_f32(y).astype(np.float64)).astype(np.float32))
    got, want = _bf16_to_f32(out), _bf16_to_f32(cr)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    d = ulp_distance(got, want)
    assert d.max() <= 1 << 16 and np.mean(d == 0) > 0.99


# ---- `**` forms ---------------------------------------------------------------------------------

@pyptx.kernel
def power_forms(o32: f32[:, :], o64: f64[:, :], oi: i64[:, :], x: f32[:], y: f32[:],
                n: i32[:], m: i32[:], big: i64[:], u: u32[:], h: f16[:], oh: f16[:], cnt: i32):
    i = pyptx.grid(1)
    if i < cnt:
        o32[i, 0] = x[i] ** y[i]                  # f32 ** f32: f32 pow
        o32[i, 1] = x[i] ** 2.5                   # f32 ** float literal: f32
        o32[i, 2] = 2.0 ** y[i]                   # float literal ** f32: f32
        o32[i, 3] = x[i] ** -1                    # negative int literal on a float: pow
        o32[i, 4] = x[i] ** 3                     # small literal: multiplied out
        o64[i, 0] = x[i] ** m[i]                  # f32 ** i32: f64 (NumPy promotion)
        o64[i, 1] = n[i] ** y[i]                  # i32 ** f32: f64
        o64[i, 2] = math.pow(n[i], m[i])          # math.pow of ints: f64
        oi[i, 0] = n[i] ** m[i]                   # i32 ** i32 at run time: i32
        oi[i, 1] = big[i] ** 70                   # literal above 64: the run-time loop
        oi[i, 2] = i64(u[i] ** u32(m[i] & 31))    # unsigned
        oi[i, 3] = 3 ** m[i]                      # int literal ** i32
        oh[i] = h[i] ** h[i]                      # f16 ** f16: computed in f32, rounded once
        o32[i, 5] = pow(x[i], y[i])               # the builtin pow is **


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _numba_int_pow(a: int, b: int, bits: int) -> int:
    """Numba's integer power: wrapping square-and-multiply; negative exponents give 1 ** b = 1,
    (-1) ** b = +-1, 0 ** b = the type's minimum, anything else 0."""
    if b < 0:
        if a == 1 or a == -1:
            return a ** (-b) if a == -1 else 1
        return -(1 << (bits - 1)) if a == 0 else 0
    return _wrap(pow(a, b, 1 << bits), bits)


def test_power_forms(cpu_device):
    rng = np.random.default_rng(5)
    c = 257
    x = rng.uniform(0.1, 4, c).astype(np.float32)
    y = rng.uniform(-6, 6, c).astype(np.float32)
    n = rng.integers(-6, 7, c).astype(np.int32)
    n[:3] = (0, 1, -1)
    m = rng.integers(-4, 40, c).astype(np.int32)
    m[3:9] = (0, 1, -1, 0, -2, -3)
    big = rng.integers(-10, 10, c).astype(np.int64)
    u = rng.integers(0, 1 << 32, c, dtype=np.uint64).astype(np.uint32)
    h = rng.uniform(0.1, 3, c).astype(np.float16)
    o32 = np.full((c, 6), np.nan, np.float32)
    o64 = np.full((c, 3), np.nan)
    oi = np.full((c, 4), -7, np.int64)
    oh = np.full(c, np.nan, np.float16)
    power_forms[2, 256](o32, o64, oi, x, y, n, m, big, u, h, oh, c)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        assert ulp_distance(o32[:, 0], np.power(x64, y64).astype(np.float32)).max() <= 1
        assert ulp_distance(o32[:, 1], np.power(x64, 2.5).astype(np.float32)).max() <= 1
        assert ulp_distance(o32[:, 2], np.exp2(y64).astype(np.float32)).max() <= 1
        assert ulp_distance(o32[:, 3], np.float32(1) / x).max() <= 1
        assert np.array_equal(o32[:, 4], x * x * x)
        assert np.array_equal(o32[:, 5], o32[:, 0])
        for col, ref in enumerate([np.power(x64, m), np.power(n.astype(np.float64), y64),
                                   np.power(n.astype(np.float64), m.astype(np.float64))]):
            got = o64[:, col]
            assert np.array_equal(np.isnan(got), np.isnan(ref)), col
            fin = np.isfinite(ref) & (ref != 0)
            assert np.all(np.abs(got[fin] / ref[fin] - 1) <= 2.3e-16), col   # f64, <= 1 ulp
            assert np.array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)]), col
    assert oi[:, 0].tolist() == [_numba_int_pow(a, b, 32) for a, b in zip(n.tolist(), m.tolist())]
    assert oi[:, 1].tolist() == [_wrap(a ** 70, 64) for a in big.tolist()]
    assert oi[:, 2].tolist() == [_wrap(a ** (b & 31), 32) & 0xFFFFFFFF
                                 for a, b in zip(u.tolist(), m.tolist())]
    assert oi[:, 3].tolist() == [_numba_int_pow(3, b, 32) for b in m.tolist()]
    ch = np.power(h.astype(np.float64), h.astype(np.float64)).astype(np.float16)
    assert np.all(np.abs(oh.astype(np.float64) - ch) <= np.spacing(ch).astype(np.float64))
    assert np.mean(oh == ch) > 0.95


def test_run_time_int_exponent_edge_values(cpu_device):
    """Exponents 0, 1, negative and large; bases 0, +-1, +-2 and extremes (wrapping)."""
    @pyptx.kernel
    def ipow(out: i32[:], a: i32[:], b: i32[:], cnt: i32):
        i = pyptx.grid(1)
        if i < cnt:
            out[i] = a[i] ** b[i]
    bases = [0, 1, -1, 2, -2, 3, 7, -5, 46341, 2**31 - 1, -2**31]
    exps = [0, 1, 2, 31, 32, 33, 2**31 - 1, -1, -2, -3, -2**31]
    a, b = (v.ravel().astype(np.int32) for v in np.meshgrid(bases, exps))
    out = np.full(len(a), 99, np.int32)
    ipow[1, 128](out, a, b, len(a))
    assert out.tolist() == [_numba_int_pow(p, q, 32) for p, q in zip(a.tolist(), b.tolist())]


def test_power_errors_are_compile_errors():
    @pyptx.kernel
    def bad(out: f32[:], n: i32):
        out[0] = (n > 0) ** (n > 1)
    with pytest.raises(pyptx.CompileError, match=r"'\*\*' on booleans"):
        pyptx.compile(bad, arch="sm_80")

    @pyptx.kernel
    def bad_args(out: f32[:], x: f32):
        out[0] = pyptx.math.pow(x)
    with pytest.raises(pyptx.CompileError, match="takes 2 arguments"):
        pyptx.compile(bad_args, arch="sm_80")

    @pyptx.kernel
    def bad_mod(out: i32[:], n: i32):
        out[0] = pow(n, n, 7)
    with pytest.raises(pyptx.CompileError, match=r"x \*\* y % m"):
        pyptx.compile(bad_mod, arch="sm_80")
