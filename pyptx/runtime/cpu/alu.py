"""Vectorised PTX arithmetic semantics (integer, float, compare, convert) on numpy arrays.

Each function takes already-typed operands (numpy arrays or scalars of the instruction type)
and returns the result in the instruction type.  Facts follow the PTX ISA; where the ISA says
"unspecified" we use what the hardware does (documented per function).
"""
from __future__ import annotations

import numpy as np

from . import fpmath

_U = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_S = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def _bits(dt) -> int:
    return np.dtype(dt).itemsize * 8


def as_array(x, dt):
    return np.asarray(x, dtype=dt)


# ---- integer --------------------------------------------------------------------------------

def mul_hi(a, b, dt):
    """High half of the full 2N-bit product."""
    dt = np.dtype(dt)
    n = _bits(dt)
    if n <= 32:
        wide = np.int64 if dt.kind == "i" else np.uint64
        p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        return (p >> n).astype(dt)
    # 64-bit: schoolbook on 32-bit halves, in uint64, then fix up the sign
    ua = np.asarray(a).astype(np.uint64)
    ub = np.asarray(b).astype(np.uint64)
    m = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m, ua >> s32, ub & m, ub >> s32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    hh = ah * bh
    mid = (ll >> s32) + (lh & m) + (hl & m)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if dt.kind == "i":
        hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) \
            - np.where(np.asarray(b) < 0, ua, np.uint64(0))
    return hi.astype(dt)


def mul_wide(a, b, dt):
    """N x N -> 2N bits."""
    dt = np.dtype(dt)
    w = np.dtype(_S[2 * _bits(dt)] if dt.kind == "i" else _U[2 * _bits(dt)])
    return np.asarray(a).astype(w) * np.asarray(b).astype(w)


def div_int(a, b, dt):
    """Truncating division.  By zero: all ones (unsigned 0xFF..F, signed -1), as the GPU's
    division sequence gives; INT_MIN / -1 wraps to INT_MIN."""
    dt = np.dtype(dt)
    a = np.asarray(a, dt)
    b = np.asarray(b, dt)
    zero = b == 0
    bb = np.where(zero, 1, b).astype(dt)
    if dt.kind == "u":
        q = a // bb
        return np.where(zero, np.array(-1).astype(dt), q).astype(dt)
    n = _bits(dt)
    u = _U[n]
    ua = np.where(a < 0, (0 - a.astype(u)), a.astype(u)).astype(u)
    ub = np.where(bb < 0, (0 - bb.astype(u)), bb.astype(u)).astype(u)
    q = (ua // ub)
    neg = (a < 0) != (bb < 0)
    q = np.where(neg, 0 - q, q).astype(u).view(dt) if q.ndim else \
        np.array(np.where(neg, 0 - q, q)).astype(u).view(dt)
    return np.where(zero, dt.type(-1), q).astype(dt)


def rem_int(a, b, dt):
    """C remainder (sign of the dividend).  By zero: the dividend."""
    dt = np.dtype(dt)
    a = np.asarray(a, dt)
    b = np.asarray(b, dt)
    zero = b == 0
    bb = np.where(zero, 1, b).astype(dt)
    if dt.kind == "u":
        return np.where(zero, a, a % bb).astype(dt)
    n = _bits(dt)
    u = _U[n]
    ua = np.where(a < 0, 0 - a.astype(u), a.astype(u)).astype(u)
    ub = np.where(bb < 0, 0 - bb.astype(u), bb.astype(u)).astype(u)
    r = np.asarray(ua % ub)
    r = np.where(a < 0, 0 - r, r).astype(u).view(dt)
    return np.where(zero, a, r).astype(dt)


def shl(a, b, dt):
    """Shift amounts >= width give 0 (clamped)."""
    dt = np.dtype(dt)
    n = _bits(dt)
    b = np.asarray(b).astype(np.uint32)
    sh = np.minimum(b, n - 1).astype(dt)
    return np.where(b >= n, dt.type(0), np.left_shift(np.asarray(a, dt), sh)).astype(dt)


def shr(a, b, dt):
    """Arithmetic for signed types (>= width gives the sign fill), logical otherwise."""
    dt = np.dtype(dt)
    n = _bits(dt)
    b = np.asarray(b).astype(np.uint32)
    a = np.asarray(a, dt)
    sh = np.minimum(b, n - 1).astype(dt)
    r = np.right_shift(a, sh)
    if dt.kind == "i":
        return r.astype(dt)       # shifting by n-1 already gives the sign fill
    return np.where(b >= n, dt.type(0), r).astype(dt)


def popc(a):
    return np.bitwise_count(np.asarray(a)).astype(np.uint32)


def clz(a, dt):
    x = np.asarray(a, dt).copy()
    n = _bits(dt)
    s = 1
    while s < n:
        x |= x >> np.asarray(s, dtype=x.dtype)
        s *= 2
    return (n - np.bitwise_count(x).astype(np.int64)).astype(np.uint32)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def brev(a, dt):
    x = np.ascontiguousarray(np.atleast_1d(np.asarray(a, dt)))
    by = x.view(np.uint8).reshape(x.size, -1)[:, ::-1]
    return _REV8[by].copy().view(dt).reshape(x.shape)


def bfe(a, pos, ln, dt):
    dt = np.dtype(dt)
    n = _bits(dt)
    a = np.asarray(a, dt)
    u = a.astype(_U[n]).astype(np.uint64)
    pos = np.asarray(pos).astype(np.int64) & 0xFF
    ln = np.asarray(ln).astype(np.int64) & 0xFF
    i = np.arange(n, dtype=np.int64)
    # bit i of the result, computed on a [lanes, n] grid (bfe is rare)
    src = pos[..., None] + i
    inside = (i < ln[..., None]) & (src <= n - 1)
    bits = (u[..., None] >> np.minimum(src, n - 1).astype(np.uint64)) & np.uint64(1)
    if dt.kind == "i":
        top = np.minimum(pos + ln - 1, n - 1)
        sbit = np.where(ln == 0, np.uint64(0), (u >> np.maximum(top, 0).astype(np.uint64))
                        & np.uint64(1))
    else:
        sbit = np.zeros_like(u)
    b = np.where(inside, bits, sbit[..., None])
    r = (b << i.astype(np.uint64)).sum(axis=-1, dtype=np.uint64)
    return r.astype(_U[n]).view(dt) if r.ndim else np.array(r).astype(_U[n]).view(dt)[()]


def dp4a(a, b, c, a_signed, b_signed):
    ab = np.atleast_1d(np.asarray(a)).astype(np.uint32).view(np.uint8).reshape(-1, 4)
    bb = np.atleast_1d(np.asarray(b)).astype(np.uint32).view(np.uint8).reshape(-1, 4)
    av = ab.view(np.int8).astype(np.int64) if a_signed else ab.astype(np.int64)
    bv = bb.view(np.int8).astype(np.int64) if b_signed else bb.astype(np.int64)
    s = (av * bv).sum(axis=1) + np.asarray(c).astype(np.int64)
    return s.astype(np.uint32)


# ---- compare -------------------------------------------------------------------------------

def setp(cmp: str, a, b):
    with np.errstate(invalid="ignore"):
        if cmp in ("eq",):
            return a == b
        if cmp == "ne":
            r = a != b
            if np.asarray(a).dtype.kind == "f":
                r = r & ~np.isnan(a) & ~np.isnan(b)
            return r
        if cmp in ("lt", "lo"):
            return a < b
        if cmp in ("le", "ls"):
            return a <= b
        if cmp in ("gt", "hi"):
            return a > b
        if cmp in ("ge", "hs"):
            return a >= b
        unordered = np.isnan(a) | np.isnan(b)
        if cmp == "num":
            return ~unordered
        if cmp == "nan":
            return unordered
        base = {"equ": "eq", "neu": "ne", "ltu": "lt", "leu": "le", "gtu": "gt", "geu": "ge"}
        if cmp in base:
            op = base[cmp]
            r = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                 "gt": np.greater, "ge": np.greater_equal}[op](a, b)
            return r | unordered
    raise KeyError(cmp)


def testp(kind: str, a):
    a = np.asarray(a)
    tiny = np.finfo(a.dtype).tiny
    fin = np.isfinite(a)
    return {"nan": np.isnan, "notanumber": np.isnan,
            "number": lambda x: ~np.isnan(x), "finite": np.isfinite, "infinite": np.isinf,
            "normal": lambda x: fin & (np.abs(x) >= tiny),
            "subnormal": lambda x: fin & (x != 0) & (np.abs(x) < tiny)}[kind](a)


# ---- convert -------------------------------------------------------------------------------

_ROUND_INT = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def cvt(x, src: np.dtype, dst: np.dtype, rnd: str | None, sat: bool, ftz: bool):
    """cvt.{rnd}{.sat}{.ftz}.dst.src with PTX semantics."""
    src, dst = np.dtype(src), np.dtype(dst)
    x = np.asarray(x, src)
    with np.errstate(all="ignore"):
        if ftz and src == np.float32:
            x = fpmath.ftz(x)
        if src.kind == "f" and dst.kind in "iu":
            f = np.asarray(x, np.float64)
            f = _ROUND_INT.get(rnd or "rzi", np.trunc)(f)
            info = np.iinfo(dst)
            nan = np.isnan(f)
            lo, hi = float(info.min), float(info.max)
            big = f >= 2.0 ** (_bits(dst) - (1 if dst.kind == "i" else 0))
            small = f < lo
            safe = np.where(nan | big | small, 0.0, f)
            r = safe.astype(dst)
            r = np.where(big, dst.type(info.max), r)
            r = np.where(small, dst.type(info.min), r)
            return np.where(nan, dst.type(0), r).astype(dst)
        if src.kind in "iu" and dst.kind in "iu":
            if sat:
                si, di = np.iinfo(src), np.iinfo(dst)
                lo, hi = max(si.min, di.min), min(si.max, di.max)
                x = np.clip(x, src.type(lo), src.type(hi))
            return x.astype(dst)
        if src.kind in "iu" and dst.kind == "f":
            y = x.astype(dst)
            if rnd in (None, "rn"):
                return y
            return _directed_int_to_float(x, y, rnd)
        # float -> float
        if rnd in ("rni", "rzi", "rmi", "rpi"):
            y = _ROUND_INT[rnd](x).astype(dst)
        else:
            y = x.astype(dst)
            if dst.itemsize < src.itemsize and rnd not in (None, "rn"):
                y = fpmath.directed(x, y, rnd)
        if sat:
            y = np.where(np.isnan(y), dst.type(0), np.clip(y, dst.type(0), dst.type(1)))
        if ftz and dst == np.float32:
            y = fpmath.ftz(np.asarray(y))
        return np.asarray(y, dst)


def _directed_int_to_float(x, y, rnd):
    """Directed rounding of integer -> float: compare y with x exactly as integers."""
    yw = y.astype(np.float64)
    n = x.dtype.itemsize * 8
    lim = 2.0 ** (n - 1) if x.dtype.kind == "i" else 2.0 ** n
    over = yw >= lim                  # y rounded up past the integer range: y > x
    yi = np.where(over, 0, yw).astype(x.dtype)
    gt = over | ((yi > x) & ~over)
    lt = (yi < x) & ~over
    inf = np.full(y.shape, np.inf, y.dtype)
    if rnd == "rm":
        down, up = gt, np.zeros_like(gt)
    elif rnd == "rp":
        down, up = np.zeros_like(gt), lt
    else:
        down, up = gt & (x > 0), lt & (x < 0)
    r = np.where(down, np.nextafter(y, -inf), y)
    return np.where(up, np.nextafter(y, inf), r).astype(y.dtype)


def bfind(a, dt, shiftamt: bool):
    """PTX bfind: position of the most significant non-sign bit (0xFFFFFFFF if none);
    .shiftamt gives (bits - 1 - position) instead."""
    dt = np.dtype(dt)
    n = _bits(dt)
    x = np.asarray(a, dt)
    if dt.kind == "i":
        x = np.where(x < 0, ~x, x)
    u = x.astype(np.dtype(f"u{dt.itemsize}"))
    pos = (n - 1) - clz(u, u.dtype).astype(np.int64)
    none = u == 0
    if shiftamt:
        pos = (n - 1) - pos
    return np.where(none, np.uint32(0xFFFFFFFF), pos.astype(np.uint32)).astype(np.uint32)
