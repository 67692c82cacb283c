"""Accurate f64 exp/exp2/log/log2/sin/cos/tanh and exact fmod, written in the pyptx DSL itself
(the f32 functions, computed in f32 arithmetic, live in pyptx/mathlib/basic_f32.py and are re-exported).

Why this shape:
* Only IEEE-exact operations (+ - * / .rn, explicit fma, rint, integer and bit operations): the GPU
  and the CPU executor then agree bit for bit, so the CPU test-suite proves the GPU's accuracy.
* No `a * b` whose single use is an addition: the compiler's FMA contraction would otherwise fuse
  it and change the rounding.  Every fused step is written as `pyptx.math.fma` explicitly.
* The f64 kernels are < 1 ulp (measured: docs/math.md).
* Every algorithm is mirrored op for op by tests/mathlib_emulation.py (vectorised numpy).
"""
from __future__ import annotations

import math as _m
import struct as _struct

import pyptx
from pyptx import f32, f64, i32, u32, u64


def _trunc_bits(v: float, keep: int) -> float:
    """v with only its top `keep` significand bits, so that small-integer multiples are exact."""
    b = _struct.unpack("<Q", _struct.pack("<d", v))[0]
    return _struct.unpack("<d", _struct.pack("<Q", b & ~((1 << (53 - keep)) - 1)))[0]


# ---- bit patterns and splits of constants -----------------------------------------------------
INF_BITS = 0x7FF0000000000000
NAN_BITS = 0x7FF8000000000000
MANT_MASK = 0x000FFFFFFFFFFFFF
ONE_EXP_BITS = 0x3FF0000000000000
TWO_M1022 = 2.0 ** -1022
TWO_P54 = 2.0 ** 54
SQRT2 = 1.4142135623730951

LN2 = 0.6931471805599453                  # RN(ln 2)
LN2_LO = 2.3190468138462996e-17           # ln 2 - LN2
LOG2E = 1.4426950408889634                # RN(1/ln 2)
LOG2E_LO = 2.0355273740931033e-17         # 1/ln 2 - LOG2E
LN2_HI32 = _trunc_bits(LN2, 32)           # e * LN2_HI32 is exact for |e| < 2^21
LN2_LO32 = (LN2 - LN2_HI32) + LN2_LO      # ln 2 - LN2_HI32 (to ~2^-85)

TWO_OVER_PI = 0.6366197723675814          # RN(2/pi)
PIO2_1 = 1.5707963267948966               # pi/2 = PIO2_1 + PIO2_2 + PIO2_3 (to ~2^-160)
PIO2_2 = 6.123233995736766e-17
PIO2_3 = -1.4973849048591698e-33

SIN_TINY = 2.0 ** -26                     # sin x = x, cos x = 1 below this (correctly rounded)
TANH_TINY = 2.0 ** -28
TANH_SERIES_MAX = 0.55
TANH_ONE = 22.0                           # tanh rounds to +-1 beyond this
EXP_MAX = 709.8                           # exp overflows above (threshold 709.7827)
EXP_MIN = -745.2                          # exp rounds to 0 below (threshold -745.1332)
EXP2_MAX = 1024.0
EXP2_MIN = -1076.0

# e^r - 1 = r + r^2 * (EXP_C2 + r*(EXP_C3 + ...)), Taylor: 1/n!, |r| <= ln2/2 (error < 2^-57)
EXP_C2, EXP_C3, EXP_C4, EXP_C5, EXP_C6, EXP_C7 = (1.0 / _m.factorial(n) for n in range(2, 8))
EXP_C8, EXP_C9, EXP_C10, EXP_C11, EXP_C12, EXP_C13 = (1.0 / _m.factorial(n) for n in range(8, 14))

# log1p(f) = f - f^2/2 + s*(f^2/2 + R), s = f/(2+f), R = sum 2 z^n/(2n+1), z = s^2 <= 0.0295
LOG_C1, LOG_C2, LOG_C3, LOG_C4, LOG_C5 = (2.0 / (2 * n + 1) for n in range(1, 6))
LOG_C6, LOG_C7, LOG_C8, LOG_C9, LOG_C10 = (2.0 / (2 * n + 1) for n in range(6, 11))

# sin(h) = h + h^3 * (S3 + z*(S5 + ...)), cos(h) = 1 - z/2 + z^2 * (C4 + z*(C6 + ...)), z = h^2
SIN_S3, SIN_S5, SIN_S7, SIN_S9, SIN_S11 = ((-1.0) ** (n // 2) / _m.factorial(n)
                                          for n in range(3, 12, 2))
SIN_S13, SIN_S15, SIN_S17, SIN_S19 = ((-1.0) ** (n // 2) / _m.factorial(n)
                                      for n in range(13, 20, 2))
COS_C4, COS_C6, COS_C8, COS_C10 = ((-1.0) ** (n // 2) / _m.factorial(n) for n in range(4, 11, 2))
COS_C12, COS_C14, COS_C16, COS_C18 = ((-1.0) ** (n // 2) / _m.factorial(n)
                                      for n in range(12, 19, 2))

# tanh(x) = x + x^3 * (T3 + z*(T5 + ...)) for |x| < 0.55 (Taylor coefficients, via mpmath)
TANH_C3 = -0.3333333333333333
TANH_C5 = 0.13333333333333333
TANH_C7 = -0.05396825396825397
TANH_C9 = 0.021869488536155203
TANH_C11 = -0.008863235529902197
TANH_C13 = 0.003592128036572481
TANH_C15 = -0.0014558343870513183
TANH_C17 = 0.000590027440945586
TANH_C19 = -0.00023912911424355248
TANH_C21 = 9.691537956929451e-05
TANH_C23 = -3.927832388331683e-05
TANH_C25 = 1.5918905069328964e-05
TANH_C27 = -6.451689215655431e-06
TANH_C29 = 2.6147711512907546e-06
TANH_C31 = -1.0597268320104654e-06
TANH_C33 = 4.294911078273806e-07
TANH_C35 = -1.7406618963571648e-07
TANH_C37 = 7.054636946400968e-08
TANH_C39 = -2.859136662305254e-08


# ---- exp / exp2 -------------------------------------------------------------------------------

@pyptx.func
def _expm1_poly_f64(r: f64):
    """p with e^r - 1 = r + r^2 p for |r| <= ~0.35 (Taylor to r^13)."""
    p = pyptx.math.fma(f64(EXP_C13), r, f64(EXP_C12))
    p = pyptx.math.fma(p, r, f64(EXP_C11))
    p = pyptx.math.fma(p, r, f64(EXP_C10))
    p = pyptx.math.fma(p, r, f64(EXP_C9))
    p = pyptx.math.fma(p, r, f64(EXP_C8))
    p = pyptx.math.fma(p, r, f64(EXP_C7))
    p = pyptx.math.fma(p, r, f64(EXP_C6))
    p = pyptx.math.fma(p, r, f64(EXP_C5))
    p = pyptx.math.fma(p, r, f64(EXP_C4))
    p = pyptx.math.fma(p, r, f64(EXP_C3))
    return pyptx.math.fma(p, r, f64(EXP_C2))


@pyptx.func
def _expm1_reduced_f64(r: f64):
    """e^r - 1 for |r| <= ~0.35, relative error < 2^-56 before the final rounding."""
    return pyptx.math.fma(r * r, _expm1_poly_f64(r), r)


@pyptx.func
def _exp_finish_f64(r: f64, rlo: f64, k: i32):
    """2^k * e^(r + rlo): one rounding for 1 + expm1, then two exact-or-final power-of-2 scalings
    (so denormal and overflowing results come out of the last multiply)."""
    em1 = _expm1_reduced_f64(r)
    em1 = em1 + pyptx.math.fma(rlo, em1, rlo)
    y = f64(1.0) + em1
    k1 = k >> 1
    k2 = k - k1
    s1 = pyptx.bitcast(u64(k1 + 1023) << 52, f64)
    s2 = pyptx.bitcast(u64(k2 + 1023) << 52, f64)
    return (y * s1) * s2


@pyptx.func
def exp_f64(x: f64):
    if x != x:
        return x + x
    if x > f64(EXP_MAX):
        return pyptx.bitcast(u64(INF_BITS), f64)
    if x < f64(EXP_MIN):
        return f64(0.0)
    k = pyptx.math.rint(x * f64(LOG2E))
    hi = pyptx.math.fma(-k, f64(LN2), x)          # exact: |hi| < 1, k * LN2 has 2^-53 steps
    lo = k * f64(-LN2_LO)
    r = hi + lo
    rlo = (hi - r) + lo
    return _exp_finish_f64(r, rlo, i32(k))


@pyptx.func
def exp2_f64(x: f64):
    if x != x:
        return x + x
    if x >= f64(EXP2_MAX):
        return pyptx.bitcast(u64(INF_BITS), f64)
    if x < f64(EXP2_MIN):
        return f64(0.0)
    k = pyptx.math.rint(x)
    f = x - k                                      # exact, |f| <= 1/2
    r = f * f64(LN2)
    rlo = pyptx.math.fma(f, f64(LN2_LO), pyptx.math.fma(f, f64(LN2), -r))
    return _exp_finish_f64(r, rlo, i32(k))


# ---- log / log2 -------------------------------------------------------------------------------

@pyptx.func
def _log_special_f64(x: f64):
    """log of the inputs the main path does not take: nan, <= 0, +inf."""
    if x == f64(0.0):
        return -pyptx.bitcast(u64(INF_BITS), f64)
    if x > f64(0.0):
        return x                                   # +inf
    if x != x:
        return x + x
    return pyptx.bitcast(u64(NAN_BITS), f64)      # negative


@pyptx.func
def _log_exponent_f64(x: f64):
    """e with x = 2^e * m, m in [sqrt(1/2), sqrt(2)); x finite and > 0 (denormals too)."""
    e = i32(0)
    if x < f64(TWO_M1022):
        x = x * f64(TWO_P54)
        e = i32(-54)
    bits = pyptx.bitcast(x, u64)
    e = e + (i32(bits >> 52) - 1023)
    m = pyptx.bitcast((bits & u64(MANT_MASK)) | u64(ONE_EXP_BITS), f64)
    if m > f64(SQRT2):
        e = e + 1
    return f64(e)


@pyptx.func
def _log_mantissa_f64(x: f64):
    """m - 1 with m as in `_log_exponent_f64` (exact)."""
    if x < f64(TWO_M1022):
        x = x * f64(TWO_P54)
    bits = pyptx.bitcast(x, u64)
    m = pyptx.bitcast((bits & u64(MANT_MASK)) | u64(ONE_EXP_BITS), f64)
    if m > f64(SQRT2):
        m = m * f64(0.5)
    return m - f64(1.0)


@pyptx.func
def _log1p_tail_f64(f: f64, u: f64):
    """log1p(f) - u, where u = RN(f - f*f/2) (one fma) and |f| <= sqrt(2) - 1."""
    s = f / (f64(2.0) + f)
    z = s * s
    p = pyptx.math.fma(f64(LOG_C10), z, f64(LOG_C9))
    p = pyptx.math.fma(p, z, f64(LOG_C8))
    p = pyptx.math.fma(p, z, f64(LOG_C7))
    p = pyptx.math.fma(p, z, f64(LOG_C6))
    p = pyptx.math.fma(p, z, f64(LOG_C5))
    p = pyptx.math.fma(p, z, f64(LOG_C4))
    p = pyptx.math.fma(p, z, f64(LOG_C3))
    p = pyptx.math.fma(p, z, f64(LOG_C2))
    p = pyptx.math.fma(p, z, f64(LOG_C1))
    hf = f64(0.5) * f
    hfsq = hf * f
    hfsq_err = pyptx.math.fma(hf, f, -hfsq)        # f*f/2 = hfsq + hfsq_err exactly
    hfsq_r = pyptx.math.fma(z, p, hfsq)
    return pyptx.math.fma(s, hfsq_r, ((f - u) - hfsq) - hfsq_err)


@pyptx.func
def log_f64(x: f64):
    if not (x > f64(0.0) and x < pyptx.bitcast(u64(INF_BITS), f64)):
        return _log_special_f64(x)
    dk = _log_exponent_f64(x)
    f = _log_mantissa_f64(x)
    u = pyptx.math.fma(f * f64(-0.5), f, f)
    lo = _log1p_tail_f64(f, u)
    a = dk * f64(LN2_HI32)                          # exact
    w = a + u
    tail = pyptx.math.fma(dk, f64(LN2_LO32), lo) + ((a - w) + u)
    return w + tail


@pyptx.func
def log2_f64(x: f64):
    if not (x > f64(0.0) and x < pyptx.bitcast(u64(INF_BITS), f64)):
        return _log_special_f64(x)
    dk = _log_exponent_f64(x)
    f = _log_mantissa_f64(x)
    u = pyptx.math.fma(f * f64(-0.5), f, f)
    lo = _log1p_tail_f64(f, u)
    p = u * f64(LOG2E)
    perr = pyptx.math.fma(u, f64(LOG2E), -p)
    tail = pyptx.math.fma(lo, f64(LOG2E), pyptx.math.fma(u, f64(LOG2E_LO), perr))
    w = dk + p
    tail = tail + ((dk - w) + p)
    return w + tail


# ---- sin / cos --------------------------------------------------------------------------------

@pyptx.func
def _reduce_pio2_f64(x: f64):
    """k = nearest integer to x / (pi/2), as f64."""
    return pyptx.math.rint(x * f64(TWO_OVER_PI))


@pyptx.func
def _reduced_hi_f64(x: f64, k: f64):
    """x - k*pi/2 rounded (3-part Cody-Waite with exact fma steps, good for |k| < 2^20)."""
    a = pyptx.math.fma(-k, f64(PIO2_1), x)
    w = k * f64(PIO2_2)
    werr = pyptx.math.fma(k, f64(PIO2_2), -w)
    hi = a - w
    lo = pyptx.math.fma(-k, f64(PIO2_3), ((a - hi) - w) - werr)
    return hi + lo


@pyptx.func
def _reduced_lo_f64(x: f64, k: f64, r: f64):
    """(x - k*pi/2) - r, the part of the reduced argument `r` lost to rounding."""
    a = pyptx.math.fma(-k, f64(PIO2_1), x)
    w = k * f64(PIO2_2)
    werr = pyptx.math.fma(k, f64(PIO2_2), -w)
    hi = a - w
    lo = pyptx.math.fma(-k, f64(PIO2_3), ((a - hi) - w) - werr)
    return (hi - r) + lo


@pyptx.func
def _sin_kernel_f64(h: f64, l: f64):
    """sin(h + l), |h| <= ~pi/4, |l| <= ulp(h)."""
    z = h * h
    p = pyptx.math.fma(f64(SIN_S19), z, f64(SIN_S17))
    p = pyptx.math.fma(p, z, f64(SIN_S15))
    p = pyptx.math.fma(p, z, f64(SIN_S13))
    p = pyptx.math.fma(p, z, f64(SIN_S11))
    p = pyptx.math.fma(p, z, f64(SIN_S9))
    p = pyptx.math.fma(p, z, f64(SIN_S7))
    p = pyptx.math.fma(p, z, f64(SIN_S5))
    p = pyptx.math.fma(p, z, f64(SIN_S3))
    v = z * h
    t = pyptx.math.fma(v, p, pyptx.math.fma(z * f64(-0.5), l, l))
    return h + t


@pyptx.func
def _cos_kernel_f64(h: f64, l: f64):
    """cos(h + l), |h| <= ~pi/4; 1 - z/2 is split so its rounding error is added back."""
    z = h * h
    p = pyptx.math.fma(f64(COS_C18), z, f64(COS_C16))
    p = pyptx.math.fma(p, z, f64(COS_C14))
    p = pyptx.math.fma(p, z, f64(COS_C12))
    p = pyptx.math.fma(p, z, f64(COS_C10))
    p = pyptx.math.fma(p, z, f64(COS_C8))
    p = pyptx.math.fma(p, z, f64(COS_C6))
    p = pyptx.math.fma(p, z, f64(COS_C4))
    hz = f64(0.5) * z
    w = f64(1.0) - hz
    hl = h * l
    return w + (((f64(1.0) - w) - hz) + pyptx.math.fma(z * z, p, -hl))


@pyptx.func
def sin_f64(x: f64):
    if pyptx.math.fabs(x) < f64(SIN_TINY):
        return x                                   # keeps -0.0; nan and inf flow through below
    k = _reduce_pio2_f64(x)
    r = _reduced_hi_f64(x, k)
    rl = _reduced_lo_f64(x, k, r)
    q = i32(k) & 3
    res = f64(0.0)
    if (q & 1) == 0:
        res = _sin_kernel_f64(r, rl)
    else:
        res = _cos_kernel_f64(r, rl)
    if q >= 2:
        res = -res
    return res


@pyptx.func
def cos_f64(x: f64):
    if pyptx.math.fabs(x) < f64(SIN_TINY):
        return f64(1.0)
    k = _reduce_pio2_f64(x)
    r = _reduced_hi_f64(x, k)
    rl = _reduced_lo_f64(x, k, r)
    q = i32(k) & 3
    res = f64(0.0)
    if (q & 1) == 0:
        res = _cos_kernel_f64(r, rl)
    else:
        res = _sin_kernel_f64(r, rl)
    if ((q + 1) & 2) != 0:
        res = -res
    return res


# ---- tanh -------------------------------------------------------------------------------------

@pyptx.func
def _tanh_series_f64(x: f64):
    """tanh x for |x| < 0.55: Taylor series to x^39 (truncation < 2^-57 relative)."""
    z = x * x
    p = pyptx.math.fma(f64(TANH_C39), z, f64(TANH_C37))
    p = pyptx.math.fma(p, z, f64(TANH_C35))
    p = pyptx.math.fma(p, z, f64(TANH_C33))
    p = pyptx.math.fma(p, z, f64(TANH_C31))
    p = pyptx.math.fma(p, z, f64(TANH_C29))
    p = pyptx.math.fma(p, z, f64(TANH_C27))
    p = pyptx.math.fma(p, z, f64(TANH_C25))
    p = pyptx.math.fma(p, z, f64(TANH_C23))
    p = pyptx.math.fma(p, z, f64(TANH_C21))
    p = pyptx.math.fma(p, z, f64(TANH_C19))
    p = pyptx.math.fma(p, z, f64(TANH_C17))
    p = pyptx.math.fma(p, z, f64(TANH_C15))
    p = pyptx.math.fma(p, z, f64(TANH_C13))
    p = pyptx.math.fma(p, z, f64(TANH_C11))
    p = pyptx.math.fma(p, z, f64(TANH_C9))
    p = pyptx.math.fma(p, z, f64(TANH_C7))
    p = pyptx.math.fma(p, z, f64(TANH_C5))
    p = pyptx.math.fma(p, z, f64(TANH_C3))
    return pyptx.math.fma(x * z, p, x)


@pyptx.func
def tanh_f64(x: f64):
    t = pyptx.math.fabs(x)
    if x != x:
        return x + x
    if t < f64(TANH_TINY):
        return x                                   # keeps -0.0
    if t < f64(TANH_SERIES_MAX):
        return _tanh_series_f64(x)
    y = f64(1.0)
    if t < f64(TANH_ONE):
        y = f64(1.0) - f64(2.0) / (exp_f64(t + t) + f64(1.0))
    if x < f64(0.0):
        y = -y
    return y


# ---- f32: computed in f32 arithmetic (pyptx/mathlib/basic_f32.py) ------------------------------------

from .basic_f32 import (cos_f32, exp2_f32, exp_f32, log2_f32, log_f32,  # noqa: E402,F401
                          sin_f32, tanh_f32)


# ---- fmod (exact, C semantics) ----------------------------------------------------------------
# fmod(a, b) = a - trunc(a / b) * b is always representable, so it is computed exactly from the
# integer significands: |a| = ma * 2^ea, |b| = mb * 2^eb, r = (ma * 2^(ea - eb)) mod mb by shifts
# of at most clz(mb) bits (r << s stays below 2^64), then r * 2^eb (an exact multiply) with the
# sign of a.  Trailing zero bits of mb are taken out first (x * 2^t mod m * 2^t = (x mod m) * 2^t),
# so "round" divisors (2.0, 360.0, ...) need few steps.  Used by `//` and `%` on floats, which
# follow numpy's npy_divmod on top of it (pyptx/frontend/arith.py).

F64_ABS_MASK = 0x7FFFFFFFFFFFFFFF
F64_IMPLICIT = 0x0010000000000000
F32_ABS_MASK = 0x7FFFFFFF
F32_INF_BITS = 0x7F800000
F32_NAN_BITS = 0x7FC00000
F32_MANT_MASK = 0x007FFFFF
F32_IMPLICIT = 0x00800000


@pyptx.func
def _shifted_mod_u64(m: u64, d: i32, mb: u64):
    """(m * 2^d) mod mb, for d >= 0, 1 <= mb < 2^53 and m < 2^53."""
    t = pyptx.clz(pyptx.brev(mb))                  # trailing zero bits of mb
    back = i32(0)
    if d >= t:
        mb = mb >> u64(t)
        d = d - t
        back = t
    step = pyptx.clz(mb)                           # r < mb, so r << step < 2^64
    r = m % mb
    while d > 0 and r != u64(0):
        s = min(d, step)
        r = (r << u64(s)) % mb
        d = d - s
    return r << u64(back)


@pyptx.func
def _pow2_f64(e: i32):
    """2^e exactly, -1074 <= e <= 1023."""
    if e >= -1022:
        return pyptx.bitcast(u64(e + 1023) << u64(52), f64)
    return pyptx.bitcast(u64(1) << u64(e + 1074), f64)


@pyptx.func
def _pow2_f32(e: i32):
    """2^e exactly, -149 <= e <= 127."""
    if e >= -126:
        return pyptx.bitcast(u32(e + 127) << u32(23), f32)
    return pyptx.bitcast(u32(1) << u32(e + 149), f32)


@pyptx.func
def fmod_f64(a: f64, b: f64):
    """C fmod: exact; sign of a; nan for a inf/nan, b nan or b == 0; a for |a| < |b|."""
    ua = pyptx.bitcast(a, u64)
    xa = ua & u64(F64_ABS_MASK)
    xb = pyptx.bitcast(b, u64) & u64(F64_ABS_MASK)
    if xa >= u64(INF_BITS) or xb > u64(INF_BITS) or xb == u64(0):
        return pyptx.bitcast(u64(NAN_BITS), f64)
    if xa < xb:
        return a                                   # also a = +-0 and b = +-inf
    ea = i32(xa >> u64(52))
    ma = xa & u64(MANT_MASK)
    if ea == 0:
        ea = 1
    else:
        ma = ma | u64(F64_IMPLICIT)
    eb = i32(xb >> u64(52))
    mb = xb & u64(MANT_MASK)
    if eb == 0:
        eb = 1
    else:
        mb = mb | u64(F64_IMPLICIT)
    r = _shifted_mod_u64(ma, ea - eb, mb)
    res = f64(r) * _pow2_f64(eb - 1075)            # exact: r < mb, r * 2^eb < |b|
    if (ua >> u64(63)) != u64(0):
        res = -res
    return res


@pyptx.func
def fmod_f32(a: f32, b: f32):
    """C fmodf, as `fmod_f64`."""
    ua = pyptx.bitcast(a, u32)
    xa = ua & u32(F32_ABS_MASK)
    xb = pyptx.bitcast(b, u32) & u32(F32_ABS_MASK)
    if xa >= u32(F32_INF_BITS) or xb > u32(F32_INF_BITS) or xb == u32(0):
        return pyptx.bitcast(u32(F32_NAN_BITS), f32)
    if xa < xb:
        return a
    ea = i32(xa >> u32(23))
    ma = xa & u32(F32_MANT_MASK)
    if ea == 0:
        ea = 1
    else:
        ma = ma | u32(F32_IMPLICIT)
    eb = i32(xb >> u32(23))
    mb = xb & u32(F32_MANT_MASK)
    if eb == 0:
        eb = 1
    else:
        mb = mb | u32(F32_IMPLICIT)
    r = _shifted_mod_u64(u64(ma), ea - eb, u64(mb))
    res = f32(r) * _pow2_f32(eb - 150)
    if (ua >> u32(31)) != u32(0):
        res = -res
    return res
