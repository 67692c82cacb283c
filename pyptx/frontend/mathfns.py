"""`pyptx.math`: one table row per function, lowered through the intrinsic registry.

Result dtypes follow numpy's ufunc rule for the argument's dtype (`np.exp` of int32 is float64,
of float16 float16); f16 is computed in f32 and rounded once.  Accurate transcendental functions
inline the DSL implementations in `pyptx.mathlib` (`exp_f32`, `sin_f64`, ...); `fast_*` names are
the PTX `.approx.f32` instructions (f64 arguments are computed in f32).
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as T
from . import arith
from .intrinsics import REGISTRY, scalar_arg

#: name -> (kind, detail).  kinds: 'lib' mathlib function, 'op' one IR op, 'approx' PTX approx.
MATH_TABLE = {
    "exp": ("lib", np.exp), "exp2": ("lib", np.exp2), "log": ("lib", np.log),
    "log2": ("lib", np.log2), "sin": ("lib", np.sin), "cos": ("lib", np.cos),
    "tanh": ("lib", np.tanh),
    "sqrt": ("op", "sqrt"), "floor": ("op", "floor"), "ceil": ("op", "ceil"),
    "trunc": ("op", "trunc"), "rint": ("op", "rint"), "fabs": ("op", "abs"),
    "rsqrt": ("rsqrt", None),
    "fast_exp": ("approx", ("ex2", 1.0 / math.log(2.0), 1.0)),
    "fast_exp2": ("approx", ("ex2", None, None)),
    "fast_log": ("approx", ("lg2", None, math.log(2.0))),
    "fast_log2": ("approx", ("lg2", None, None)),
    "fast_sin": ("approx", ("sin", None, None)), "fast_cos": ("approx", ("cos", None, None)),
    "fast_tanh": ("approx", ("tanh", None, None)), "fast_rcp": ("approx", ("rcp", None, None)),
    "fast_sqrt": ("approx", ("sqrt", None, None)),
    "fast_rsqrt": ("approx", ("rsqrt", None, None)),
}

_NUMPY_UFUNC = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
                "rint": np.rint, "fabs": np.fabs, "rsqrt": np.sqrt}
_RESULT: dict = {}


def result_type(name: str, t: T.ScalarType) -> T.ScalarType:
    """numpy's ufunc output dtype for an input of type t (cached)."""
    if t == T.bf16:              # numpy has no bf16 (its host dtype is u16): as ml_dtypes, bf16
        return t                 # in gives bf16 out, computed in f32 like f16
    key = (name, t.name)
    got = _RESULT.get(key)
    if got is None:
        kind, detail = MATH_TABLE[name]
        ufunc = detail if kind == "lib" else _NUMPY_UFUNC.get(name, np.exp)
        with np.errstate(all="ignore"):
            got = _RESULT[key] = T.from_dtype(ufunc(np.ones(1, t.dtype)).dtype)
    return got


def _operand(cx, name, x):
    t = scalar_arg(cx, x, f"pyptx.math.{name}()'s argument")
    rt = result_type(name, t)
    compute = T.f32 if rt in (T.f16, T.bf16) else rt
    return arith.convert(cx, x, compute), compute, rt


def _lower(cx, name, args, kwargs):
    if kwargs or len(args) != 1:
        raise cx.err(f"pyptx.math.{name}(x) takes one argument; write pyptx.math.{name}(x)")
    kind, detail = MATH_TABLE[name]
    x, ct, rt = _operand(cx, name, args[0])
    if cx.fastmath and kind != "approx":
        from .fastmath import math_name
        kind, detail = MATH_TABLE[math_name(cx, name, ct)]
    if kind == "op":
        r = arith.emit(cx, detail, [x], ct)
    elif kind == "rsqrt":          # rcp.rn(sqrt.rn(x)): <= 1 ulp, no .approx (fast_rsqrt is)
        r = arith.emit(cx, "rcp", [arith.emit(cx, "sqrt", [x], ct)], ct)
    elif kind == "approx":
        r = _approx(cx, detail, arith.convert(cx, x, T.f32))
    else:
        r = _library(cx, name, x, ct)
    return arith.convert(cx, r, rt)


def _approx(cx, detail, x):
    fn, pre, post = detail
    if pre is not None:
        x = arith.emit(cx, "mul", [x, arith.make_const(pre, T.f32)], T.f32)
    r = arith.emit(cx, "approx", [x], T.f32, fn=fn)
    if post is not None and post != 1.0:
        r = arith.emit(cx, "mul", [r, arith.make_const(post, T.f32)], T.f32)
    return r


def _library(cx, name, x, ct):
    """Inline the accurate DSL implementation `pyptx.mathlib.<name>_<f32|f64>`."""
    from .. import mathlib
    from .calls import inline
    return inline(cx, getattr(mathlib, f"{name}_{ct.name}"), [x], {})


def _fma(cx, args, kwargs):
    if kwargs or len(args) != 3:
        raise cx.err("pyptx.math.fma(a, b, c) takes three arguments; write "
                     "pyptx.math.fma(a, b, c) for a * b + c")
    t, _ = arith.promote_many(cx, args, "fma")
    if not t.is_float:
        raise cx.err(f"pyptx.math.fma() needs float arguments, got {t.name}; convert with "
                     f"f32(x)")
    ct = T.f32 if t == T.f16 else t
    ops = [arith.convert(cx, v, ct) for v in args]
    if t == T.f16:      # a*b is exact in f32 for f16 inputs, so one f32 fma rounds like f16 fma
        r = arith.emit(cx, "fma", ops, ct)
        return arith.convert(cx, r, t)
    return arith.emit(cx, "fma", ops, ct)


for _name in MATH_TABLE:
    REGISTRY[f"math.{_name}"] = (lambda cx, args, kwargs, _n=_name: _lower(cx, _n, args, kwargs))
REGISTRY["math.fma"] = _fma
