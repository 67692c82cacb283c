"""`fastmath=True` (`pyptx.kernel(fastmath=True)`, `pyptx.compile(..., fastmath=True)`,
Numba's `cuda.jit(fastmath=True)`): approximate f32 math in the kernel's own code.

What changes, as Numba's fastmath (NVVM `-prec-div=false -prec-sqrt=false` and its fast
libdevice functions) gives it: f32 `/` is `div.full.f32` (max 2 ulp, full range), `sqrt` is
`sqrt.approx.f32`, and `exp exp2 log log2 sin cos` of f32 are the `fast_*` forms
(`ex2/lg2/sin/cos.approx.f32`, with their documented error bounds).  f64 math is unchanged.
The default (fastmath=False) compiles exactly what it did before.

Why only the kernel's own code: pyptx's own library functions (`pyptx.mathlib`: the float `//`
and `%`, tanh, atan2, ...) are written on exact division and would lose their guarantees
(a floor of an approximate quotient can be off by one), so code from pyptx's modules keeps
IEEE arithmetic inside a fastmath kernel; user `@pyptx.func`s and `@cuda.jit` functions the
kernel calls are approximated like the kernel.
"""
from __future__ import annotations

from .. import types as T

#: pyptx.math names with an approximate form under fastmath (f32 only)
APPROXIMATED = {"exp": "fast_exp", "exp2": "fast_exp2", "log": "fast_log",
                "log2": "fast_log2", "sin": "fast_sin", "cos": "fast_cos",
                "sqrt": "fast_sqrt"}


def active(cx) -> bool:
    """Whether the code being lowered is approximated: a fastmath kernel, outside pyptx's own
    library modules."""
    if not cx.fastmath:
        return False
    mod = cx.scope.globals.get("__name__", "")
    return not (mod == "pyptx" or mod.startswith("pyptx."))


def math_name(cx, name: str, t: T.ScalarType) -> str:
    """The pyptx.math function that computes `name` of a `t` here."""
    if t == T.f32 and name in APPROXIMATED and active(cx):
        return APPROXIMATED[name]
    return name


def div_attrs(cx, t: T.ScalarType) -> dict:
    """Extra attributes of an IR `div` of type t: `full` makes it `div.full.f32`."""
    return {"full": True} if t == T.f32 and active(cx) else {}
