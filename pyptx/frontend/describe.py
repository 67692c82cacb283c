"""How diagnostics name things: what a value is, in the user's words, and "did you mean ...?".

Error messages must never show an internal repr (`Param('n', i32)`, `<pyptx block_idx>`,
`<module 'pyptx' from '/path'>`): every value the frontend can hold is described here as the
user wrote it, and misspelt names get the closest real ones (difflib).
"""
from __future__ import annotations

import difflib
import types as pytypes

from .. import types as T


def describe(v) -> str:
    """A short noun phrase for a value a kernel is holding ("the i32 parameter 'n'")."""
    from ..dsl import Dim3, Intrinsic, MemorySpace, SpecialRegister
    from ..ir.core import BlockArg, Const, Instr, Param
    from ..functions import DeviceFunction, KernelBase as Kernel
    from .memory import BoundView
    from .values import ArrayView
    if isinstance(v, ArrayView):
        return f"an array ({v.elem.name}, {v.ndim}-d); index it, e.g. a[i]"
    from .complex64 import is_complex
    if is_complex(v):            # before tuple: a frontend Complex is a (re, im) tuple
        return "a complex value (c64); take its parts, z.real and z.imag, or abs(z)"
    if isinstance(v, tuple):
        return "a tuple; unpack it first (a, b = ...)"
    if type(v).__name__ == "ndarray":
        return ("a numpy array from outside the kernel (to read it in the kernel, make it "
                "constant memory: t = pyptx.const_array(table), or pass it as an array "
                "parameter)")
    if isinstance(v, str):
        return "a string (strings are only allowed in print)"
    if v is None:
        return "None"
    if isinstance(v, bool):
        return f"the constant {v}"
    if isinstance(v, (int, float)):
        return f"the number {v!r}"
    if isinstance(v, Param) and isinstance(v.type, T.ScalarType):
        return f"the {v.type.name} parameter '{v.name}' (a number, not an array)"
    if isinstance(v, Const) and isinstance(v.type, T.ScalarType):
        return f"the {v.type.name} constant {v.value!r}"
    if isinstance(v, (Instr, BlockArg)) and isinstance(getattr(v, "type", None), T.ScalarType):
        return f"a value of type {v.type.name}"
    if isinstance(v, T.ScalarType):
        return f"the type {v.name}; call it to convert, e.g. {v.name}(x)"
    if isinstance(v, T.ArrayType):
        return f"the array type {v!r} (only for parameter annotations)"
    if v is T.constexpr:
        return "pyptx.constexpr (only for parameter annotations)"
    if isinstance(v, Dim3):
        return f"pyptx.{v._name} (use its .x, .y or .z)"
    if isinstance(v, SpecialRegister):
        return f"the special register {v.sreg}"
    if isinstance(v, Intrinsic):
        return f"the function pyptx.{v.intrinsic} (call it: pyptx.{v.intrinsic}(...))"
    if isinstance(v, MemorySpace):
        return (f"pyptx.{v._space} (allocate with pyptx.{v._space}.array(shape, dtype))")
    if isinstance(v, DeviceFunction):
        return f"the @pyptx.func '{v.name}' (call it: {v.name}(...))"
    if isinstance(v, Kernel):
        return f"the @pyptx.kernel '{v.name}'"
    if isinstance(v, BoundView):
        return "the method a.view (call it: a.view(f32))"
    if isinstance(v, pytypes.ModuleType):
        return f"the module {v.__name__}"
    if isinstance(v, type):
        return f"the class {v.__qualname__}"
    if callable(v):
        return f"the Python function {getattr(v, '__name__', '?')}"
    return f"a Python {type(v).__name__} object"


def needs_number(v) -> str:
    """`describe(v)` plus, when that gives no advice of its own, what a number looks like."""
    d = describe(v)
    return d if (";" in d or "use " in d or "call it" in d) else \
        d + "; use a number here, e.g. x[i], n or 1.0"


def shown(v) -> str:
    """A user-supplied option value: its repr when that is plain, else its type's name."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    return f"a {type(v).__name__}"


def annotation_text(a) -> str:
    """An annotation as the user would write it (a class by name, not `<class 'float'>`)."""
    if isinstance(a, type):
        return a.__qualname__
    if isinstance(a, (T.ScalarType, T.ArrayType)) or a is T.constexpr or isinstance(a, str):
        return repr(a) if not isinstance(a, str) else a
    return describe(a)


def did_you_mean(name: str, candidates, prefix: str = "", quote: str = "") -> str:
    """"; did you mean X?" with the closest candidates (those nearly as close as the best),
    or "" when none is close."""
    pool = sorted({c for c in candidates if isinstance(c, str) and not c.startswith("_")})
    close = difflib.get_close_matches(name, pool, n=3, cutoff=0.6)
    if not close:
        return ""
    best = difflib.SequenceMatcher(None, name, close[0]).ratio()
    close = [c for c in close if difflib.SequenceMatcher(None, name, c).ratio() >= best - 0.05]
    return "; did you mean " + " or ".join(f"{quote}{prefix}{c}{quote}" for c in close) + "?"


def public_names(obj) -> list[str]:
    names = getattr(obj, "__all__", None)
    return list(names) if names else [n for n in dir(obj) if not n.startswith("_")]


def missing_attribute(obj, attr: str, written: str | None = None) -> str:
    """The message for `obj.attr` when `obj` has no such attribute (`written`: how the user
    spelt `obj`, e.g. `np` for numpy)."""
    from ..dsl import Dim3, MemorySpace
    from ..functions import DeviceFunction
    if isinstance(obj, Dim3):
        return (f"pyptx.{obj._name} has no attribute '{attr}'; use pyptx.{obj._name}.x, "
                f".y or .z")
    if isinstance(obj, MemorySpace):
        members = [n for n in ("array", "dynamic") if hasattr(obj, n)]
        hint = did_you_mean(attr, members, f"pyptx.{obj._space}.")
        return (f"pyptx.{obj._space} has no attribute '{attr}'"
                + (hint or f"; use " + " or ".join(f"pyptx.{obj._space}.{m}(...)"
                                                     for m in members)))
    if isinstance(obj, pytypes.ModuleType):
        name = written or obj.__name__
        names = public_names(obj)
        hint = did_you_mean(attr, names, f"{name}.")
        if hint:
            return f"{name} has no attribute '{attr}'{hint}"
        if obj.__name__.startswith("pyptx"):
            shown = ", ".join(sorted(n for n in names if not n[0].isupper())[:40])
            return f"{name} has no attribute '{attr}'; it provides: {shown}"
        return (f"{name} has no attribute '{attr}'; check the spelling (kernels can use int, "
                f"float and bool constants and @pyptx.func functions from modules)")
    if isinstance(obj, DeviceFunction):
        return (f"'{attr}' is not available on the @pyptx.func '{obj.name}'; call it: "
                f"{obj.name}(...)")
    return f"{describe(obj)} has no attribute '{attr}'; remove '.{attr}'"
