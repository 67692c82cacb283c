"""The frontend's shared argument helpers: what an intrinsic's lowering uses to check and
convert its arguments (a number, a 32-bit mask, an integer operand) and to read a special
register.  Public, so the intrinsic modules (intrinsics.py, parity.py, mathfns.py, tensorcore.py,
...) share them without reaching into each other's private names.
"""
from __future__ import annotations

from .. import types as T
from . import arith
from .values import ArrayView, is_const

FULL_MASK = 0xFFFFFFFF


def scalar_arg(cx, v, what: str):
    t, _ = arith.type_of(cx, v) if not isinstance(v, ArrayView) else (None, None)
    if t is None:
        from .describe import needs_number
        raise cx.err(f"{what} must be a number, got {needs_number(v)}")
    return t


def special_register(cx, name):
    return arith.emit(cx, "sreg", [], T.i32, name=name)


def u32_arg(cx, v, what):
    t = scalar_arg(cx, v, what)
    if t.is_float or t.is_bool:
        raise cx.err(f"{what} must be an integer, got {t.name}; convert with u32(x)")
    if is_const(v) and not 0 <= v <= FULL_MASK and not -2**31 <= v < 0:
        raise cx.err(f"{what} {v} does not fit in 32 bits; use a 32-bit mask such as "
                     f"0xFFFFFFFF")
    return arith.convert(cx, v, T.u32)


def int_operand(cx, v, name):
    t = scalar_arg(cx, v, f"{name}()'s argument")
    if not t.is_int:
        raise cx.err(f"{name}() needs an integer, got {t.name}; reinterpret floats with "
                     f"pyptx.bitcast(x, u32)")
    if t.bits < 32:
        unsigned = T.u8 if t.bits == 8 else T.u16
        v = arith.convert(cx, arith.emit(cx, "bitcast", [arith.convert(cx, v, t)], unsigned)
                          if t.is_signed else v, T.u32)
        return v, T.u32, t.bits
    return arith.convert(cx, v, t), t, t.bits
