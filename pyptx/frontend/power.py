"""Run-time `x ** y` (anything but a small non-negative integer literal exponent, which
arith._power multiplies out): floats through pow in the promoted float type, integers by
square-and-multiply over the exponent's bits (Numba's integer power).

Types follow the same NumPy-2 promotion as the other operators (`f32 ** 2.5` is f32, `i32 ** f32`
is f64); f16 and bf16 are computed in f32 and rounded once.  The algorithms live in
pyptx/mathlib_pow.py as `@pyptx.func`s and are inlined through the template cache.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from . import arith
from .values import make_const


def runtime_power(cx, a, b):
    t, weak = arith.promote2(cx, a, b, "**")
    if t.is_bool:
        raise cx.err("'**' on booleans is not supported; convert first, e.g. i32(flag)")
    from .. import mathlib_pow
    from .calls import inline
    if t.is_float:
        ct = T.f32 if t in (T.f16, T.bf16) else t
        ops = [arith.convert_literal(cx, v, ct) for v in (a, b)]
        r = inline(cx, getattr(mathlib_pow, f"pow_{ct.name}"), ops, {})
        return arith.convert(cx, r, t)
    x, y = arith.convert_literal(cx, a, t), arith.convert_literal(cx, b, t)
    least = int(np.iinfo(t.dtype).min)
    consts = [make_const(v, t) for v in (1, 0, least)]
    r = inline(cx, mathlib_pow.int_pow, [x, y] + consts, {})
    if weak:
        cx.b.weak.add(r)
    return r
