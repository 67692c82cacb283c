"""Vectorised numpy mirror of pyptx/mathlib/basic_f64.py's f64 functions (same operations, same order), for
accuracy tests on many more inputs than the CPU executor runs quickly (its f64 fma is emulated).
The f32 functions (pyptx/mathlib/basic_f32.py) need no mirror: tests/test_mathlib_f32.py runs them
through real kernels on the executor, whose f32 fma is cheap.

numpy has no fma, so `fma64` is an exact emulation (Dekker two-product + exact residual
correction); `run_dsl_source` runs the DSL functions' own Python source on numpy scalars, which
checks that the mirror below really is the same algorithm.
"""
from __future__ import annotations

import types as _types

import numpy as np

import pyptx.mathlib as M

F = np.float64


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    c = F(134217729.0) * a
    hi = c - (c - a)
    return hi, a - hi


def fma64(a, b, c):
    """RN(a*b + c) exactly for finite values whose product does not over/underflow."""
    a, b, c = (np.asarray(v, dtype=F) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl      # a*b = p + e exactly
        s1, t1 = _two_sum(c, e)
        s2, t2 = _two_sum(p, s1)                               # a*b + c = s2 + t2 + t1
        r = s2 + (t2 + t1)
        # exact residual (a*b + c) - r, compared with half an ulp of r to fix the rounding
        g = s2 - r
        u1, v1 = _two_sum(g, t2)
        u2, v2 = _two_sum(u1, t1)
        half = np.spacing(np.abs(r)) * 0.5
        up_x, up_y = _two_sum(u2, -half)
        up = up_x + (up_y + (v1 + v2))
        dn_x, dn_y = _two_sum(u2, half)
        dn = dn_x + (dn_y + (v1 + v2))
        odd = (r.view(np.int64) & 1) == 1
        bump_up = (up > 0) | ((up == 0) & odd)
        bump_dn = (dn < 0) | ((dn == 0) & odd)
        out = np.where(bump_up, np.nextafter(r, np.inf), np.where(bump_dn, np.nextafter(r, -np.inf), r))
        naive = p + c
        ok = np.isfinite(naive) & np.isfinite(e) & (p != 0)
        return np.where(ok, out, naive)


def rint(x):
    return np.rint(x)


def _bits_to_f64(u):
    return np.asarray(u, dtype=np.uint64).view(F)


INF = F(np.inf)


# ---- exp / exp2 -------------------------------------------------------------------------------

def expm1_reduced(r):
    p = fma64(F(M.EXP_C13), r, F(M.EXP_C12))
    for c in (M.EXP_C11, M.EXP_C10, M.EXP_C9, M.EXP_C8, M.EXP_C7, M.EXP_C6, M.EXP_C5, M.EXP_C4,
              M.EXP_C3, M.EXP_C2):
        p = fma64(p, r, F(c))
    return fma64(r * r, p, r)


def exp_finish(r, rlo, k):
    em1 = expm1_reduced(r)
    em1 = em1 + fma64(rlo, em1, rlo)
    y = F(1.0) + em1
    k1 = k >> 1
    k2 = k - k1
    s1 = _bits_to_f64((k1 + 1023).astype(np.uint64) << np.uint64(52))
    s2 = _bits_to_f64((k2 + 1023).astype(np.uint64) << np.uint64(52))
    return (y * s1) * s2


def _to_i32(v):
    with np.errstate(all="ignore"):
        v = np.where(np.isnan(v), 0, np.clip(np.trunc(v), -2**31, 2**31 - 1))
    return v.astype(np.int32)


def exp_f64(x):
    x = np.asarray(x, dtype=F)
    with np.errstate(all="ignore"):
        xs = np.clip(np.nan_to_num(x), M.EXP_MIN, M.EXP_MAX)
        k = rint(xs * F(M.LOG2E))
        hi = fma64(-k, F(M.LN2), xs)
        lo = k * F(-M.LN2_LO)
        r = hi + lo
        rlo = (hi - r) + lo
        y = exp_finish(r, rlo, _to_i32(k))
    y = np.where(x > M.EXP_MAX, INF, np.where(x < M.EXP_MIN, 0.0, y))
    return np.where(np.isnan(x), x + x, y)


def exp2_f64(x):
    x = np.asarray(x, dtype=F)
    with np.errstate(all="ignore"):
        xs = np.clip(np.nan_to_num(x), M.EXP2_MIN, M.EXP2_MAX)
        k = rint(xs)
        f = xs - k
        r = f * F(M.LN2)
        rlo = fma64(f, F(M.LN2_LO), fma64(f, F(M.LN2), -r))
        y = exp_finish(r, rlo, _to_i32(k))
    y = np.where(x >= M.EXP2_MAX, INF, np.where(x < M.EXP2_MIN, 0.0, y))
    return np.where(np.isnan(x), x + x, y)


# ---- log / log2 -------------------------------------------------------------------------------

def _log_special(x):
    return np.where(x == 0, -INF, np.where(x > 0, x, np.where(np.isnan(x), x + x, F(np.nan))))


def _log_decompose(x):
    tiny = x < M.TWO_M1022
    xs = np.where(tiny, x * F(M.TWO_P54), x)
    e = np.where(tiny, -54, 0).astype(np.int32)
    bits = xs.view(np.uint64)
    e = e + ((bits >> np.uint64(52)).astype(np.int32) - 1023)
    m = ((bits & np.uint64(M.MANT_MASK)) | np.uint64(M.ONE_EXP_BITS)).view(F)
    big = m > M.SQRT2
    e = e + big.astype(np.int32)
    m = np.where(big, m * F(0.5), m)
    return e.astype(F), m - F(1.0)


def _log1p_tail(f, u):
    s = f / (F(2.0) + f)
    z = s * s
    p = fma64(F(M.LOG_C10), z, F(M.LOG_C9))
    for c in (M.LOG_C8, M.LOG_C7, M.LOG_C6, M.LOG_C5, M.LOG_C4, M.LOG_C3, M.LOG_C2, M.LOG_C1):
        p = fma64(p, z, F(c))
    hf = F(0.5) * f
    hfsq = hf * f
    hfsq_err = fma64(hf, f, -hfsq)
    hfsq_r = fma64(z, p, hfsq)
    return fma64(s, hfsq_r, ((f - u) - hfsq) - hfsq_err)


def _log_common(x):
    x = np.asarray(x, dtype=F)
    main = (x > 0) & (x < INF)
    xm = np.where(main, x, F(1.5))
    dk, f = _log_decompose(xm)
    u = fma64(f * F(-0.5), f, f)
    lo = _log1p_tail(f, u)
    return x, main, dk, u, lo


def log_f64(x):
    x, main, dk, u, lo = _log_common(x)
    a = dk * F(M.LN2_HI32)
    w = a + u
    tail = fma64(dk, F(M.LN2_LO32), lo) + ((a - w) + u)
    return np.where(main, w + tail, _log_special(x))


def log2_f64(x):
    x, main, dk, u, lo = _log_common(x)
    p = u * F(M.LOG2E)
    perr = fma64(u, F(M.LOG2E), -p)
    tail = fma64(lo, F(M.LOG2E), fma64(u, F(M.LOG2E_LO), perr))
    w = dk + p
    tail = tail + ((dk - w) + p)
    return np.where(main, w + tail, _log_special(x))


# ---- sin / cos --------------------------------------------------------------------------------

def _reduce(x):
    k = rint(x * F(M.TWO_OVER_PI))
    a = fma64(-k, F(M.PIO2_1), x)
    w = k * F(M.PIO2_2)
    werr = fma64(k, F(M.PIO2_2), -w)
    hi = a - w
    lo = fma64(-k, F(M.PIO2_3), ((a - hi) - w) - werr)
    r = hi + lo
    return k, r, (hi - r) + lo


def sin_kernel(h, l):
    z = h * h
    p = fma64(F(M.SIN_S19), z, F(M.SIN_S17))
    for c in (M.SIN_S15, M.SIN_S13, M.SIN_S11, M.SIN_S9, M.SIN_S7, M.SIN_S5, M.SIN_S3):
        p = fma64(p, z, F(c))
    v = z * h
    t = fma64(v, p, fma64(z * F(-0.5), l, l))
    return h + t


def cos_kernel(h, l):
    z = h * h
    p = fma64(F(M.COS_C18), z, F(M.COS_C16))
    for c in (M.COS_C14, M.COS_C12, M.COS_C10, M.COS_C8, M.COS_C6, M.COS_C4):
        p = fma64(p, z, F(c))
    hz = F(0.5) * z
    w = F(1.0) - hz
    hl = h * l
    return w + (((F(1.0) - w) - hz) + fma64(z * z, p, -hl))


def _sincos(x, cos):
    x = np.asarray(x, dtype=F)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        xs = np.where(finite, x, F(1.0))
        k, r, rl = _reduce(xs)
        q = _to_i32(k) & 3
        s, c = sin_kernel(r, rl), cos_kernel(r, rl)
        if cos:
            res = np.where((q & 1) == 0, c, s)
            res = np.where(((q + 1) & 2) != 0, -res, res)
        else:
            res = np.where((q & 1) == 0, s, c)
            res = np.where(q >= 2, -res, res)
        res = np.where(finite, res, x - x)
        tiny = np.abs(x) < M.SIN_TINY
        return np.where(tiny, F(1.0) if cos else x, res)


def sin_f64(x):
    return _sincos(x, False)


def cos_f64(x):
    return _sincos(x, True)


# ---- tanh -------------------------------------------------------------------------------------

def _tanh_series(x):
    z = x * x
    names = [f"TANH_C{n}" for n in range(37, 2, -2)]
    p = fma64(F(M.TANH_C39), z, F(getattr(M, names[0])))
    for n in names[1:]:
        p = fma64(p, z, F(getattr(M, n)))
    return fma64(x * z, p, x)


def tanh_f64(x):
    x = np.asarray(x, dtype=F)
    t = np.abs(x)
    with np.errstate(all="ignore"):
        series = _tanh_series(np.where(t < M.TANH_SERIES_MAX, x, F(0.25)))
        ts = np.where(t < M.TANH_ONE, t, F(1.0))
        y = np.where(t < M.TANH_ONE, F(1.0) - F(2.0) / (exp_f64(ts + ts) + F(1.0)), F(1.0))
    y = np.where(x < 0, -y, y)
    y = np.where(t < M.TANH_SERIES_MAX, series, y)
    y = np.where(t < M.TANH_TINY, x, y)
    return np.where(np.isnan(x), x + x, y)


FUNCS = {n: globals()[n] for n in "exp_f64 exp2_f64 log_f64 log2_f64 sin_f64 cos_f64 tanh_f64".split()}


# ---- running the DSL source itself on numpy scalars -------------------------------------------

class _ShimMath:
    @staticmethod
    def fma(a, b, c):
        return F(fma64(a, b, c))

    rint = staticmethod(lambda v: F(np.rint(v)) if isinstance(v, np.float64) else np.rint(v))
    fabs = staticmethod(np.abs)


def _shim_cast(dtype):
    def cast(v=0):
        if np.dtype(dtype).kind in "iu" and isinstance(v, (np.floating, float)):
            info = np.iinfo(dtype)
            v = 0 if np.isnan(v) else min(max(np.trunc(v), info.min), info.max)
            return dtype(int(v))
        if np.dtype(dtype).kind in "iu":
            return np.array(int(v)).astype(np.int64).astype(dtype)[()] if int(v) < 2**63 \
                else dtype(int(v))
        return dtype(v)
    cast.dtype = np.dtype(dtype)
    return cast


def _shim_bitcast(v, t):
    return np.array(v).view(t.dtype)[()]


def run_dsl_source(name: str, x):
    """Evaluate mathlib.<name> by running its Python body on numpy scalars, element by element."""
    shim = _types.SimpleNamespace(math=_ShimMath, bitcast=_shim_bitcast)
    g = dict(vars(M))
    g.update(pyptx=shim, f32=_shim_cast(np.float32), f64=_shim_cast(np.float64),
             i32=_shim_cast(np.int32), u64=_shim_cast(np.uint64))
    for n, v in list(g.items()):
        if isinstance(v, M.pyptx.DeviceFunction):
            g[n] = _types.FunctionType(v.py_func.__code__, g, n)
    fn = g[name]
    with np.errstate(all="ignore"):
        return np.array([fn(v) for v in x])
