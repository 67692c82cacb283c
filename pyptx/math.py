"""`pyptx.math`: math functions for kernels (`exp`, `sqrt`, `fast_exp`, ...).

Each name is an inert marker; the frontend lowers calls to them (table in
`pyptx/frontend/mathfns.py`).  Result dtypes follow numpy's ufuncs (`exp` of an i32 is f64).
"""
from __future__ import annotations

from .dsl import Intrinsic

_NAMES = ("exp exp2 log log2 sqrt rsqrt sin cos tanh floor ceil fabs fma rint trunc "
          "fast_exp fast_exp2 fast_log fast_log2 fast_sin fast_cos fast_tanh fast_rcp "
          "fast_sqrt fast_rsqrt "
          "log10 log1p expm1 sinh cosh tan atan asin acos cbrt atan2 hypot copysign fmod "
          "isnan isinf isfinite erf erfc "
          "pow").split()

globals().update({name: Intrinsic(f"math.{name}") for name in _NAMES})

__all__ = list(_NAMES)
