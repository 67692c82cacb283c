"""Sub-arrays inside kernels: `a[i]`, `a[s:e]`, `a[i, s:e]`, and strided ones: `a[s:e:k]`,
`a[:, j]`, `a[r0:r1, c0:c1]`, `a[i, s:e:k]`, `a[::-1]`.

A view is an `ArrayView` like any other (base pointer + shape in registers), so it can be
indexed, sliced again, measured (`.shape`, `.size`, `len`) and passed to device functions.
A view that is C-contiguous by construction (some leading integer indices, then at most one
slice with step 1, then only whole dimensions, of a contiguous array) keeps `strides=None` and
exactly the code of a plain array.  Any other view carries one stride per dimension, in
elements: a Python int where it is known at compile time (a slice step, the row length of a
static shared array, the 1 of an innermost axis that is still contiguous), else an i64 value;
an element address is then `base + sum(i_d * stride_d)` with no multiply for a stride of 1.

Bounds follow Python/numpy slicing: omitted bounds cover the axis (from the end backwards for a
negative step), a stop past the end is clamped, an empty range has length 0, and a *literal*
negative bound counts from the end (`a[-3:]`, `a[:-1]`, `a[::-1]`).  A bound computed at run
time is used as it is (it is not wrapped: a negative run-time bound is the caller's bug, caught
by the executor's memcheck when it reads outside the array).  The step is a nonzero
compile-time int or a run-time integer; a run-time step must be positive (a step <= 0 gives an
empty view rather than numpy's reversed one).
"""
from __future__ import annotations

import ast

from .. import types as T
from . import arith
from .memory import element_ptr
from ..ir.core import Const
from .values import PY_SCALARS, ArrayView, make_const


class SliceIndex:
    """A `start:stop[:step]` inside a subscript, its bounds already lowered (None = omitted)."""
    __slots__ = ("start", "stop", "step")

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    @property
    def whole(self) -> bool:
        return self.start is None and self.stop is None and self.step is None


def lower_slice(cx, node: ast.Slice) -> SliceIndex:
    parts = [None if n is None else cx.expr(n) for n in (node.lower, node.upper, node.step)]
    return SliceIndex(*parts)


def has_slice(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, SliceIndex) for i in items)


# ---- i32 arithmetic that folds when both sides are known -----------------------------------------

def _i32(cx, v):
    return make_const(v, T.i32) if isinstance(v, int) else arith.convert(cx, v, T.i32)


_FOLD = {"add": int.__add__, "sub": int.__sub__, "min": min, "max": max,
         "div": int.__floordiv__}


def _op(cx, op, a, b):
    if isinstance(a, int) and isinstance(b, int):
        return _FOLD[op](a, b)
    return arith.emit(cx, op, [_i32(cx, a), _i32(cx, b)], T.i32)


def mul_stride(cx, a, b):
    """Product of two strides (ints, or i64 values once either is known only at run time)."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1 or isinstance(b, int) and b == 1:
        return b if isinstance(a, int) and a == 1 else a
    return arith.emit(cx, "mul", [arith.convert(cx, a, T.i64), arith.convert(cx, b, T.i64)],
                      T.i64)


def c_strides(cx, shape) -> tuple:
    """Element strides of a C-contiguous array of `shape` (the last one is the int 1)."""
    out = [1]
    for n in reversed(shape[1:]):
        out.insert(0, mul_stride(cx, out[0], n))
    return tuple(out)


# ---- one slice -> (start, length, step) ---------------------------------------------------------

def _bound(cx, v, what):
    """A slice bound: a Python int (maybe negative) or an i32 value."""
    if isinstance(v, PY_SCALARS):
        if isinstance(v, (bool, float)):
            raise cx.err(f"a slice {what} must be an integer, got {v!r}")
        if not -2**31 <= v < 2**31:
            raise cx.err(f"the slice {what} {v} does not fit in i32; use a smaller bound")
        return v
    t, _ = arith.type_of(cx, v)
    if not t.is_int:
        raise cx.err(f"a slice {what} must be an integer, got {t.name}; convert it with i32(x)")
    if isinstance(v, Const):
        return int(v.value)
    return arith.convert(cx, v, T.i32)


def _step(cx, v):
    if v is None:
        return 1
    k = _bound(cx, v, "step")
    if isinstance(k, int) and k == 0:
        raise cx.err("a slice step cannot be zero; use a positive step such as a[s:e:2] or "
                     "-1 to reverse")
    return k


def _from_end(cx, v, n):
    """numpy's reading of a literal negative bound: counted from the end of the axis."""
    return _op(cx, "add", n, v) if isinstance(v, int) and v < 0 else v


def _slice(cx, s: SliceIndex, n):
    """(start, length, step) of `s` over an axis of length `n`, with numpy's clamping."""
    k = _step(cx, s.step)
    start = None if s.start is None else _bound(cx, s.start, "start")
    stop = None if s.stop is None else _bound(cx, s.stop, "stop")
    if isinstance(k, int) and k < 0:
        last = _op(cx, "sub", n, 1)
        if start is None:
            start = last
        elif isinstance(start, int):
            start = _op(cx, "min", _op(cx, "max", _from_end(cx, start, n), -1), last)
        else:
            start = _op(cx, "min", start, last)
        stop = -1 if stop is None else _op(cx, "max", _from_end(cx, stop, n), -1)
        span = _op(cx, "max", _op(cx, "sub", start, stop), 0)
        return start, _op(cx, "div", _op(cx, "add", span, -k - 1), -k), k
    if start is None:
        start = 0
    elif isinstance(start, int) and start < 0:
        start = _op(cx, "max", _from_end(cx, start, n), 0)
    stop = n if stop is None else _op(cx, "min", _from_end(cx, stop, n), n)
    span = _op(cx, "max", _op(cx, "sub", stop, start), 0)
    if isinstance(k, int):
        return start, span if k == 1 else _op(cx, "div", _op(cx, "add", span, k - 1), k), k
    count = _op(cx, "div", _op(cx, "add", span, _op(cx, "sub", k, 1)), k)
    positive = arith.emit(cx, "cmp", [k, make_const(0, T.i32)], T.bool_, pred="gt")
    return start, arith.emit(cx, "select", [positive, count, make_const(0, T.i32)], T.i32), k


# ---- views -----------------------------------------------------------------------------------------

def _is_contiguous(view: ArrayView, items) -> bool:
    """Integer indices, then at most one slice of step 1, then whole dimensions."""
    if view.strides is not None:
        return False
    lead = 0
    while lead < len(items) and not isinstance(items[lead], SliceIndex):
        lead += 1
    if lead == len(items):
        return True
    s = items[lead]
    if s.step is not None and not (isinstance(s.step, int) and not isinstance(s.step, bool)
                                   and s.step == 1):
        return False
    return all(isinstance(it, SliceIndex) and it.whole for it in items[lead + 1:])


def subview(cx, view: ArrayView, index) -> ArrayView:
    items = list(index) if isinstance(index, tuple) else [index]
    if len(items) > view.ndim:
        raise cx.err(f"this array has {view.ndim} dimension(s) but {len(items)} index(es) "
                     f"were given")
    if any(s is None for s in view.shape):
        raise cx.err("dynamic shared memory cannot be sliced; index it element by element")
    items += [SliceIndex(None, None, None)] * (view.ndim - len(items))
    contiguous = _is_contiguous(view, items)
    strides = view.strides or (None if contiguous else c_strides(cx, view.shape))
    starts, shape, new_strides = [], [], []
    for d, it in enumerate(items):
        if not isinstance(it, SliceIndex):
            starts.append(it)
            continue
        if it.whole:
            start, length, k = 0, view.shape[d], 1
        else:
            start, length, k = _slice(cx, it, view.shape[d])
        starts.append(start)
        shape.append(length)
        if not contiguous:
            new_strides.append(mul_stride(cx, strides[d], k))
    base = element_ptr(cx, view, tuple(starts))
    out = tuple(new_strides) or None
    if out is not None and len(out) == 1 and isinstance(out[0], int) and out[0] == 1:
        out = None
    return ArrayView(base, view.elem, tuple(shape), view.space, view.root, out)
