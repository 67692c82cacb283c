"""`pyptx.math`'s Numba-parity names: one table row each, lowered through the intrinsic registry.

Unary and binary functions inline `pyptx.mathlib.numba_parity.<name>_<f32|f64>` (`fmod` inlines
`pyptx.mathlib.fmod_*`); f16 and bf16 are computed in f32 and rounded once, integers compute in
f64 (as Python's / Numba's `math` module returns floats).  `isnan/isinf/isfinite` are compares.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from . import arith
from .intrinsics import REGISTRY, scalar_arg

#: name -> number of arguments
LIB = {"log10": 1, "log1p": 1, "expm1": 1, "sinh": 1, "cosh": 1, "tan": 1, "atan": 1, "asin": 1,
       "acos": 1, "cbrt": 1, "erf": 1, "erfc": 1, "atan2": 2, "hypot": 2, "copysign": 2, "fmod": 2,
       "pow": 2}
PREDICATES = ("isnan", "isinf", "isfinite")


def _compute_type(t: T.ScalarType) -> T.ScalarType:
    if t.is_float:
        return T.f32 if t in (T.f16, T.bf16) else t
    return T.f64


def _lower_lib(cx, name, args, kwargs):
    n = LIB[name]
    if kwargs or len(args) != n:
        raise cx.err(f"pyptx.math.{name}() takes {n} argument{'s' if n > 1 else ''}")
    if n == 1:
        t = scalar_arg(cx, args[0], f"pyptx.math.{name}()'s argument")
    else:
        for k, a in enumerate(args):
            scalar_arg(cx, a, f"pyptx.math.{name}()'s argument {k + 1}")
        t, _ = arith.promote_many(cx, list(args), name)
    ct = _compute_type(t)
    rt = t if t in (T.f16, T.bf16) else ct
    from .. import mathlib
    from ..mathlib import numba_parity as mathlib_numba, numba_parity_f64 as mathlib_numba_f64
    from ..mathlib import pow as mathlib_pow
    from .calls import inline
    key = f"{name}_{ct.name}"
    fn = (getattr(mathlib_numba, key, None) or getattr(mathlib, key, None)
          or getattr(mathlib_pow, key, None) or getattr(mathlib_numba_f64, key, None))
    if fn is None:
        raise cx.err(f"pyptx.math.{name}() is implemented for f32 (and f16) arguments only so "
                     f"far; convert with f32(x) (an {ct.name} version is not written yet)")
    ops = [arith.convert(cx, a, ct) for a in args]
    return arith.convert(cx, inline(cx, fn, ops, {}), rt)


def _lower_pred(cx, name, args, kwargs):
    if kwargs or len(args) != 1:
        raise cx.err(f"pyptx.math.{name}(x) takes one argument")
    t = scalar_arg(cx, args[0], f"pyptx.math.{name}()'s argument")
    if not t.is_float:
        return name == "isfinite"                  # an integer is never nan or inf
    ct = _compute_type(t)
    x = arith.convert(cx, args[0], ct)
    if name == "isnan":
        return arith.emit(cx, "isnan", [x], T.bool_)
    ax = arith.emit(cx, "abs", [x], ct)
    inf = arith.make_const(float(np.inf), ct)
    return arith.emit(cx, "cmp", [ax, inf], T.bool_, pred="eq" if name == "isinf" else "lt")


for _name in LIB:
    REGISTRY[f"math.{_name}"] = (lambda cx, args, kwargs, _n=_name:
                                 _lower_lib(cx, _n, args, kwargs))
for _name in PREDICATES:
    REGISTRY[f"math.{_name}"] = (lambda cx, args, kwargs, _n=_name:
                                 _lower_pred(cx, _n, args, kwargs))
