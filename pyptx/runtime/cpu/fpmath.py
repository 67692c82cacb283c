"""Bit-exact floating point that numpy does not give directly: correctly rounded fma for
f16/f32/f64, directed rounding of conversions, ftz flushing, PTX min/max.

Why not `a*b+c` in float64: for f32 the product is exact in f64 but the sum is rounded twice
(f64, then f32), which is wrong when the f64 sum lands exactly on an f32 midpoint.  We detect
exactly those lanes with an error-free transformation (TwoSum) and nudge them.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def two_sum(a, b):
    """s + e == a + b exactly (Knuth), s = fl(a + b)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def two_prod(a, b):
    """p + e == a * b exactly (Dekker), valid without over/underflow."""
    p = a * b
    ca = _SPLIT * a
    ah = ca - (ca - a)
    al = a - ah
    cb = _SPLIT * b
    bh = cb - (cb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def round_pair(s: np.ndarray, e: np.ndarray, dtype) -> np.ndarray:
    """Round the exact value s + e (float64 pair, |e| <= ulp(s)/2) to `dtype` (f16/f32), once."""
    r = s.astype(dtype)
    fix = (e != 0) & np.isfinite(r)
    if fix.any():
        idx = np.flatnonzero(fix)
        rs = r[idx]
        sd = s[idx]
        toward = np.where(sd > rs.astype(np.float64), np.inf, -np.inf).astype(dtype)
        nb = np.nextafter(rs, toward)
        mid = (rs.astype(np.float64) + nb.astype(np.float64)) * 0.5
        tie = (mid == sd) & (rs.astype(np.float64) != sd)
        # s is exactly halfway: the sign of e decides which neighbour is nearer
        go_nb = tie & ((e[idx] > 0) == (nb.astype(np.float64) > rs.astype(np.float64)))
        rs = np.where(go_nb, nb, rs)
        r[idx] = rs
    return r


def fma_small(a, b, c, dtype):
    """Correctly rounded fma for f16/f32 (product exact in f64)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                  np.asarray(c, np.float64))
    with np.errstate(all="ignore"):
        p = a * b
        s, e = two_sum(p, c)
        e = np.where(np.isfinite(s), e, 0.0)
        return round_pair(np.atleast_1d(s), np.atleast_1d(e), dtype).reshape(np.shape(s))


def _round_odd_sum(x, y):
    s, e = two_sum(x, y)
    bits = s.view(np.uint64)
    odd = (bits & 1) == 1
    adj = (e != 0) & ~odd
    toward = np.where(e > 0, np.inf, -np.inf)
    return np.where(adj, np.nextafter(s, toward), s)


def fma_f64(a, b, c):
    """Correctly rounded f64 fma: Boldo-Melquiond emulation with round-to-odd; lanes where the
    error-free transforms could over/underflow fall back to exact rationals."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                  np.asarray(c, np.float64))
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    c = np.ascontiguousarray(c)
    with np.errstate(all="ignore"):
        uh, ul = two_prod(a, b)
        th, tl = two_sum(c, ul)
        vh, vl = two_sum(uh, th)
        out = vh + _round_odd_sum(tl, vl)
        aa, ab, ac, ap = np.abs(a), np.abs(b), np.abs(c), np.abs(uh)
        lim_hi, lim_lo = 2.0 ** 995, 2.0 ** -960
        slow = ~(np.isfinite(out) & (aa < lim_hi) & (ab < lim_hi) & (ac < lim_hi)
                 & ((ap > lim_lo) | (a == 0) | (b == 0)) & ((ac > lim_lo) | (c == 0))
                 & ((np.abs(out) > lim_lo) | (out == 0)))
        zero_prod = (a == 0) | (b == 0)
        if zero_prod.any():          # exact: (+-0) + c, with IEEE signed-zero rules
            out = np.where(zero_prod & np.isfinite(c) & np.isfinite(a) & np.isfinite(b),
                           a * b + c, out)
            slow &= ~(zero_prod & np.isfinite(c) & np.isfinite(a) & np.isfinite(b))
    if slow.any():
        for i in np.flatnonzero(slow):
            out.flat[i] = _fma_exact(float(a.flat[i]), float(b.flat[i]), float(c.flat[i]))
    return out


def _fma_exact(a: float, b: float, c: float) -> float:
    import math
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        if a == 0 or b == 0:
            return (a * b) + c          # signed-zero rules of IEEE addition
        return 0.0
    try:
        r = float(exact)                # Fraction -> float is correctly rounded
    except OverflowError:
        return math.inf if exact > 0 else -math.inf     # (float(exact) itself overflows)
    if r == 0:
        return math.copysign(0.0, exact)
    return r


def ftz(x: np.ndarray) -> np.ndarray:
    """Flush f32 subnormals to sign-preserving zero (PTX .ftz)."""
    if x.dtype != np.float32:
        return x
    tiny = np.abs(x) < np.float32(1.1754944e-38)
    if not tiny.any():
        return x
    return np.where(tiny, np.copysign(np.float32(0), x), x)


def fminmax(a, b, is_max: bool):
    """PTX min/max.f*: NaN only if both are NaN; -0 < +0."""
    r = np.fmax(a, b) if is_max else np.fmin(a, b)
    both_zero = (a == 0) & (b == 0)
    if np.any(both_zero):
        sa, sb = np.signbit(a), np.signbit(b)
        neg = (sa & sb) if is_max else (sa | sb)
        r = np.where(both_zero, np.where(neg, -np.zeros_like(r), np.zeros_like(r)), r)
    return r


def directed(x_exact: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """Given y = RN(x) in a narrower float type and x exactly (in a wider type), return the
    result of rounding x with `mode` in ('rn', 'rz', 'rm', 'rp')."""
    if mode == "rn":
        return y
    yw = y.astype(x_exact.dtype)
    up = np.full(y.shape, np.inf, y.dtype)
    with np.errstate(all="ignore"):
        too_big = yw > x_exact
        too_small = yw < x_exact
        if mode == "rm":
            down = too_big
            upw = np.zeros_like(too_big)
        elif mode == "rp":
            down = np.zeros_like(too_big)
            upw = too_small
        else:  # rz
            down = too_big & (x_exact > 0)
            upw = too_small & (x_exact < 0)
        r = np.where(down, np.nextafter(y, -up), y)
        r = np.where(upw, np.nextafter(y, up), r)
    return r.astype(y.dtype)
