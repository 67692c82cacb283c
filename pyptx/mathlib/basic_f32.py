"""Accurate f32 exp/exp2/log/log2/sin/cos/tanh in f32 arithmetic, written in the pyptx DSL.

Why this shape:
* No f64 anywhere on the paths that |x| <= 2^17 takes (consumer GPUs run f64 at 1/64 rate).
* Only IEEE-exact operations (+ - * / .rn, explicit fma, rint, integer and bit operations, casts):
  the GPU and the CPU executor agree bit for bit, so the CPU test-suite proves the GPU's accuracy.
* No `a * b` whose single use is an addition: the compiler's FMA contraction would otherwise fuse
  it and change the rounding.  Every fused step is written as `pyptx.math.fma` explicitly.
* Polynomials are near-minimax fits (tests/tools/mathlib_fit.py) with coefficients that are f32 values;
  range reductions are Cody-Waite with exact fma steps.  Measured errors: docs/math.md.
"""
from __future__ import annotations

import pyptx
from pyptx import f32, i32, i64, u32, u64

from .consts import (COS_C, EXP2_Q, EXP_Q, LN2_HI, LN2_LO, LOG2_G, LOG2E_HI, LOG2E_LO,
                             LOG_G, PIO2_1, PIO2_2, PIO2_3, SIN_S, TANH_T, TWO_OVER_PI,
                             TWO_OVER_PI_WORDS)

# the DSL takes scalar constants only: one name per coefficient
EXP_Q0, EXP_Q1, EXP_Q2, EXP_Q3, EXP_Q4, EXP_Q5 = EXP_Q
EXP2_Q0, EXP2_Q1, EXP2_Q2, EXP2_Q3, EXP2_Q4, EXP2_Q5 = EXP2_Q
LOG_G0, LOG_G1, LOG_G2, LOG_G3, LOG_G4, LOG_G5, LOG_G6, LOG_G7, LOG_G8 = LOG_G
LOG2_G0, LOG2_G1, LOG2_G2, LOG2_G3, LOG2_G4, LOG2_G5, LOG2_G6, LOG2_G7, LOG2_G8 = LOG2_G
SIN_S0, SIN_S1, SIN_S2 = SIN_S
COS_C0, COS_C1, COS_C2 = COS_C
TANH_T0, TANH_T1, TANH_T2, TANH_T3, TANH_T4, TANH_T5, TANH_T6 = TANH_T
TPI0, TPI1, TPI2, TPI3, TPI4, TPI5, TPI6 = TWO_OVER_PI_WORDS

F32_INF_BITS = 0x7F800000
F32_NAN_BITS = 0x7FC00000
LOG_OFFSET = 0x3F3504F3          # bits of sqrt(1/2): m = x / 2^e lands in [sqrt(1/2), sqrt(2))
TWO_M126 = 2.0 ** -126
TWO_P23 = 2.0 ** 23
TWO_M62 = 2.0 ** -62
EXP_LO, EXP_HI = -104.0, 89.0    # exp rounds to 0 below -103.98, overflows above 88.73
EXP2_LO, EXP2_HI = -151.0, 129.0
SINCOS_FAST_MAX = 131072.0       # 2^17: Cody-Waite below, integer Payne-Hanek above
SIN_TINY = 2.0 ** -12            # sin x rounds to x below this (keeps -0.0)
TANH_TINY = 2.0 ** -12
TANH_POLY_MAX = 0.875
TANH_ONE = 10.0                  # tanh rounds to +-1 beyond 9.01


# ---- exp / exp2 -------------------------------------------------------------------------------

@pyptx.func
def _scale_pow2_f32(p: f32, k: i32):
    """p * 2^k for -151 <= k <= 129 with one rounding: two normal power-of-2 factors, so
    denormal and overflowing results come out of the last multiply."""
    k1 = k >> 1
    s1 = pyptx.bitcast(u32(k1 + 127) << u32(23), f32)
    s2 = pyptx.bitcast(u32(k - k1 + 127) << u32(23), f32)
    return (p * s1) * s2


@pyptx.func
def exp_f32(x: f32):
    xs = min(max(x, f32(EXP_LO)), f32(EXP_HI))     # clamping keeps 0 / inf exactly
    k = pyptx.math.rint(xs * f32(LOG2E_HI))
    r = pyptx.math.fma(-k, f32(LN2_HI), xs)        # exact: |r| < 1 on a 2^-24 grid
    r = pyptx.math.fma(-k, f32(LN2_LO), r)
    q = pyptx.math.fma(f32(EXP_Q5), r, f32(EXP_Q4))
    q = pyptx.math.fma(q, r, f32(EXP_Q3))
    q = pyptx.math.fma(q, r, f32(EXP_Q2))
    q = pyptx.math.fma(q, r, f32(EXP_Q1))
    q = pyptx.math.fma(q, r, f32(EXP_Q0))
    y = _scale_pow2_f32(pyptx.math.fma(q, r, f32(1.0)), i32(k))
    return x + x if x != x else y


@pyptx.func
def exp2_f32(x: f32):
    xs = min(max(x, f32(EXP2_LO)), f32(EXP2_HI))
    k = pyptx.math.rint(xs)
    f = xs - k                                     # exact, |f| <= 1/2
    q = pyptx.math.fma(f32(EXP2_Q5), f, f32(EXP2_Q4))
    q = pyptx.math.fma(q, f, f32(EXP2_Q3))
    q = pyptx.math.fma(q, f, f32(EXP2_Q2))
    q = pyptx.math.fma(q, f, f32(EXP2_Q1))
    q = pyptx.math.fma(q, f, f32(EXP2_Q0))
    y = _scale_pow2_f32(pyptx.math.fma(q, f, f32(1.0)), i32(k))
    return x + x if x != x else y


# ---- log / log2 -------------------------------------------------------------------------------

@pyptx.func
def _log_special_f32(x: f32):
    """log of the inputs the main path does not take: nan, <= 0, +inf."""
    if x == f32(0.0):
        return -pyptx.bitcast(u32(F32_INF_BITS), f32)
    if x > f32(0.0):
        return x                                   # +inf
    if x != x:
        return x + x
    return pyptx.bitcast(u32(F32_NAN_BITS), f32)   # negative


@pyptx.func
def _log_split_f32(x: f32):
    """(e, f) with x = 2^e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); x finite > 0, denormals too."""
    sub = x < f32(TWO_M126)
    xs = x * f32(TWO_P23) if sub else x
    bits = pyptx.bitcast(xs, i32)
    e = (bits - LOG_OFFSET) >> 23
    m = pyptx.bitcast(bits - (e << 23), f32)
    e = e - 23 if sub else e
    return f32(e), m - f32(1.0)                    # m - 1 is exact (Sterbenz)


@pyptx.func
def _log_poly_f32(f: f32, g0: f32, g1: f32, g2: f32, g3: f32, g4: f32, g5: f32, g6: f32,
                  g7: f32, g8: f32):
    """G(f) = g0 + g1 f + ... + g8 f^8 (Horner, fma)."""
    g = pyptx.math.fma(g8, f, g7)
    g = pyptx.math.fma(g, f, g6)
    g = pyptx.math.fma(g, f, g5)
    g = pyptx.math.fma(g, f, g4)
    g = pyptx.math.fma(g, f, g3)
    g = pyptx.math.fma(g, f, g2)
    g = pyptx.math.fma(g, f, g1)
    return pyptx.math.fma(g, f, g0)


@pyptx.func
def log_f32(x: f32):
    if not (x > f32(0.0) and x < pyptx.bitcast(u32(F32_INF_BITS), f32)):
        return _log_special_f32(x)
    e, f = _log_split_f32(x)
    g = _log_poly_f32(f, f32(LOG_G0), f32(LOG_G1), f32(LOG_G2), f32(LOG_G3),
                      f32(LOG_G4), f32(LOG_G5), f32(LOG_G6), f32(LOG_G7), f32(LOG_G8))
    lp = pyptx.math.fma(f * f, g, f)               # log1p(f) = f + f^2 G(f)
    lo = pyptx.math.fma(e, f32(LN2_LO), lp)
    return pyptx.math.fma(e, f32(LN2_HI), lo)      # e * LN2_HI is exact inside the fma


@pyptx.func
def log2_f32(x: f32):
    if not (x > f32(0.0) and x < pyptx.bitcast(u32(F32_INF_BITS), f32)):
        return _log_special_f32(x)
    e, f = _log_split_f32(x)
    g = _log_poly_f32(f, f32(LOG2_G0), f32(LOG2_G1), f32(LOG2_G2), f32(LOG2_G3),
                      f32(LOG2_G4), f32(LOG2_G5), f32(LOG2_G6), f32(LOG2_G7),
                      f32(LOG2_G8))
    t = pyptx.math.fma(f * f, g, f * f32(LOG2E_LO))
    lp = pyptx.math.fma(f, f32(LOG2E_HI), t)       # log2(1 + f) = f/ln2 + f^2 G(f)
    return e + lp


# ---- sin / cos --------------------------------------------------------------------------------

@pyptx.func
def _two_over_pi_word(i: i32):
    """Bits 32(i-1)+1 .. 32i of 2/pi as a u32 (word 0 is zero: the bits left of the point)."""
    w = u32(0)
    w = u32(TPI0) if i == 1 else w
    w = u32(TPI1) if i == 2 else w
    w = u32(TPI2) if i == 3 else w
    w = u32(TPI3) if i == 4 else w
    w = u32(TPI4) if i == 5 else w
    w = u32(TPI5) if i == 6 else w
    w = u32(TPI6) if i == 7 else w
    return w


@pyptx.func
def _window_word(hi: u32, lo: u32, sh: i32):
    """The 32 bits that start `sh` bits into the 64-bit word pair hi:lo."""
    return ((u64(hi) << u64(32) | u64(lo)) >> u64(32 - sh)) & u64(0xFFFFFFFF)


@pyptx.func
def _reduce_pio2_slow_f32(x: f32):
    """(r, rl, q): x = (q + (r + rl) / (pi/2)) * pi/2 mod 2pi for |x| >= 2^17 (Payne-Hanek with
    integer arithmetic: the 24-bit significand times a 96-bit window of 2/pi), nan for inf/nan."""
    bits = pyptx.bitcast(x, u32)
    be = i32((bits >> u32(23)) & u32(0xFF))
    if be == 255:
        return x - x, f32(0.0), i32(0)
    m = u64((bits & u32(0x007FFFFF)) | u32(0x00800000))
    # |x| = m * 2^(be - 150); bits of 2/pi left of position be - 151 only add multiples of 4
    o = be - 120                                   # window start, counted from word 0's top bit
    idx = o >> 5
    sh = o & 31
    t0 = _two_over_pi_word(idx)
    t1 = _two_over_pi_word(idx + 1)
    t2 = _two_over_pi_word(idx + 2)
    t3 = _two_over_pi_word(idx + 3)
    lo = m * _window_word(t2, t3, sh)             # the 96-bit window, 32 bits at a time
    mid = m * _window_word(t1, t2, sh) + (lo >> u64(32))
    hi = m * _window_word(t0, t1, sh) + (mid >> u64(32))
    q = i32(hi >> u64(30)) & 3                     # |x| * 2/pi = hi * 2^-30 + ... (mod 4)
    frac = i64(((hi & u64(0x3FFFFFFF)) << u64(32)) | (mid & u64(0xFFFFFFFF)))   # * 2^-62
    if frac >= i64(1) << i64(61):
        frac = frac - (i64(1) << i64(62))
        q = q + 1
    fh = f32(frac)
    fl = f32(frac - i64(fh))
    a = fh * f32(TWO_M62)
    b = fl * f32(TWO_M62)
    rh = a * f32(PIO2_1)
    re = pyptx.math.fma(a, f32(PIO2_1), -rh)
    re = pyptx.math.fma(a, f32(PIO2_2), re)
    re = pyptx.math.fma(b, f32(PIO2_1), re)
    r = rh + re
    rl = (rh - r) + re
    if bits >= u32(0x80000000):
        return -r, -rl, -q
    return r, rl, q


@pyptx.func
def _reduce_pio2_f32(x: f32):
    """(r, rl, q) with x = q * pi/2 + r + rl, |r| <= ~pi/4, |rl| <= ulp(r)/2.  Three-constant
    Cody-Waite (exact first step, product errors recovered by fma) for |x| <= 2^17."""
    if not (pyptx.math.fabs(x) <= f32(SINCOS_FAST_MAX)):
        return _reduce_pio2_slow_f32(x)
    k = pyptx.math.rint(x * f32(TWO_OVER_PI))
    a = pyptx.math.fma(-k, f32(PIO2_1), x)         # exact
    w = k * f32(PIO2_2)
    werr = pyptx.math.fma(k, f32(PIO2_2), -w)      # k * PIO2_2 = w + werr exactly
    hi = a - w
    v = hi - a
    lo = (a - (hi - v)) - (w + v)                  # a - w = hi + lo exactly (TwoSum)
    lo = pyptx.math.fma(-k, f32(PIO2_3), lo - werr)
    r = hi + lo
    return r, (hi - r) + lo, i32(k)


@pyptx.func
def _sin_kernel_f32(h: f32, l: f32):
    """sin(h + l), |h| <= 0.8, |l| <= ulp(h)."""
    z = h * h
    p = pyptx.math.fma(f32(SIN_S2), z, f32(SIN_S1))
    p = pyptx.math.fma(p, z, f32(SIN_S0))
    v = z * h
    t = pyptx.math.fma(v, p, pyptx.math.fma(z * f32(-0.5), l, l))
    return h + t


@pyptx.func
def _cos_kernel_f32(h: f32, l: f32):
    """cos(h + l), |h| <= 0.8: 1 - z/2 is split so that its rounding errors are added back."""
    z = h * h
    zerr = pyptx.math.fma(h, h, -z)
    p = pyptx.math.fma(f32(COS_C2), z, f32(COS_C1))
    p = pyptx.math.fma(p, z, f32(COS_C0))
    hz = f32(0.5) * z
    w = f32(1.0) - hz
    hl = pyptx.math.fma(h, l, f32(0.5) * zerr)
    return w + (((f32(1.0) - w) - hz) + pyptx.math.fma(z * z, p, -hl))


@pyptx.func
def sin_f32(x: f32):
    r, rl, q = _reduce_pio2_f32(x)
    res = _cos_kernel_f32(r, rl) if (q & 1) != 0 else _sin_kernel_f32(r, rl)
    res = -res if (q & 2) != 0 else res
    return x if pyptx.math.fabs(x) < f32(SIN_TINY) else res     # keeps -0.0


@pyptx.func
def cos_f32(x: f32):
    r, rl, q = _reduce_pio2_f32(x)
    res = _sin_kernel_f32(r, rl) if (q & 1) != 0 else _cos_kernel_f32(r, rl)
    return -res if ((q + 1) & 2) != 0 else res


# ---- tanh -------------------------------------------------------------------------------------

@pyptx.func
def tanh_f32(x: f32):
    t = pyptx.math.fabs(x)
    y = f32(0.0)
    if t < f32(TANH_POLY_MAX):
        z = x * x
        p = pyptx.math.fma(f32(TANH_T6), z, f32(TANH_T5))
        p = pyptx.math.fma(p, z, f32(TANH_T4))
        p = pyptx.math.fma(p, z, f32(TANH_T3))
        p = pyptx.math.fma(p, z, f32(TANH_T2))
        p = pyptx.math.fma(p, z, f32(TANH_T1))
        p = pyptx.math.fma(p, z, f32(TANH_T0))
        y = pyptx.math.fma(x * z, p, x)            # x + x^3 T(x^2); odd, so signs come free
    else:
        ts = min(t, f32(TANH_ONE))
        y = f32(1.0) - f32(2.0) / (exp_f32(ts + ts) + f32(1.0))
        y = -y if x < f32(0.0) else y
    if t < f32(TANH_TINY):
        y = x                                      # keeps -0.0
    return x + x if x != x else y
