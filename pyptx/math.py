"""`pyptx.math`: math functions for kernels (`exp`, `sqrt`, `fast_exp`, ...).

Each name is an inert marker; the frontend lowers calls to them (table in
`pyptx/frontend/mathfns.py`).  Result dtypes follow numpy's ufuncs (`exp` of an i32 is f64).
"""
from __future__ import annotations

from .dsl import Intrinsic

_NAMES = ("exp exp2 log log2 sqrt rsqrt sin cos tanh floor ceil fabs fma rint trunc "
          "fast_exp fast_exp2 fast_log fast_log2 fast_sin fast_cos fast_tanh fast_rcp "
          "fast_sqrt").split()

exp = Intrinsic("math.exp")
exp2 = Intrinsic("math.exp2")
log = Intrinsic("math.log")
log2 = Intrinsic("math.log2")
sqrt = Intrinsic("math.sqrt")
rsqrt = Intrinsic("math.rsqrt")
sin = Intrinsic("math.sin")
cos = Intrinsic("math.cos")
tanh = Intrinsic("math.tanh")
floor = Intrinsic("math.floor")
ceil = Intrinsic("math.ceil")
fabs = Intrinsic("math.fabs")
fma = Intrinsic("math.fma")
rint = Intrinsic("math.rint")
trunc = Intrinsic("math.trunc")
fast_exp = Intrinsic("math.fast_exp")
fast_exp2 = Intrinsic("math.fast_exp2")
fast_log = Intrinsic("math.fast_log")
fast_log2 = Intrinsic("math.fast_log2")
fast_sin = Intrinsic("math.fast_sin")
fast_cos = Intrinsic("math.fast_cos")
fast_tanh = Intrinsic("math.fast_tanh")
fast_rcp = Intrinsic("math.fast_rcp")
fast_sqrt = Intrinsic("math.fast_sqrt")

__all__ = list(_NAMES)
