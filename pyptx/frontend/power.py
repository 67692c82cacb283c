"""Run-time `x ** y` and the builtin `pow(x, y)` (anything but a small non-negative integer literal exponent, which
arith._power multiplies out): floats through pow in the promoted float type, integers by
square-and-multiply over the exponent's bits (Numba's integer power).

Types follow the same NumPy-2 promotion as the other operators (`f32 ** 2.5` is f32, `i32 ** f32`
is f64); f16 and bf16 are computed in f32 and rounded once.  The algorithms live in
pyptx/mathlib/pow.py as `@pyptx.func`s and are inlined through the template cache.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import types as T
from . import arith
from .intrinsics import BUILTINS, REGISTRY
from .values import make_const


def runtime_power(cx, a, b):
    t, weak = arith.promote2(cx, a, b, "**")
    if t.is_bool:
        raise cx.err("'**' on booleans is not supported; convert first, e.g. i32(flag)")
    from ..mathlib import pow as mathlib_pow
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


def _builtin_pow(cx, args, kwargs):
    """Python's `pow(x, y)` is `x ** y` (the three-argument modular form is not supported)."""
    if kwargs or len(args) != 2:
        raise cx.err("pow() takes two arguments in kernels, pow(x, y) = x ** y; for "
                     "pow(x, y, m) write x ** y % m with integers")
    return arith.binop(cx, "pow", args[0], args[1])


BUILTINS[builtins.pow] = "builtin.pow"
REGISTRY["builtin.pow"] = _builtin_pow
