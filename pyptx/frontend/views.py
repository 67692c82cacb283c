"""Sub-arrays inside kernels: `a[i]` of an n-d array (a row), `a[s:e]`, `a[i, s:e]`.

A view is an `ArrayView` like any other (base pointer + shape in registers), so it can be
indexed, sliced again, measured (`.shape`, `.size`, `len`) and passed to device functions.
Arrays are C-contiguous and a view needs no strides as long as it stays contiguous: some leading
integer indices, then at most one slice, then only whole dimensions.  Anything else (`a[:, j]`,
`a[s:e, t:u]`, a step) is a CompileError that says what to write instead.

Slice bounds follow Python's clamping of the stop (`a[s:e]` with `e > len(a)` ends at the end,
an empty range has length 0) but not its negative-index wraparound (as element indices).
"""
from __future__ import annotations

import ast

from .. import types as T
from . import arith
from .memory import element_ptr
from .values import PY_SCALARS, ArrayView, make_const


class SliceIndex:
    """A `start:stop[:step]` inside a subscript, its bounds already lowered (None = omitted)."""
    __slots__ = ("start", "stop", "step")

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step


def lower_slice(cx, node: ast.Slice) -> SliceIndex:
    parts = [None if n is None else cx.expr(n) for n in (node.lower, node.upper, node.step)]
    return SliceIndex(*parts)


def has_slice(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, SliceIndex) for i in items)


def _int_bound(cx, v, what):
    if isinstance(v, PY_SCALARS):
        if isinstance(v, (bool, float)):
            raise cx.err(f"a slice {what} must be an integer, got {v!r}")
        if v < 0:
            raise cx.err(f"negative slice bounds do not wrap around in kernels; write "
                         f"a[len(a) - {-v}:] style bounds")
        return make_const(v, T.i32)
    t, _ = arith.type_of(cx, v)
    if not t.is_int:
        raise cx.err(f"a slice {what} must be an integer, got {t.name}")
    return arith.convert(cx, v, T.i32)


def subview(cx, view: ArrayView, index) -> ArrayView:
    items = list(index) if isinstance(index, tuple) else [index]
    if len(items) > view.ndim:
        raise cx.err(f"this array has {view.ndim} dimension(s) but {len(items)} index(es) "
                     f"were given")
    if any(s is None for s in view.shape):
        raise cx.err("dynamic shared memory cannot be sliced; index it element by element")
    items += [SliceIndex(None, None, None)] * (view.ndim - len(items))
    lead = 0
    while lead < len(items) and not isinstance(items[lead], SliceIndex):
        lead += 1
    for d in range(lead + 1, len(items)):
        s = items[d]
        if not (isinstance(s, SliceIndex) and s.start is None and s.stop is None
                and s.step is None):
            raise cx.err("only contiguous views are supported in kernels: integer indices "
                         "first, then one slice, then whole dimensions (a[i], a[s:e], "
                         "a[i, s:e]); for a column or a strided view index elements, "
                         "e.g. a[k, j] in a loop")
    starts = list(items[:lead])
    shape = list(view.shape[lead + 1:])
    if lead < len(items):
        s = items[lead]
        if s.step is not None and not (isinstance(s.step, int) and s.step == 1):
            raise cx.err("slices with a step are not supported in kernels; loop with "
                         "range(start, stop, step) and index elements")
        n = view.shape[lead]
        start = make_const(0, T.i32) if s.start is None else _int_bound(cx, s.start, "start")
        if s.stop is None:
            stop = n
        else:
            stop = _int_bound(cx, s.stop, "stop")
            stop = arith.emit(cx, "min", [stop, arith.convert(cx, n, T.i32)], T.i32)
        length = arith.emit(cx, "max", [arith.emit(cx, "sub", [arith.convert(cx, stop, T.i32),
                                                               start], T.i32),
                                        make_const(0, T.i32)], T.i32)
        starts.append(start)
        shape.insert(0, length)
        starts += [0] * (view.ndim - lead - 1)
    base = element_ptr(cx, view, tuple(starts))
    return ArrayView(base, view.elem, tuple(shape), view.space, view.root)
