"""Bit-exact compile-time arithmetic: the fold functions of the op records.

Why here (in the IR, not in the constant-folding pass): a record's `fold` is part of what the op
means, next to its type rule, and the passes (constfold, unroll's trip counts) only call it
through `passes/evaluate.py`.  Constant folding must give exactly what the GPU would compute:
ints as Python ints wrapped to their width, floats through numpy scalars of the op's own dtype
(IEEE .rn), and an exact rational rounding for the cases numpy cannot do in one rounding (fma,
int -> float).  A fold returns None when the op must not be folded: int div/rem by zero or
MIN / -1 (unspecified), a float result that is NaN (PTX returns a canonical NaN whose payload
numpy does not reproduce), min/max of two zeros of opposite sign.
"""
from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from ...types import PtrType, ScalarType

#: (mantissa bits incl. the implicit one, min normal exponent, max exponent) per float width
_FORMATS = {16: (11, -14, 15), 32: (24, -126, 127), 64: (53, -1022, 1023)}


def wrap(v: int, t: ScalarType) -> int:
    """Python int -> the value an int of type t holds (two's complement wrap)."""
    bits = t.bits
    v &= (1 << bits) - 1
    if t.is_signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def round_to_float(q: Fraction, t: ScalarType) -> float:
    """Correctly round (nearest even) the exact rational q to float type t."""
    if q == 0:
        return 0.0
    p, emin, emax = _FORMATS[t.bits]
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - p + 1)
    m = q / quantum
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(value)


def _f(t: ScalarType, v):
    return t.dtype.type(v)


def _float_result(x, t: ScalarType):
    x = float(_f(t, x))
    return None if math.isnan(x) else x


def _fma(a, b, c, t):
    a, b, c = float(a), float(b), float(c)
    if not all(map(math.isfinite, (a, b, c))):
        with np.errstate(all="ignore"):
            return _float_result(np.float64(a) * np.float64(b) + np.float64(c), t)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        prod_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
        if a * b == 0 and c == 0 and prod_neg and math.copysign(1, c) < 0:
            return -0.0
        return 0.0
    return round_to_float(exact, t)


def _cvt(v, src, dst):
    if dst.is_bool:
        return bool(v != 0)
    if src.is_bool:
        v = int(bool(v))
        return float(v) if dst.is_float else v
    if dst.is_int:
        if src.is_int:
            return wrap(int(v), dst)
        x = float(v)
        if math.isnan(x):
            return 0
        info = np.iinfo(dst.dtype)
        if math.isinf(x):
            return info.max if x > 0 else info.min
        return max(info.min, min(info.max, int(x)))      # int() truncates toward zero
    # float destination
    x = Fraction(int(v)) if src.is_int else float(v)
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x) or x == 0:
            return x                              # keeps the sign of -0.0
        x = Fraction(x)
    return round_to_float(x, dst)


def _bitcast(v, src, dst):
    if isinstance(src, PtrType) or isinstance(dst, PtrType):
        return None
    if src.is_bool or dst.is_bool:
        return bool(v) if src.is_bool and dst.is_bool else None
    arr = np.array(v, dtype=src.dtype).view(dst.dtype)
    out = arr[()]
    if dst.is_float:
        return None if np.isnan(out) else float(out)
    return int(out)


_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
        "gt": operator.gt, "ge": operator.ge}
_PY_NUMBERS = frozenset({int, float, bool})


def _cmp(pred, a, b):
    if a.__class__ in _PY_NUMBERS and b.__class__ in _PY_NUMBERS:
        return bool(_CMP[pred](a, b))         # plain Python numbers: no numpy error state
    with np.errstate(all="ignore"):
        return bool({"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b,
                     "gt": a > b, "ge": a >= b}[pred])


def _dp4a(a, b, c, ta, tb, t):
    def byts(x, signed):
        u = x & 0xFFFFFFFF
        out = [(u >> (8 * k)) & 0xFF for k in range(4)]
        return [x - 256 if signed and x > 127 else x for x in out]
    s = sum(x * y for x, y in zip(byts(a, ta.is_signed), byts(b, tb.is_signed)))
    return wrap(c + s, t)


def _int_op(op, t, a, b=None):
    bits = t.bits
    if op == "add":
        return wrap(a + b, t)
    if op == "sub":
        return wrap(a - b, t)
    if op == "mul":
        return wrap(a * b, t)
    if op in ("div", "rem"):
        if b == 0 or (t.is_signed and a == -(1 << (bits - 1)) and b == -1):
            return None
        q = abs(a) // abs(b)
        q = q if (a < 0) == (b < 0) else -q
        return wrap(q, t) if op == "div" else wrap(a - q * b, t)
    if op in ("floordiv", "floormod"):
        if b == 0:
            return 0
        return wrap(a // b, t) if op == "floordiv" else wrap(a % b, t)
    if op == "neg":
        return wrap(-a, t)
    if op == "abs":
        return wrap(abs(a), t)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if op == "mulhi":
        return wrap((a * b) >> bits, t)
    if op == "and":
        return wrap(a & b, t)
    if op == "or":
        return wrap(a | b, t)
    if op == "xor":
        return wrap(a ^ b, t)
    if op == "not":
        return wrap(~a, t)
    if op == "shl":
        n = b & 0xFFFFFFFF
        return 0 if n >= bits else wrap(a << n, t)
    if op == "shr":
        n = b & 0xFFFFFFFF
        if n >= bits:
            return -1 if a < 0 else 0
        return a >> n          # Python >> is arithmetic; unsigned values are non-negative
    if op == "brev":
        u = a & ((1 << bits) - 1)
        return wrap(int(format(u, f"0{bits}b")[::-1], 2), t)
    return None


_FLOAT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
_FLOAT_UN = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
             "rint": np.rint, "abs": np.abs, "neg": np.negative}


def _float_op(op, t, vals):
    with np.errstate(all="ignore"):
        if op in _FLOAT_BIN:
            return _float_result(_FLOAT_BIN[op](_f(t, vals[0]), _f(t, vals[1])), t)
        if op in _FLOAT_UN:
            return _float_result(_FLOAT_UN[op](_f(t, vals[0])), t)
        if op == "rcp":
            return _float_result(np.divide(_f(t, 1.0), _f(t, vals[0])), t)
        if op == "fma":
            return _fma(*vals, t)
        if op in ("min", "max"):
            a, b = float(vals[0]), float(vals[1])
            if math.isnan(a) or math.isnan(b):
                return None if math.isnan(a) and math.isnan(b) else (b if math.isnan(a) else a)
            if a == b == 0 and math.copysign(1, a) != math.copysign(1, b):
                return None
            return min(a, b) if op == "min" else max(a, b)
    return None



_BOOL_LOGIC = {"and": lambda a, b: a and b, "or": lambda a, b: a or b,
               "xor": lambda a, b: a != b, "not": lambda a, b: not a}


def typed(op: str):
    """The fold of an op with int, bool (logic only) and float forms, chosen by result type."""
    logic = _BOOL_LOGIC.get(op)

    def fold(t, attrs, vals, types):
        if t.is_int:
            return _int_op(op, t, *[int(v) for v in vals])
        if t.is_bool:
            if logic is None:
                return None
            return logic(bool(vals[0]), bool(vals[1]) if len(vals) > 1 else None)
        if t.is_float:
            return _float_op(op, t, vals)
        return None
    return fold


def fold_cmp(t, attrs, vals, types):
    a, b = vals
    if types[0].is_float:
        a, b = float(a), float(b)
    return _cmp(attrs.get("pred"), a, b)


def fold_select(t, attrs, vals, types):
    return vals[1] if vals[0] else vals[2]


def fold_isnan(t, attrs, vals, types):
    return math.isnan(float(vals[0]))


def fold_cvt(t, attrs, vals, types):
    return _cvt(vals[0], types[0], t)


def fold_bitcast(t, attrs, vals, types):
    return _bitcast(vals[0], types[0], t)


def fold_bitcount(op: str):
    """popc / clz of a 32/64-bit int (result i32)."""
    def fold(t, attrs, vals, types):
        bits = types[0].bits
        u = int(vals[0]) & ((1 << bits) - 1)
        return bin(u).count("1") if op == "popc" else bits - u.bit_length()
    return fold


def fold_mulwide(t, attrs, vals, types):
    return wrap(int(vals[0]) * int(vals[1]), t)


def fold_dp4a(t, attrs, vals, types):
    return _dp4a(int(vals[0]), int(vals[1]), int(vals[2]), types[0], types[1], t)
