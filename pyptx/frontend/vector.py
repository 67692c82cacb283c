"""`pyptx.vload(a, i, n)` / `pyptx.vstore(a, i, values)`: n consecutive elements in one access.

Why a separate intrinsic (and not "the optimiser merges neighbouring loads"): a vector access
is only legal when its address is a multiple of its size, which the compiler cannot prove for
a run-time index; the user promises it by writing `vload`, as CUDA users write `float4`.

`i` is an index like `a[i]` (a tuple `(r, i)` for an n-d array): the n elements are
`a[..., i]` .. `a[..., i+n-1]`, consecutive in memory (row-major), so they stay within the row
when `i + n <= a.shape[-1]`; `i` must be a multiple of `n` (and, for an n-d array, the flat
offset too, which holds when the row length is a multiple of `n`).  At most 16 bytes: n in
{1, 2, 4} for every type of up to 4 bytes, 8 for 16-bit types, {1, 2} for 64-bit types; bytes
(u8/i8) go up to 4 lanes — read 16 bytes as `vload(a.view(u32), i // 4, 4)`.
"""
from __future__ import annotations

from .. import types as T
from . import arith, memory
from .intrinsics import intrinsic
from .values import PY_SCALARS, ArrayView


def _lanes_allowed(elem: T.ScalarType) -> tuple[int, ...]:
    return tuple(n for n in (1, 2, 4, 8)
                 if n * elem.mem_bytes <= 16 and (n < 8 or elem.mem_bytes == 2))


def _check(cx, what: str, a, index, n) -> None:
    if not isinstance(a, ArrayView):
        raise cx.err(f"{what}() needs an array as its first argument, got {arith.describe(a)}; "
                     f"write pyptx.{what}(array, i, ...)")
    if a.elem.is_bool:
        raise cx.err(f"{what}() does not take bool_ arrays; use a.view(u8)")
    allowed = _lanes_allowed(a.elem)
    if not isinstance(n, int) or isinstance(n, bool):
        raise cx.err(f"{what}()'s lane count must be a compile-time int (a literal or a "
                     f"pyptx.constexpr), got {arith.describe(n)}; write e.g. "
                     f"pyptx.vload(a, i, 4)")
    if n not in allowed:
        hint = ("; for more bytes, view the array as u32: a.view(u32)"
                if a.elem.mem_bytes == 1 else "")
        raise cx.err(f"{what}() on a {a.elem.name} array takes {', '.join(map(str, allowed))} "
                     f"lanes (at most 16 bytes), not {n}{hint or '; use one of those counts'}")
    memory.inner_contiguous(cx, a, f"{what}()")
    last = index[-1] if isinstance(index, tuple) else index
    if isinstance(last, int) and not isinstance(last, bool) and last % n:
        raise cx.err(f"{what}() with {n} lanes needs an index that is a multiple of {n}, got "
                     f"{last}; use e.g. {last - last % n}")


@intrinsic("vload", "array", "index", "n")
def _vload(cx, array, index, n):
    _check(cx, "vload", array, index, n)
    ptr = memory.element_ptr(cx, array, index)
    vec = arith.emit(cx, "vload", [ptr], T.VecType(array.elem, n))
    return tuple(arith.emit(cx, "lane", [vec], array.elem, index=k) for k in range(n))


@intrinsic("vstore", "array", "index", "values")
def _vstore(cx, array, index, values):
    if not isinstance(values, tuple):
        raise cx.err(f"vstore()'s values must be a tuple such as (x0, x1, x2, x3), got "
                     f"{arith.describe(values)}")
    _check(cx, "vstore", array, index, len(values))
    vals = []
    for v in values:
        if not (isinstance(v, PY_SCALARS) or isinstance(getattr(v, "type", None), T.ScalarType)):
            raise cx.err(f"vstore() stores numbers, got {arith.describe(v)}; pass a tuple of "
                         f"numbers, e.g. (x0, x1)")
        vals.append(arith.convert_literal(cx, v, array.elem))
    ptr = memory.element_ptr(cx, array, index)
    arith.emit(cx, "vstore", [ptr, *vals], None)
    memory.mark_written(cx, array)
