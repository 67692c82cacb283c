"""`for` over things that are not a range: tuples, `enumerate(...)` and `zip(...)`.

Why unrolled: a kernel has no iterator objects.  A tuple's length is known when the kernel
compiles, so `for d in (16, 8, 4, 2, 1):` is the body copied once per element, the loop
variable bound to that element (a compile-time constant stays one: `shfl_down_sync(m, v, d)`
gets an immediate), exactly as `pyptx.static_range` does for numbers.  The elements may be
anything a name can hold (numbers known at run time, arrays, nested tuples); a tuple loop
target unpacks each (`for j, d in enumerate((3, 5))`).  `break`/`continue` keep their meaning.

`enumerate(t)` and `zip(t1, t2)` of tuples are values (tuples of tuples, built when the kernel
compiles), so they nest (`enumerate(zip(a, b))`).  `enumerate(range(...))` is the one run-time
form: a normal range loop (loops.py) that also counts its iterations in a hidden i32 counter.
Anything else (an array, a range inside zip) is a CompileError that says how to write the loop
with `range`.
"""
from __future__ import annotations

import ast
import builtins

from .values import ArrayView, TupleVar

MAX_ELEMENTS = 4096


def _is_tuple(v) -> bool:
    from .complex64 import is_complex
    return isinstance(v, tuple) and not is_complex(v)


def _what(cx, v) -> str:
    from . import arith
    return arith.describe(v)


def static_items(cx, node, value) -> list:
    """The elements of `value` (the lowered `node`; None: the current node) as a list, or a
    CompileError."""
    if _is_tuple(value):
        return list(value)
    if isinstance(value, ArrayView):
        raise cx.err("a kernel cannot iterate over an array directly; loop over its indices, "
                     "write for i in range(len(a)): v = a[i]", node)
    raise cx.err(f"kernels loop with 'for i in range(...)', 'for i in pyptx.range(..., "
                 f"unroll=N)', 'for i in pyptx.static_range(N)' or over a tuple "
                 f"('for d in (16, 8, 4)', enumerate/zip of tuples); this iterable is "
                 f"{_what(cx, value)}", node)


def enumerate_range(cx, call):
    """For `enumerate(range(...)[, start])`: (the range call node, the compile-time start);
    None for any other enumerate (lowered as a value: `builtin_enumerate`)."""
    if not call.args or not isinstance(call.args[0], ast.Call) or \
            cx.expr(call.args[0].func) is not builtins.range:
        return None
    args = [None] + [cx.expr(a) for a in call.args[1:]]
    kwargs = {k.arg: cx.expr(k.value) for k in call.keywords}
    return call.args[0], _enumerate_start(cx, args, kwargs)


def _enumerate_start(cx, args, kwargs) -> int:
    if not 1 <= len(args) <= 2 or set(kwargs) - {"start"} or len(args) + len(kwargs) > 2:
        raise cx.err("enumerate() takes an iterable and start; write enumerate(t) or "
                     "enumerate(t, start=1)")
    v = args[1] if len(args) == 2 else kwargs.get("start", 0)
    if isinstance(v, bool) or not isinstance(v, int):
        raise cx.err("enumerate()'s start must be a compile-time int (a literal or a "
                     "constexpr); write enumerate(t, start=1)")
    return v


def builtin_enumerate(cx, args, kwargs) -> tuple:
    """`enumerate(t[, start])` of a tuple, as a value: the tuple of (index, item) pairs."""
    start = _enumerate_start(cx, args, kwargs)
    return tuple((start + k, v) for k, v in enumerate(static_items(cx, None, args[0])))


def builtin_zip(cx, args, kwargs) -> tuple:
    """`zip(t1, t2, ...)` of tuples, as a value: tuples as long as the shortest."""
    if kwargs or not args:
        raise cx.err("zip() takes tuples (no keywords); write zip(t1, t2)")
    return tuple(zip(*(static_items(cx, None, a) for a in args)))


def target_names(target) -> list:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def lower_static_for(cx, st, items: list) -> None:
    """`for target in <items>`: the body once per item, the target bound to it."""
    from .loops import unroll_values
    if len(items) > MAX_ELEMENTS:
        raise cx.err(f"this loop would unroll {len(items)} iterations (limit {MAX_ELEMENTS}); "
                     f"use range()", st.iter)
    names = target_names(st.target)
    before = {n: cx.scope.objvars.get(n) for n in names}

    def bind(v):
        # an array (or other object) bound by the previous iteration may be rebound: each
        # iteration is a fresh binding of the loop variable, as in Python
        objvars = cx.scope.objvars
        for n in names:
            cur = objvars.get(n)
            if cur is not None and cur is not before[n] and not isinstance(cur, TupleVar):
                del objvars[n]
        cx.assign_target(st.target, v)
    unroll_values(cx, st, items, bind)
