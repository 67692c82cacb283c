"""pow(x, y) for f32 (in f32 arithmetic only) and f64, written in the pyptx DSL.

Why this shape: |x|^y = 2^(y * log2|x|), and an error d in the exponent w = y * log2|x| becomes a
relative error d * ln 2 in the result.  |w| reaches 150 (f32) / 1075 (f64) before the result
under/overflows, so log2|x| must be about 11 (f32) / 12 (f64) bits more accurate than the working
precision.  Every step therefore carries an unevaluated pair hi + lo ("double-word" arithmetic,
each product's rounding error recovered exactly with an fma):

* log2|x| = e + log2(m), m = 1 + f in [sqrt(1/2), sqrt(2)) (split exactly from the bits);
  log(m) = 2 atanh(s) = 2s + s z R(z), s = f / (2 + f) as a pair (1 / (2 + f) from a minimax
  line and Newton steps, no division and so no slow path; the remainder by fma gives the low
  word), z = s^2 <= 0.0295, R(z) = 2/3 + z R2(z).  The leading term 2s and the 2/3 s^3 term
  are pairs; R2 (the series' tail, Taylor coefficients 2/(2n+1)) is plain working precision.
  The sum is multiplied by the pair 1/ln 2 and added to e (Fast2Sum).
* w = y * log2|x| as a pair (two-product with fma).
* 2^w: the integer part k = rint(w_hi) goes to the exponent, the fraction (exact, |f| <= 1/2)
  through the exp2 polynomial (f32: basic_f32's EXP2_Q; f64: mathlib's expm1 kernel) with the
  low word folded in as a first-order correction, then two power-of-two scalings so that
  subnormal and overflowing results come out of the last multiply with one rounding.

The pair arithmetic in `_s_pair` and `_log2_from_s` is written once for both precisions (the
constants come in as arguments).  Same rules as pyptx/mathlib/basic_f32.py: IEEE-exact operations only
(the GPU and the CPU executor agree bit for bit), every fused step an explicit fma.  C99 / numpy
special cases are handled before the main path.  Measured accuracy: docs/math.md.
"""
from __future__ import annotations

from fractions import Fraction as _Fr

import numpy as _np

import pyptx
from pyptx import f32, f64, i32, i64, u32, u64

from .basic_f64 import LN2, LN2_LO, LOG2E, LOG2E_LO, _exp_finish_f64, _log_exponent_f64
from .basic_f64 import _log_mantissa_f64
from .consts import EXP2_Q, LN2_HI, LOG2E_HI
from .consts import LOG2E_LO as LOG2E_LO32
from .basic_f32 import _log_split_f32, _scale_pow2_f32

EXP2_Q0, EXP2_Q1, EXP2_Q2, EXP2_Q3, EXP2_Q4, EXP2_Q5 = EXP2_Q


def _pair(v: _Fr, dtype) -> tuple[float, float]:
    """v as hi + lo, each rounded to `dtype` (float32 or float64)."""
    hi = float(dtype(float(v)))
    return hi, float(dtype(float(v - _Fr(hi))))


#: 2/3, the leading coefficient of R(z), as a pair
C3_HI32, C3_LO32 = _pair(_Fr(2, 3), _np.float32)
C3_HI64, C3_LO64 = _pair(_Fr(2, 3), _np.float64)
#: R2(z) = sum 2 z^(n-2) / (2n+1): n = 2..6 (f32) and 2..12 (f64); the truncation is below
#: 2^-33 (f32) / 2^-62 (f64) relative to R, 2^-6.6 smaller still relative to log
R5_32, R7_32, R9_32, R11_32, R13_32 = (float(_np.float32(2.0 / (2 * n + 1))) for n in range(2, 7))
R5, R7, R9, R11, R13, R15, R17, R19, R21, R23, R25 = (2.0 / (2 * n + 1) for n in range(2, 13))

#: the minimax line c0 + c1 u for 1/u on [a, b] = [sqrt(1/2) + 1, sqrt(2) + 1] (relative error
#: 1 - u (c0 + c1 u) equioscillates at a, (a + b) / 2 and b: about 2^-6)
_A, _B = 2.0 ** -0.5 + 1.0, 2.0 ** 0.5 + 1.0
RECIP_C1 = -2.0 / (_A * _B + (_A + _B) ** 2 / 4)
RECIP_C0 = -RECIP_C1 * (_A + _B)

F32_INF_BITS = 0x7F800000
F32_NAN_BITS = 0x7FC00000
F64_INF_BITS = 0x7FF0000000000000
F64_NAN_BITS = 0x7FF8000000000000
F32_ODD_MAX = 2.0 ** 24            # every f32 of this magnitude or more is an even integer
F64_ODD_MAX = 2.0 ** 53
EXP2_LO32, EXP2_HI32 = -152.0, 129.0       # 2^w rounds to 0 below -150, overflows from 128
EXP2_LO64, EXP2_HI64 = -1080.0, 1025.0     # ... below -1075, from 1024


# ---- shared pair arithmetic (f32 and f64) -------------------------------------------------------

@pyptx.func
def _recip_seed(u):
    """1/u for u in [2 + (sqrt(1/2) - 1), 2 + (sqrt(2) - 1)] to 2^-6 (minimax line)."""
    return pyptx.math.fma(u, RECIP_C1, RECIP_C0)


@pyptx.func
def _newton_recip(u, r):
    """One Newton step towards 1/u: the relative error squares."""
    return pyptx.math.fma(r, pyptx.math.fma(-u, r, 1.0), r)


@pyptx.func
def _s_pair(f, rc):
    """s = f / (2 + f) as sh + sl (|sl| a few ulp(sh)), given rc = 1/(2 + f) to about the
    working precision: 2 + f exactly as uh + ul, and the remainder (fma) for the low word.
    Newton steps instead of a division: no slow path, and rc need not be correctly rounded."""
    uh = f + 2.0
    ul = f - (uh - 2.0)
    sh = f * rc
    r = pyptx.math.fma(-sh, uh, f)
    r = pyptx.math.fma(-sh, ul, r)
    return sh, r * rc


@pyptx.func
def _log2_from_s(e, sh, sl, zh, q, c3h, c3l, kh, kl):
    """e + log2((1 + s) / (1 - s)) as a pair, s = sh + sl, zh = RN(sh^2), q = R2(zh);
    (c3h, c3l) = 2/3 and (kh, kl) = 1/ln 2 as pairs."""
    zl = pyptx.math.fma(sh + sh, sl, pyptx.math.fma(sh, sh, -zh))    # z = zh + zl
    rl = pyptx.math.fma(zh, q, c3l)                                   # R = c3h + rl
    ph = zh * c3h                                                     # z R = ph + pl
    pl = pyptx.math.fma(zh, c3h, -ph)
    pl = pyptx.math.fma(zh, rl, pl)
    pl = pyptx.math.fma(zl, c3h, pl)
    pl = pyptx.math.fma(zl, rl + rl, pl)                              # zl (R - c3h) + zh zl R2'
    th = sh * ph                                                      # s z R = th + tl
    tl = pyptx.math.fma(sh, ph, -th)
    tl = pyptx.math.fma(sh, pl, tl)
    tl = pyptx.math.fma(sl, ph, tl)
    s2 = sh + sh
    h = s2 + th                                                       # |th| < |s2| / 64
    lo = ((s2 - h) + th) + (tl + (sl + sl))
    n = h + lo                                                        # renormalise: the s^5
    lo = (h - n) + lo                                                 # term sits in tl
    h = n
    lh = h * kh                                                       # (h + lo) / ln 2
    ll = pyptx.math.fma(h, kh, -lh)
    ll = pyptx.math.fma(h, kl, ll)
    ll = pyptx.math.fma(lo, kh, ll)
    w = e + lh                                                        # |lh| <= 1/2 <= |e| or e = 0
    return w, ((e - w) + lh) + ll


@pyptx.func
def _times_pair(y, h, l):
    """y * (h + l) as a pair."""
    wh = y * h
    return wh, pyptx.math.fma(y, l, pyptx.math.fma(y, h, -wh))


# ---- f32 ----------------------------------------------------------------------------------------

@pyptx.func
def _log2_pair_f32(ax: f32):
    """log2(ax) as a pair for finite ax > 0 (subnormals too), ~2^-36 relative (measured)."""
    e, f = _log_split_f32(ax)
    u = f + f32(2.0)
    sh, sl = _s_pair(f, _newton_recip(u, _newton_recip(u, _recip_seed(u))))   # 2^-6 -> 2^-23
    zh = sh * sh
    q = pyptx.math.fma(f32(R13_32), zh, f32(R11_32))
    q = pyptx.math.fma(q, zh, f32(R9_32))
    q = pyptx.math.fma(q, zh, f32(R7_32))
    q = pyptx.math.fma(q, zh, f32(R5_32))
    return _log2_from_s(e, sh, sl, zh, q, f32(C3_HI32), f32(C3_LO32), f32(LOG2E_HI),
                        f32(LOG2E_LO32))


@pyptx.func
def _exp2_pair_f32(wh: f32, wl: f32):
    """2^(wh + wl), |wl| <= ulp(wh): 2^k * 2^f * (1 + wl ln 2)."""
    xs = min(max(wh, f32(EXP2_LO32)), f32(EXP2_HI32))
    k = pyptx.math.rint(xs)
    fr = xs - k                                    # exact, |fr| <= 1/2
    c = (wl if xs == wh else f32(0.0)) * f32(LN2_HI)
    q = pyptx.math.fma(f32(EXP2_Q5), fr, f32(EXP2_Q4))
    q = pyptx.math.fma(q, fr, f32(EXP2_Q3))
    q = pyptx.math.fma(q, fr, f32(EXP2_Q2))
    q = pyptx.math.fma(q, fr, f32(EXP2_Q1))
    q = pyptx.math.fma(q, fr, f32(EXP2_Q0))       # 2^fr = 1 + fr q
    v = pyptx.math.fma(q, fr, pyptx.math.fma(c, fr * q, c))
    return _scale_pow2_f32(f32(1.0) + v, i32(k))


@pyptx.func
def _odd_integer_f32(y: f32):
    return (pyptx.math.fabs(y) < f32(F32_ODD_MAX) and pyptx.math.rint(y) == y
            and (i32(y) & 1) != 0)


@pyptx.func
def pow_f32(x: f32, y: f32):
    """C99 powf: numpy's special cases exactly, <= 1 ulp elsewhere (docs/math.md)."""
    if y == f32(0.0) or x == f32(1.0):
        return f32(1.0)                            # even for a nan x / a nan y
    if x != x or y != y:
        return x + y
    ax = pyptx.math.fabs(x)
    inf = pyptx.bitcast(u32(F32_INF_BITS), f32)
    if pyptx.math.fabs(y) == inf:
        if ax == f32(1.0):
            return f32(1.0)                        # pow(-1, +-inf)
        return inf if (ax > f32(1.0)) == (y > f32(0.0)) else f32(0.0)
    r = f32(0.0)
    if ax == f32(0.0) or ax == inf:
        r = inf if (ax == f32(0.0)) == (y < f32(0.0)) else f32(0.0)
    else:
        if x < f32(0.0) and pyptx.math.rint(y) != y:
            return pyptx.bitcast(u32(F32_NAN_BITS), f32)
        lh, ll = _log2_pair_f32(ax)
        wh, wl = _times_pair(y, lh, ll)
        r = _exp2_pair_f32(wh, wl)
    neg = (pyptx.bitcast(x, u32) >> u32(31)) != u32(0) and _odd_integer_f32(y)
    return -r if neg else r


# ---- f64 ----------------------------------------------------------------------------------------

@pyptx.func
def _log2_pair_f64(ax: f64):
    """log2(ax) as a pair for finite ax > 0 (subnormals too), ~2^-63.5 relative (measured)."""
    e = _log_exponent_f64(ax)
    f = _log_mantissa_f64(ax)
    u = f + f64(2.0)
    rc = _newton_recip(u, _newton_recip(u, _recip_seed(u)))                     # 2^-24
    rc = _newton_recip(u, _newton_recip(u, rc))                                  # 2^-53
    sh, sl = _s_pair(f, rc)
    zh = sh * sh
    q = pyptx.math.fma(f64(R25), zh, f64(R23))
    q = pyptx.math.fma(q, zh, f64(R21))
    q = pyptx.math.fma(q, zh, f64(R19))
    q = pyptx.math.fma(q, zh, f64(R17))
    q = pyptx.math.fma(q, zh, f64(R15))
    q = pyptx.math.fma(q, zh, f64(R13))
    q = pyptx.math.fma(q, zh, f64(R11))
    q = pyptx.math.fma(q, zh, f64(R9))
    q = pyptx.math.fma(q, zh, f64(R7))
    q = pyptx.math.fma(q, zh, f64(R5))
    return _log2_from_s(e, sh, sl, zh, q, f64(C3_HI64), f64(C3_LO64), f64(LOG2E),
                        f64(LOG2E_LO))


@pyptx.func
def _exp2_pair_f64(wh: f64, wl: f64):
    """2^(wh + wl) = 2^k * e^((f + wl) ln 2) through mathlib's f64 exp kernel."""
    xs = min(max(wh, f64(EXP2_LO64)), f64(EXP2_HI64))
    k = pyptx.math.rint(xs)
    fr = xs - k                                    # exact, |fr| <= 1/2
    r = fr * f64(LN2)
    rlo = pyptx.math.fma(fr, f64(LN2_LO), pyptx.math.fma(fr, f64(LN2), -r))
    rlo = pyptx.math.fma(wl if xs == wh else f64(0.0), f64(LN2), rlo)
    return _exp_finish_f64(r, rlo, i32(k))


@pyptx.func
def _odd_integer_f64(y: f64):
    return (pyptx.math.fabs(y) < f64(F64_ODD_MAX) and pyptx.math.rint(y) == y
            and (i64(y) & i64(1)) != i64(0))


@pyptx.func
def pow_f64(x: f64, y: f64):
    """C99 pow, as `pow_f32`."""
    if y == f64(0.0) or x == f64(1.0):
        return f64(1.0)
    if x != x or y != y:
        return x + y
    ax = pyptx.math.fabs(x)
    inf = pyptx.bitcast(u64(F64_INF_BITS), f64)
    if pyptx.math.fabs(y) == inf:
        if ax == f64(1.0):
            return f64(1.0)
        return inf if (ax > f64(1.0)) == (y > f64(0.0)) else f64(0.0)
    r = f64(0.0)
    if ax == f64(0.0) or ax == inf:
        r = inf if (ax == f64(0.0)) == (y < f64(0.0)) else f64(0.0)
    else:
        if x < f64(0.0) and pyptx.math.rint(y) != y:
            return pyptx.bitcast(u64(F64_NAN_BITS), f64)
        lh, ll = _log2_pair_f64(ax)
        wh, wl = _times_pair(y, lh, ll)
        r = _exp2_pair_f64(wh, wl)
    neg = (pyptx.bitcast(x, u64) >> u64(63)) != u64(0) and _odd_integer_f64(y)
    return -r if neg else r


# ---- integers -----------------------------------------------------------------------------------

@pyptx.func
def int_pow(a, b, one, zero, least):
    """a ** b for integers of one type (`one`, `zero`, `least` are that type's 1, 0 and minimum):
    square-and-multiply over b's bits, wrapping like every integer multiply.  A negative b gives
    Numba's answers: 1 ** b = 1, (-1) ** b = +-1, 0 ** b = the type's minimum (Numba's
    zero-division value under the numpy error model), anything else 0."""
    if b < zero:
        if a == one or (a == -one and (b & one) == zero):
            return one
        if a == -one:
            return -one
        return least if a == zero else zero
    r = one
    while b != zero:
        if (b & one) != zero:
            r = r * a
        b = b >> one
        a = a * a
    return r
