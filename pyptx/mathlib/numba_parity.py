"""The rest of Numba's `math` in the DSL: log10 log1p expm1 sinh cosh tan atan atan2 asin acos
cbrt erf erfc hypot copysign, f32 in f32 arithmetic, f64 in f64 where written (composed from
pyptx.mathlib's f64 functions; not yet for atan atan2 asin acos cbrt erf erfc).  Same rules as
pyptx/mathlib/basic_f32.py: IEEE-exact operations only, every fused step an explicit fma.  Measured
accuracy per function: docs/math.md.
"""
from __future__ import annotations

import math as _m

import pyptx
from pyptx import f32, f64, i32, u32, u64

from .basic_f64 import LN2, LOG2E, _cos_kernel_f64, _expm1_reduced_f64, _reduce_pio2_f64
from .basic_f64 import LN2_LO as LN2_LO_F64
from .basic_f64 import _reduced_hi_f64, _reduced_lo_f64, _sin_kernel_f64, exp_f64, log_f64
from .consts import (ASIN_P, ATAN_P, ERF_P, ERFC_R1, ERFC_S2, INV_LN10_F64,
                             INV_LN10_F64_LO, INV_LN10_HI, INV_LN10_LO, LN2_HI, LN2_LO,
                             LOG10_2_HI, LOG10_2_LO, LOG2E_HI, LOG_G, PI_HI, PI_LO, PIO2_1,
                             PIO2_2, PIO4_HI, PIO4_LO, SINH_P)
from .basic_f32 import (EXP_Q, _cos_kernel_f32, _log_poly_f32, _log_split_f32,
                          _log_special_f32, _reduce_pio2_f32, _scale_pow2_f32, _sin_kernel_f32,
                          exp_f32)

# the DSL takes scalar constants only: one name per coefficient
LOG_G0, LOG_G1, LOG_G2, LOG_G3, LOG_G4, LOG_G5, LOG_G6, LOG_G7, LOG_G8 = LOG_G
EXP_Q0, EXP_Q1, EXP_Q2, EXP_Q3, EXP_Q4, EXP_Q5 = EXP_Q
SINH_P0, SINH_P1, SINH_P2, SINH_P3 = SINH_P
ATAN_P0, ATAN_P1, ATAN_P2, ATAN_P3, ATAN_P4, ATAN_P5 = ATAN_P
ASIN_P0, ASIN_P1, ASIN_P2, ASIN_P3, ASIN_P4, ASIN_P5 = ASIN_P
ERF_P0, ERF_P1, ERF_P2, ERF_P3, ERF_P4, ERF_P5, ERF_P6 = ERF_P
(ERFC_A0, ERFC_A1, ERFC_A2, ERFC_A3, ERFC_A4, ERFC_A5, ERFC_A6, ERFC_A7, ERFC_A8, ERFC_A9,
 ERFC_A10, ERFC_A11) = ERFC_R1
ERFC_B0, ERFC_B1, ERFC_B2, ERFC_B3, ERFC_B4, ERFC_B5, ERFC_B6, ERFC_B7, ERFC_B8 = ERFC_S2

F32_INF_BITS = 0x7F800000
F32_SIGN = 0x80000000
F32_ABS = 0x7FFFFFFF
F64_SIGN = 0x8000000000000000
F64_ABS = 0x7FFFFFFFFFFFFFFF
F64_INF_BITS = 0x7FF0000000000000
SQRTH_M1 = _m.sqrt(0.5) - 1.0             # log1p's polynomial range [sqrt(1/2) - 1, sqrt(2) - 1]
SQRT2_M1 = _m.sqrt(2.0) - 1.0
TAN_PI_8 = 0.41421356237309503
E16_HALF = float.fromhex("0x1.0f2ebep+22")  # RN_f32(e^16 / 2)


# ---- sign and classification ------------------------------------------------------------------

@pyptx.func
def copysign_f32(x: f32, y: f32):
    return pyptx.bitcast((pyptx.bitcast(x, u32) & u32(F32_ABS)) |
                         (pyptx.bitcast(y, u32) & u32(F32_SIGN)), f32)


@pyptx.func
def copysign_f64(x: f64, y: f64):
    return pyptx.bitcast((pyptx.bitcast(x, u64) & u64(F64_ABS)) |
                         (pyptx.bitcast(y, u64) & u64(F64_SIGN)), f64)


# ---- log10 / log1p / expm1 ----------------------------------------------------------------------

@pyptx.func
def _log1p_poly_f32(f: f32):
    """log1p(f) = f + f^2 G(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1] (basic_f32's log kernel)."""
    g = _log_poly_f32(f, f32(LOG_G0), f32(LOG_G1), f32(LOG_G2), f32(LOG_G3), f32(LOG_G4),
                      f32(LOG_G5), f32(LOG_G6), f32(LOG_G7), f32(LOG_G8))
    return pyptx.math.fma(f * f, g, f)


@pyptx.func
def log10_f32(x: f32):
    if not (x > f32(0.0) and x < pyptx.bitcast(u32(F32_INF_BITS), f32)):
        return _log_special_f32(x)
    e, f = _log_split_f32(x)
    lp = _log1p_poly_f32(f)
    t = pyptx.math.fma(lp, f32(INV_LN10_HI), pyptx.math.fma(lp, f32(INV_LN10_LO),
                                                             e * f32(LOG10_2_LO)))
    return pyptx.math.fma(e, f32(LOG10_2_HI), t)


@pyptx.func
def log1p_f32(x: f32):
    if x >= f32(SQRTH_M1) and x <= f32(SQRT2_M1):
        return _log1p_poly_f32(x)                  # keeps -0.0 and tiny x exact
    if not (x > f32(-1.0) and x < pyptx.bitcast(u32(F32_INF_BITS), f32)):
        return _log_special_f32(x + f32(1.0))
    u = x + f32(1.0)
    c = x - (u - f32(1.0)) if x < f32(1.0) else f32(1.0) - (u - x)    # u + c = 1 + x exactly
    e, f = _log_split_f32(u)
    lp = _log1p_poly_f32(f) + c / u                # log(1 + x) = log(u) + c/u
    return pyptx.math.fma(e, f32(LN2_HI), pyptx.math.fma(e, f32(LN2_LO), lp))


@pyptx.func
def expm1_f32(x: f32):
    if not (pyptx.math.fabs(x) <= f32(16.0)):
        return exp_f32(x) - f32(1.0)               # e^x >= 2^23 or <= 2^-23: one rounding; nan
    k = pyptx.math.rint(x * f32(LOG2E_HI))
    r = pyptx.math.fma(-k, f32(LN2_HI), x)
    r = pyptx.math.fma(-k, f32(LN2_LO), r)
    q = pyptx.math.fma(f32(EXP_Q5), r, f32(EXP_Q4))
    q = pyptx.math.fma(q, r, f32(EXP_Q3))
    q = pyptx.math.fma(q, r, f32(EXP_Q2))
    q = pyptx.math.fma(q, r, f32(EXP_Q1))
    q = pyptx.math.fma(q, r, f32(EXP_Q0))
    s = pyptx.bitcast(u32(i32(k) + 127) << u32(23), f32)      # 2^k, |k| <= 23
    y = pyptx.math.fma(s, r * q, s - f32(1.0))     # 2^k (1 + r Q) - 1; s - 1 is exact
    return x if pyptx.math.fabs(x) < f32(2.0 ** -25) else y   # keeps -0.0


@pyptx.func
def log10_f64(x: f64):
    y = log_f64(x)
    return pyptx.math.fma(y, f64(INV_LN10_F64), y * f64(INV_LN10_F64_LO))


@pyptx.func
def log1p_f64(x: f64):
    u = x + f64(1.0)
    if u == f64(1.0):
        return x                                   # |x| < 2^-53: keeps -0.0
    if not (u > f64(0.0) and u < pyptx.bitcast(u64(F64_INF_BITS), f64)):
        return log_f64(u) if x == x else x + x
    c = x - (u - f64(1.0)) if x < f64(1.0) else f64(1.0) - (u - x)
    return log_f64(u) + c / u


@pyptx.func
def expm1_f64(x: f64):
    if not (pyptx.math.fabs(x) <= f64(36.0)):
        return exp_f64(x) - f64(1.0)               # e^x >= 2^51 or <= 2^-51: one rounding; nan
    k = pyptx.math.rint(x * f64(LOG2E))
    r = pyptx.math.fma(-k, f64(LN2_LO_F64), pyptx.math.fma(-k, f64(LN2), x))
    s = pyptx.bitcast(u64(i32(k) + 1023) << u64(52), f64)      # 2^k, |k| <= 52
    y = pyptx.math.fma(s, _expm1_reduced_f64(r), s - f64(1.0))   # s - 1 is exact
    return x if pyptx.math.fabs(x) < f64(2.0 ** -54) else y       # keeps -0.0


# ---- sinh / cosh ------------------------------------------------------------------------------

@pyptx.func
def _half_exp_f32(t: f32):
    """e^t / 2 for t >= 0 without overflow below sinh's own limit (89.4)."""
    if t < f32(88.0):
        return f32(0.5) * exp_f32(t)
    return exp_f32(t - f32(16.0)) * f32(E16_HALF)  # t - 16 is exact here


@pyptx.func
def sinh_f32(x: f32):
    t = pyptx.math.fabs(x)
    if t < f32(1.0):
        z = x * x
        p = pyptx.math.fma(f32(SINH_P3), z, f32(SINH_P2))
        p = pyptx.math.fma(p, z, f32(SINH_P1))
        p = pyptx.math.fma(p, z, f32(SINH_P0))
        return pyptx.math.fma(x * z, p, x)
    h = _half_exp_f32(t)
    y = h - f32(0.25) / h
    return -y if x < f32(0.0) else y


@pyptx.func
def cosh_f32(x: f32):
    h = _half_exp_f32(pyptx.math.fabs(x))
    return h + f32(0.25) / h


@pyptx.func
def sinh_f64(x: f64):
    t = pyptx.math.fabs(x)
    em1 = expm1_f64(t)
    y = f64(0.5) * (em1 + em1 / (em1 + f64(1.0)))  # (e^t - e^-t) / 2
    y = f64(0.5) * exp_f64(t) if t > f64(22.0) else y   # e^-t below half an ulp; no inf/inf
    y = -y if x < f64(0.0) else y
    return x if t < f64(2.0 ** -28) else y         # keeps -0.0


@pyptx.func
def cosh_f64(x: f64):
    h = f64(0.5) * exp_f64(pyptx.math.fabs(x))
    return h + f64(0.25) / h


# ---- tan --------------------------------------------------------------------------------------

@pyptx.func
def tan_f32(x: f32):
    r, rl, q = _reduce_pio2_f32(x)
    s = _sin_kernel_f32(r, rl)
    c = _cos_kernel_f32(r, rl)
    y = -c / s if (q & 1) != 0 else s / c
    return x if pyptx.math.fabs(x) < f32(2.0 ** -12) else y


@pyptx.func
def tan_f64(x: f64):
    k = _reduce_pio2_f64(x)
    r = _reduced_hi_f64(x, k)
    rl = _reduced_lo_f64(x, k, r)
    s = _sin_kernel_f64(r, rl)
    c = _cos_kernel_f64(r, rl)
    y = -c / s if (i32(k) & 1) != 0 else s / c
    return x if pyptx.math.fabs(x) < f64(2.0 ** -27) else y


# ---- atan / atan2 / asin / acos ---------------------------------------------------------------

@pyptx.func
def _atan_unit_f32(a: f32):
    """atan(a) for 0 <= a <= 1 (or nan): above tan(pi/8) via atan(a) = pi/4 + atan((a-1)/(a+1))."""
    big = a > f32(TAN_PI_8)
    u = (a - f32(1.0)) / (a + f32(1.0)) if big else a
    z = u * u
    p = pyptx.math.fma(f32(ATAN_P5), z, f32(ATAN_P4))
    p = pyptx.math.fma(p, z, f32(ATAN_P3))
    p = pyptx.math.fma(p, z, f32(ATAN_P2))
    p = pyptx.math.fma(p, z, f32(ATAN_P1))
    p = pyptx.math.fma(p, z, f32(ATAN_P0))
    v = pyptx.math.fma(u * z, p, u)
    return f32(PIO4_HI) + (v + f32(PIO4_LO)) if big else v


@pyptx.func
def atan_f32(x: f32):
    t = pyptx.math.fabs(x)
    inv = t > f32(1.0)
    v = _atan_unit_f32(f32(1.0) / t if inv else t)
    v = f32(PIO2_1) + (f32(PIO2_2) - v) if inv else v
    return copysign_f32(v, x) if v == v else x + x


@pyptx.func
def atan2_f32(y: f32, x: f32):
    ax = pyptx.math.fabs(x)
    ay = pyptx.math.fabs(y)
    swap = ay > ax
    a = ax / ay if swap else ay / ax
    both_inf = ax == pyptx.bitcast(u32(F32_INF_BITS), f32) and ay == ax
    a = f32(1.0) if both_inf else a
    a = f32(0.0) if ay == f32(0.0) else a
    v = _atan_unit_f32(a)
    v = f32(PIO2_1) + (f32(PIO2_2) - v) if swap else v
    if pyptx.bitcast(x, u32) >= u32(F32_SIGN):      # x < 0 or x = -0.0
        v = f32(PI_HI) + (f32(PI_LO) - v)
    v = copysign_f32(v, y)
    return x + y if (x != x or y != y) else v


@pyptx.func
def _asin_tail_f32(w: f32):
    """(s, e, t) with sqrt(w) = s + e (e the rounding error of s) and asin(sqrt w) - sqrt w ~= t,
    for 0 <= w <= 1/4."""
    s = pyptx.math.sqrt(w)
    e = pyptx.math.fma(-s, s, w) / (s + s) if s > f32(0.0) else f32(0.0)
    p = pyptx.math.fma(f32(ASIN_P5), w, f32(ASIN_P4))
    p = pyptx.math.fma(p, w, f32(ASIN_P3))
    p = pyptx.math.fma(p, w, f32(ASIN_P2))
    p = pyptx.math.fma(p, w, f32(ASIN_P1))
    p = pyptx.math.fma(p, w, f32(ASIN_P0))
    return s, e, (s * w) * p


@pyptx.func
def _asin_small_f32(x: f32):
    """asin x for |x| <= 1/2."""
    z = x * x
    p = pyptx.math.fma(f32(ASIN_P5), z, f32(ASIN_P4))
    p = pyptx.math.fma(p, z, f32(ASIN_P3))
    p = pyptx.math.fma(p, z, f32(ASIN_P2))
    p = pyptx.math.fma(p, z, f32(ASIN_P1))
    p = pyptx.math.fma(p, z, f32(ASIN_P0))
    return pyptx.math.fma(x * z, p, x)


@pyptx.func
def asin_f32(x: f32):
    t = pyptx.math.fabs(x)
    if t <= f32(0.5):
        return _asin_small_f32(x)
    s, e, tl = _asin_tail_f32((f32(1.0) - t) * f32(0.5))   # asin t = pi/2 - 2 asin(sqrt((1-t)/2))
    y = (f32(PIO2_1) - (s + s)) + (f32(PIO2_2) - f32(2.0) * (e + tl))
    return copysign_f32(y, x) if y == y else y


@pyptx.func
def acos_f32(x: f32):
    t = pyptx.math.fabs(x)
    if t <= f32(0.5):
        return f32(PIO2_1) + (f32(PIO2_2) - _asin_small_f32(x))
    s, e, tl = _asin_tail_f32((f32(1.0) - t) * f32(0.5))
    if x > f32(0.0):
        return f32(2.0) * (s + (e + tl))                     # acos x = 2 asin(sqrt((1-x)/2))
    return (f32(PI_HI) - (s + s)) + (f32(PI_LO) - f32(2.0) * (e + tl))


# ---- hypot / cbrt -----------------------------------------------------------------------------

@pyptx.func
def hypot_f32(x: f32, y: f32):
    ax = pyptx.math.fabs(x)
    ay = pyptx.math.fabs(y)
    a = max(ax, ay)
    b = min(ax, ay)
    # scale by a power of two that brings a into [1, 4), so the squares neither over- nor
    # underflow; the squares are kept exactly as hi + lo pairs (fma)
    be = min(max(i32(pyptx.bitcast(a, u32) >> u32(23)), 1), 253)
    sc = pyptx.bitcast(u32(254 - be) << u32(23), f32)
    a2 = a * sc
    b2 = b * sc
    p = a2 * a2
    pe = pyptx.math.fma(a2, a2, -p)
    q = b2 * b2
    qe = pyptx.math.fma(b2, b2, -q)
    h = p + q
    lo = ((p - h) + q) + (pe + qe)                 # p >= q: fast two-sum
    r = pyptx.math.sqrt(h)
    r = r + (pyptx.math.fma(-r, r, h) + lo) / (r + r)
    res = r * pyptx.bitcast(u32(be) << u32(23), f32)          # * 1/sc, exact unless it overflows
    inf = pyptx.bitcast(u32(F32_INF_BITS), f32)
    res = a if b == f32(0.0) else res
    res = x + y if (x != x or y != y) else res
    return inf if (ax == inf or ay == inf) else res


@pyptx.func
def hypot_f64(x: f64, y: f64):
    ax = pyptx.math.fabs(x)
    ay = pyptx.math.fabs(y)
    a = max(ax, ay)
    b = min(ax, ay)
    be = min(max(i32(pyptx.bitcast(a, u64) >> u64(52)), 1), 2045)
    sc = pyptx.bitcast(u64(2046 - be) << u64(52), f64)
    a2 = a * sc
    b2 = b * sc
    p = a2 * a2
    pe = pyptx.math.fma(a2, a2, -p)
    q = b2 * b2
    qe = pyptx.math.fma(b2, b2, -q)
    h = p + q
    lo = ((p - h) + q) + (pe + qe)
    r = pyptx.math.sqrt(h)
    r = r + (pyptx.math.fma(-r, r, h) + lo) / (r + r)
    res = r * pyptx.bitcast(u64(be) << u64(52), f64)
    inf = pyptx.bitcast(u64(F64_INF_BITS), f64)
    res = a if b == f64(0.0) else res
    res = x + y if (x != x or y != y) else res
    return inf if (ax == inf or ay == inf) else res


@pyptx.func
def cbrt_f32(x: f32):
    t = pyptx.math.fabs(x)
    sub = t < f32(2.0 ** -126)
    ts = t * f32(2.0 ** 24) if sub else t
    bits = pyptx.bitcast(ts, i32)
    e = (bits >> 23) - 127
    q = (e + 300) // 3 - 100                       # floor(e / 3)
    m = pyptx.bitcast(bits - ((q * 3) << 23), f32)  # t / 2^(3q) in [1, 8)
    y = pyptx.math.fma(pyptx.math.fma(f32(-0.01272732), m, f32(0.24779896)), m,
                       f32(0.80166053))             # quadratic seed, within 3.7 %
    y = y - (y * y * y - m) / (f32(3.0) * y * y)   # two Newton steps (~1e-3, ~1e-6) ...
    y = y - (y * y * y - m) / (f32(3.0) * y * y)
    yy = y * y
    yye = pyptx.math.fma(y, y, -yy)                # y^2 = yy + yye exactly
    res = pyptx.math.fma(yy, y, -m) + yye * y      # y^3 - m
    y = y - res / (f32(3.0) * yy)                  # ... and one on the exact residual
    y = y * pyptx.bitcast(u32(q - (8 if sub else 0) + 127) << u32(23), f32)
    y = copysign_f32(y, x)
    return x + x if (t == f32(0.0) or not (t < pyptx.bitcast(u32(F32_INF_BITS), f32))) else y


# ---- erf / erfc -------------------------------------------------------------------------------

@pyptx.func
def _erf_small_f32(x: f32):
    """erf x = x + x P(x^2) for |x| <= 1."""
    z = x * x
    p = pyptx.math.fma(f32(ERF_P6), z, f32(ERF_P5))
    p = pyptx.math.fma(p, z, f32(ERF_P4))
    p = pyptx.math.fma(p, z, f32(ERF_P3))
    p = pyptx.math.fma(p, z, f32(ERF_P2))
    p = pyptx.math.fma(p, z, f32(ERF_P1))
    p = pyptx.math.fma(p, z, f32(ERF_P0))
    return pyptx.math.fma(x, p, x)


@pyptx.func
def _exp_neg_f32(hi: f32):
    """(k, r, q): e^(-hi) = 2^k (1 + r q) for 0 <= hi <= 103 (exp_f32's reduction, unrounded)."""
    k = pyptx.math.rint(-hi * f32(LOG2E_HI))
    r = pyptx.math.fma(-k, f32(LN2_HI), -hi)
    r = pyptx.math.fma(-k, f32(LN2_LO), r)
    q = pyptx.math.fma(f32(EXP_Q5), r, f32(EXP_Q4))
    q = pyptx.math.fma(q, r, f32(EXP_Q3))
    q = pyptx.math.fma(q, r, f32(EXP_Q2))
    q = pyptx.math.fma(q, r, f32(EXP_Q1))
    q = pyptx.math.fma(q, r, f32(EXP_Q0))
    return i32(k), r * q


@pyptx.func
def _erfc_big_f32(x: f32):
    """erfc x for x >= 1/2 (inf too) = e^(-x^2) R(x): x^2 = hi + lo exactly, e^(-hi) =
    2^k (1 + rq) and e^(-lo) = 1 - lo folded into one factor 1 + c, so that R (1 + c) rounds
    once (then / x, exact up to its rounding, for R = S(1/x) / x)."""
    xs = min(x, f32(10.1))                         # erfc rounds to 0 beyond 10.06
    hi = xs * xs
    lo = pyptx.math.fma(xs, xs, -hi)
    k, rq = _exp_neg_f32(hi)
    c = rq - pyptx.math.fma(lo, rq, lo)            # (1 + rq)(1 - lo) - 1
    y = f32(0.0)
    if xs < f32(2.0):
        z = xs - f32(1.25)                         # exact
        r = pyptx.math.fma(f32(ERFC_A11), z, f32(ERFC_A10))
        r = pyptx.math.fma(r, z, f32(ERFC_A9))
        r = pyptx.math.fma(r, z, f32(ERFC_A8))
        r = pyptx.math.fma(r, z, f32(ERFC_A7))
        r = pyptx.math.fma(r, z, f32(ERFC_A6))
        r = pyptx.math.fma(r, z, f32(ERFC_A5))
        r = pyptx.math.fma(r, z, f32(ERFC_A4))
        r = pyptx.math.fma(r, z, f32(ERFC_A3))
        r = pyptx.math.fma(r, z, f32(ERFC_A2))
        r = pyptx.math.fma(r, z, f32(ERFC_A1))
        r = pyptx.math.fma(r, z, f32(ERFC_A0))
        y = pyptx.math.fma(r, c, r)
    else:
        t = f32(1.0) / xs                          # S is insensitive to t's rounding
        s = pyptx.math.fma(f32(ERFC_B8), t, f32(ERFC_B7))
        s = pyptx.math.fma(s, t, f32(ERFC_B6))
        s = pyptx.math.fma(s, t, f32(ERFC_B5))
        s = pyptx.math.fma(s, t, f32(ERFC_B4))
        s = pyptx.math.fma(s, t, f32(ERFC_B3))
        s = pyptx.math.fma(s, t, f32(ERFC_B2))
        s = pyptx.math.fma(s, t, f32(ERFC_B1))
        s = pyptx.math.fma(s, t, f32(ERFC_B0))     # S(t) = x R(x)
        y = pyptx.math.fma(s, c, s) / xs
    return _scale_pow2_f32(y, k)


@pyptx.func
def erf_f32(x: f32):
    ax = pyptx.math.fabs(x)
    if ax < f32(1.0):
        return _erf_small_f32(x)                   # keeps -0.0
    y = copysign_f32(f32(1.0) - _erfc_big_f32(ax), x)
    return x + x if x != x else y


@pyptx.func
def erfc_f32(x: f32):
    if pyptx.math.fabs(x) < f32(0.5):
        return f32(1.0) - _erf_small_f32(x)
    c = _erfc_big_f32(pyptx.math.fabs(x))
    y = c if x > f32(0.0) else f32(2.0) - c
    return x + x if x != x else y
