"""Scalar arithmetic with NumPy-2 semantics: promotion, conversion, Python `//` and `%`.

Every function takes the lowering context `cx` (for `cx.b`, the IRBuilder, and `cx.err`) and
values as described in `values.py`.  Two Python constants fold at compile time with Python's
own semantics (they are Python numbers after all); anything else emits IR.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import types as T
from ..ir.core import BlockArg, Const, Instr, Param
from .values import PY_SCALARS, is_const, make_const, sample_literal, weak_join
from .describe import describe  # noqa: F401 - re-exported: arith.describe(v)

_PY_BINOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "lshift": operator.lshift, "rshift": operator.rshift, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor,
}
_PY_CMPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
            "gt": operator.gt, "ge": operator.ge}
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&", "or": "|", "xor": "^",
          "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def emit(cx, op, operands, t, weak=False, **attrs):
    ins = cx.b.emit(op, operands, t, **attrs)
    if weak:
        cx.b.weak.add(ins)
    return ins


#: the IR value classes (a value of one of these with a ScalarType is a scalar)
_IR_VALUES = frozenset({Instr, BlockArg, Const, Param})


def type_of(cx, v) -> tuple[T.ScalarType, bool]:
    """(type, weak) of a scalar value; CompileError for anything that is not a scalar."""
    if v.__class__ in _IR_VALUES and v.type.__class__ is T.ScalarType:
        return v.type, v in cx.b.weak           # the common case of the checks below
    if isinstance(v, PY_SCALARS):
        try:
            return T.literal_type(v), True
        except OverflowError:
            raise cx.err(f"the integer {v} does not fit in 64 bits; use a value between "
                         f"-2**63 and 2**64 - 1") from None
    t = getattr(v, "type", None)
    if isinstance(t, T.ScalarType) and not isinstance(v, type):
        return t, v in cx.b.weak
    from .describe import needs_number
    raise cx.err(f"expected a number here, got {needs_number(v)}")


def convert(cx, v, t: T.ScalarType):
    """`v` as an IR value of type `t` (cvt semantics: wrap, truncate toward zero, saturate)."""
    if isinstance(v, PY_SCALARS):
        return make_const(v, t)
    if v.__class__ in _IR_VALUES and v.type is t:
        return v                                # type_of(v) is t: already that type
    src = type_of(cx, v)[0]
    if src == t:
        return v
    if isinstance(v, Const):
        return make_const(v.value, t)
    return emit(cx, "cvt", [v], t)


def convert_literal(cx, v, t: T.ScalarType):
    """Like `convert`, but a Python literal that does not fit `t` is an error (numpy raises)."""
    if isinstance(v, int) and not isinstance(v, bool) and t.is_int:
        info = np.iinfo(t.dtype)
        if not info.min <= v <= info.max:
            raise cx.err(f"the integer {v} does not fit in {t.name}; convert explicitly, e.g. "
                         f"{t.name}({v}) wraps it")
    return convert(cx, v, t)


def truth(cx, v):
    """Python truthiness as a bool_ value (or a Python bool when known at compile time)."""
    if isinstance(v, PY_SCALARS):
        return bool(v)
    t = type_of(cx, v)[0]
    if t.is_bool:
        return v
    return emit(cx, "cmp", [v, make_const(0, t)], T.bool_, pred="ne")


def promote2(cx, a, b, what: str) -> tuple[T.ScalarType, bool]:
    ta, wa = type_of(cx, a)
    tb, wb = type_of(cx, b)
    if not wa and not wb:
        return T.promote(ta, tb), False
    if wa and wb:
        return weak_join(ta, tb), True
    strong, lit = (ta, b) if wb else (tb, a)
    if not isinstance(lit, PY_SCALARS):
        lit = sample_literal(type_of(cx, lit)[0])
    try:
        return T.promote_weak(strong, lit), False
    except OverflowError:
        raise cx.err(f"the integer {lit} does not fit in {strong.name} (in '{what}'); convert "
                     f"the other operand to a wider type first, e.g. i64(x)") from None


def promote_many(cx, values, what: str) -> tuple[T.ScalarType, bool]:
    t, w = type_of(cx, values[0])
    acc = values[0]
    for v in values[1:]:
        t, w = promote2(cx, acc, v, what)
        acc = _typed_probe(t, w)
    return t, w


class _Probe:
    """A stand-in value of a given type for chained promotion."""
    __slots__ = ("type",)

    def __init__(self, t):
        self.type = t


def _typed_probe(t, weak):
    if weak:
        return sample_literal(t) if not t.is_float else 0.0
    return _Probe(t)


# ---- binary arithmetic ---------------------------------------------------------------------------

def binop(cx, op: str, a, b):
    if isinstance(a, (tuple, complex)) or isinstance(b, (tuple, complex)):
        from . import complex64
        if complex64.is_complex(a) or complex64.is_complex(b):
            return complex64.binop(cx, op, a, b)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return _tuple_op(cx, op, a, b)
    if isinstance(a, PY_SCALARS) and isinstance(b, PY_SCALARS):
        return _fold(cx, op, a, b)
    if op == "pow":
        return _power(cx, a, b)
    t, weak = promote2(cx, a, b, SYMBOL[op])
    if op == "truediv" and not t.is_float:
        if t.is_bool:
            raise cx.err("'/' on booleans is not supported; convert to a number first, "
                         "e.g. f32(x)")
        t = T.f32
    if t.is_bool:
        return _bool_binop(cx, op, a, b)
    x, y = convert(cx, a, t), convert(cx, b, t)
    if op in ("add", "sub", "mul", "truediv"):
        if op == "truediv" and cx.fastmath:
            from .fastmath import div_attrs
            return emit(cx, "div", [x, y], t, weak, **div_attrs(cx, t))
        return emit(cx, {"truediv": "div"}.get(op, op), [x, y], t, weak)
    if op in ("and", "or", "xor", "lshift", "rshift"):
        if t.is_float:
            raise cx.err(f"'{SYMBOL[op]}' needs integers, got {t.name}; convert with i32(x) or "
                         f"reinterpret with pyptx.bitcast(x, u32)")
        if op in ("lshift", "rshift"):
            y = convert(cx, y, T.u32)
            return emit(cx, "shl" if op == "lshift" else "shr", [x, y], t, weak)
        return emit(cx, op, [x, y], t, weak)
    if op == "floordiv":
        return _float_floordiv(cx, x, y, t, weak) if t.is_float else _int_floordiv(cx, x, y, t, weak)
    if op == "mod":
        return _float_mod(cx, x, y, t, weak) if t.is_float else _int_mod(cx, x, y, t, weak)
    raise cx.err(f"the operator '{SYMBOL.get(op, op)}' is not supported in kernels; use "
                 f"+ - * / // % ** << >> & | ^")


def _tuple_op(cx, op, a, b):
    """Tuples are compile-time containers: `t + u` concatenates, `t * n` (n a compile-time int)
    repeats, as in Python."""
    if op == "add" and isinstance(a, tuple) and isinstance(b, tuple):
        return a + b
    if op == "mul":
        t, n = (a, b) if isinstance(a, tuple) else (b, a)
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return t * n
    raise cx.err(f"tuples support only '+' (concatenation) and '*' by a compile-time int, not "
                 f"'{SYMBOL[op]}' with {describe(b if isinstance(a, tuple) else a)}; write e.g. "
                 f"(a, b) + (c,) or (0.0,) * 4, or index the tuple first: t[0] * x")


def _fold(cx, op, a, b):
    try:
        r = _PY_BINOPS[op](a, b)
    except ZeroDivisionError:
        raise cx.err(f"division by zero in the compile-time expression '{a!r} {SYMBOL[op]} "
                     f"{b!r}'; use a non-zero divisor") from None
    except (OverflowError, ValueError, TypeError):
        raise cx.err(f"'{a!r} {SYMBOL[op]} {b!r}' cannot be computed at compile time (the result "
                     f"is out of range); use smaller values or compute it with f64(...)") from None
    if isinstance(r, complex):
        raise cx.err(f"'{a!r} ** {b!r}' is a complex number; kernels compute with real numbers: "
                     f"use a non-negative base")
    if isinstance(r, int) and not -2**63 <= r < 2**64:
        raise cx.err(f"the compile-time value '{a!r} {SYMBOL[op]} {b!r}' does not fit in 64 bits; "
                     f"use smaller values or compute it in floating point, e.g. f64({a!r})")
    return r


def _bool_binop(cx, op, a, b):
    """numpy on two bools: + is or, * is and, & | ^ logical; the rest is an error."""
    kind = {"add": "or", "mul": "and", "and": "and", "or": "or", "xor": "xor"}.get(op)
    if kind is None:
        raise cx.err(f"'{SYMBOL[op]}' on booleans is not supported; convert to a number first, "
                     f"e.g. i32(flag)")
    return emit(cx, kind, [convert(cx, a, T.bool_), convert(cx, b, T.bool_)], T.bool_)


def _power(cx, a, b):
    """`x ** n` for a literal n in 0..64: multiplied out (exact for ints, cheap for floats);
    any other exponent: frontend/power.py."""
    if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 64:
        from .power import runtime_power
        return runtime_power(cx, a, b)
    t, weak = type_of(cx, a)
    if t.is_bool:
        raise cx.err("'**' on a boolean is not supported; convert it first, e.g. i32(flag)")
    if b == 0:
        return 1 if weak and not t.is_float else (1.0 if weak else make_const(1, t))
    result, base, n = None, a, b
    while n:                               # square-and-multiply, exact for ints
        if n & 1:
            result = base if result is None else emit(cx, "mul", [result, base], t, weak)
        n >>= 1
        if n:
            base = emit(cx, "mul", [base, base], t, weak)
    return result


def _cmp(cx, pred, x, y):
    return emit(cx, "cmp", [x, y], T.bool_, pred=pred)


def _sel(cx, c, x, y, t, weak=False):
    return emit(cx, "select", [c, x, y], t, weak)


def _int_floordiv(cx, a, b, t, weak):
    """Python `a // b` (floor); x // 0 = 0 and MIN // -1 = MIN, as numpy gives.  One `floordiv`
    op: passes/strength.py expands it (a shift for a power of two)."""
    return emit(cx, "floordiv", [a, b], t, weak)


def _int_mod(cx, a, b, t, weak):
    """Python `a % b` (sign of b); x % 0 = 0, as numpy gives.  One `floormod` op (see above)."""
    return emit(cx, "floormod", [a, b], t, weak)


def _in_f32(cx, t, x, y):
    if t in (T.f16, T.bf16):
        return T.f32, convert(cx, x, T.f32), convert(cx, y, T.f32)
    return t, x, y


def _fmod(cx, x, y, ct):
    """C fmod(x, y), exact (mathlib.fmod_f32 / fmod_f64 inlined through the template cache)."""
    from .. import mathlib
    from .calls import inline
    return inline(cx, getattr(mathlib, f"fmod_{ct.name}"), [x, y], {})


def _bits(cx, ct):
    ut = T.u32 if ct == T.f32 else T.u64
    return ut, make_const(1 << (ct.bits - 1), ut)


def _quotient_sign(cx, x, y, ct):
    """The sign bit of x / y (sign(x) xor sign(y)) as an unsigned integer, without dividing."""
    ut, mask = _bits(cx, ct)
    both = emit(cx, "xor", [emit(cx, "bitcast", [x], ut), emit(cx, "bitcast", [y], ut)], ut)
    return emit(cx, "and", [both, mask], ut)


def _zero_signed_as(cx, v, ct):
    """copysign(0.0, v): v's sign bit alone."""
    ut, mask = _bits(cx, ct)
    return emit(cx, "bitcast", [emit(cx, "and", [emit(cx, "bitcast", [v], ut), mask], ut)], ct)


_INF_BITS = {32: 0x7F800000, 64: 0x7FF0000000000000}


def _float_divmod(cx, a, b, t, want_div):
    """numpy's npy_divmod (f16 through f32, as numpy does), bit for bit:

        mod = fmod(a, b)                                  # exact
        if b == 0: return a / b, mod
        div = (a - mod) / b
        if mod != 0: if (b < 0) != (mod < 0): mod += b; div -= 1
        else: mod = copysign(0, b)
        floordiv = floor(div) (+1 if div - floor(div) > 0.5) if div != 0 else copysign(0, a / b)

    `a / b` itself is never computed: its sign is sign(a) xor sign(b), and for b == 0 it is NaN
    (a = 0 or NaN) or an infinity, so `//` costs one division.  Branch-free: every candidate is
    computed and the right one selected (NaN flows through: a NaN `mod` is neither == 0 nor < 0,
    and NaN + b stays NaN)."""
    ct, x, y = _in_f32(cx, t, a, b)
    zero = make_const(0.0, ct)
    mod = _fmod(cx, x, y, ct)
    mod_zero = _cmp(cx, "eq", mod, zero)
    fix = emit(cx, "and", [emit(cx, "not", [mod_zero], T.bool_),
                           emit(cx, "xor", [_cmp(cx, "lt", y, zero), _cmp(cx, "lt", mod, zero)],
                                T.bool_)], T.bool_)
    if not want_div:
        r = _sel(cx, fix, emit(cx, "add", [mod, y], ct), mod, ct)
        return ct, _sel(cx, mod_zero, _zero_signed_as(cx, y, ct), r, ct)
    ut = T.u32 if ct == T.f32 else T.u64
    qsign = _quotient_sign(cx, x, y, ct)        # the sign bit of a / b
    div = emit(cx, "div", [emit(cx, "sub", [x, mod], ct), y], ct)
    div = _sel(cx, fix, emit(cx, "sub", [div, make_const(1.0, ct)], ct), div, ct)
    fl = emit(cx, "floor", [div], ct)
    up = _cmp(cx, "gt", emit(cx, "sub", [div, fl], ct), make_const(0.5, ct))
    fl = _sel(cx, up, emit(cx, "add", [fl, make_const(1.0, ct)], ct), fl, ct)
    fl = _sel(cx, _cmp(cx, "eq", div, zero), emit(cx, "bitcast", [qsign], ct), fl, ct)
    # b == 0: a / b, i.e. NaN for a = 0 or NaN, else an infinity of the quotient's sign
    inf = emit(cx, "bitcast", [emit(cx, "or", [qsign, make_const(_INF_BITS[ct.bits], ut)], ut)],
               ct)
    nan_q = emit(cx, "or", [_cmp(cx, "eq", x, zero), emit(cx, "isnan", [x], T.bool_)], T.bool_)
    q = _sel(cx, nan_q, make_const(float("nan"), ct), inf, ct)
    return ct, _sel(cx, _cmp(cx, "eq", y, zero), q, fl, ct)


def _float_floordiv(cx, a, b, t, weak):
    ct, q = _float_divmod(cx, a, b, t, True)
    return convert(cx, q, t) if ct != t else _mark(cx, q, weak)


def _float_mod(cx, a, b, t, weak):
    ct, r = _float_divmod(cx, a, b, t, False)
    return convert(cx, r, t) if ct != t else _mark(cx, r, weak)


def _mark(cx, v, weak):
    if weak:
        cx.b.weak.add(v)
    return v


# ---- unary ------------------------------------------------------------------------------------

def unary(cx, op: str, v):
    if isinstance(v, (tuple, complex)):
        from . import complex64
        if complex64.is_complex(v):
            return complex64.unary(cx, op, v)
    if isinstance(v, PY_SCALARS):
        if op == "not":
            return not v
        if op == "invert" and isinstance(v, float):
            raise cx.err("'~' needs an integer, got a float; write an int or convert with "
                         "i32(x)")
        return {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}[op](v)
    t, weak = type_of(cx, v)
    if op == "not":
        return emit(cx, "not", [truth(cx, v)], T.bool_)
    if op == "pos":
        return v
    if op == "neg":
        if t.is_bool:
            raise cx.err("unary '-' on a boolean is not supported; use 'not x' or -i32(x)")
        return emit(cx, "neg", [v], t, weak)
    if t.is_float:
        raise cx.err(f"'~' needs an integer or bool, got {t.name}; convert with i32(x) or "
                     f"reinterpret with pyptx.bitcast(x, u32)")
    return emit(cx, "not", [v], t, weak)


# ---- comparisons -------------------------------------------------------------------------------

def compare(cx, pred: str, a, b):
    if isinstance(a, (tuple, complex)) or isinstance(b, (tuple, complex)):
        from . import complex64
        if complex64.is_complex(a) or complex64.is_complex(b):
            return complex64.compare(cx, pred, a, b)
    if isinstance(a, PY_SCALARS) and isinstance(b, PY_SCALARS):
        return _PY_CMPS[pred](a, b)
    folded = _out_of_range_compare(cx, pred, a, b)
    if folded is not None:
        return folded
    t, _ = promote2(cx, a, b, SYMBOL[pred])
    x, y = convert(cx, a, t), convert(cx, b, t)
    if t.is_bool:
        x, y = convert(cx, x, T.u32), convert(cx, y, T.u32)
    return emit(cx, "cmp", [x, y], T.bool_, pred=pred)


_FLIP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}


def _out_of_range_compare(cx, pred, a, b):
    """numpy 2 compares an int column with an out-of-range Python int exactly: constant."""
    if isinstance(a, int) and not isinstance(a, bool) and not isinstance(b, PY_SCALARS):
        return _out_of_range_compare(cx, _FLIP[pred], b, a)
    if not (isinstance(b, int) and not isinstance(b, bool)) or isinstance(a, PY_SCALARS):
        return None
    t, weak = type_of(cx, a)
    if weak or not t.is_int:
        return None
    info = np.iinfo(t.dtype)
    if info.min <= b <= info.max:
        return None
    above = b > info.max            # every value of a is < b
    return {"lt": above, "le": above, "gt": not above, "ge": not above,
            "eq": False, "ne": True}[pred]


def is_instr(v) -> bool:
    return isinstance(v, Instr)


def convert_declared(cx, v, ann, what: str):
    """`v` into a place declared `ann` (a device-function parameter, an annotated local):
    numpy `same_kind` casting, so f64 -> f32 and int -> float are fine but float -> int is not."""
    t, weak = type_of(cx, v)
    if weak and is_const(v):
        ok = not (isinstance(v, float) and not ann.is_float)
    else:
        ok = bool(np.can_cast(t.dtype, ann.dtype, "same_kind")) or (weak and not t.is_float)
    if not ok:
        raise cx.err(f"{what} is {t.name} but is declared {ann.name}; convert it explicitly, "
                     f"e.g. {ann.name}(x)")
    return convert_literal(cx, v, ann)
