"""Slices of dynamic shared memory: `s = cuda.shared.array(0, np.float32); a = s[:n]; b = s[n:]`.

Why: a kernel has one dynamic shared buffer (its size is a launch value), so Numba code that
needs several dynamic arrays cuts that buffer into pieces by slicing it.  The buffer's length is
unknown when the kernel compiles, so a slice cannot be clamped to it as an array's is: the view
starts `start` elements in (`start` and `stop` as written, a compile-time or run-time integer,
never wrapped), and is `stop - start` long (0 if negative) when a stop is given, else of unknown
length again (`b = s[n:]` is "the rest", which can be sliced further).  Fitting the pieces into
the `shared_mem` the launch passes is the caller's job, as in CUDA and Numba (the CPU executor
faults on an access past it).  A literal negative bound would count from an end nobody knows:
a CompileError.  A step must be a positive compile-time int (a strided view).

Every other view goes to `views.subview` unchanged.
"""
from __future__ import annotations

from .. import types as T
from . import arith, views
from .memory import element_ptr
from .values import PY_SCALARS, ArrayView, make_const


def subview(cx, view: ArrayView, index) -> ArrayView:
    if view.shape and view.shape[0] is None:
        return _dynamic_slice(cx, view, index)
    return views.subview(cx, view, index)


def _bound(cx, v, what: str):
    if v is None:
        return None
    if isinstance(v, PY_SCALARS):
        if isinstance(v, (bool, float)):
            raise cx.err(f"a slice {what} must be an integer, got {v!r}")
        if v < 0:
            raise cx.err(f"dynamic shared memory has no known length, so the slice {what} {v} "
                         f"cannot count from its end; write a non-negative offset, e.g. "
                         f"s[:n] and s[n:]")
        return v
    t, _ = arith.type_of(cx, v)
    if not t.is_int:
        raise cx.err(f"a slice {what} must be an integer, got {t.name}; convert it with i32(x)")
    return arith.convert(cx, v, T.i32)


def _dynamic_slice(cx, view: ArrayView, index) -> ArrayView:
    s = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if not isinstance(s, views.SliceIndex):
        raise cx.err("dynamic shared memory is 1-d: slice it with one range, e.g. s[:n] or "
                     "s[n:2 * n]")
    step = s.step
    if isinstance(step, PY_SCALARS) and step == 1:
        step = None
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise cx.err("a slice of dynamic shared memory takes a positive compile-time step "
                     "(s[a:b:2]); its length is unknown, so it cannot be reversed")
    start, stop = _bound(cx, s.start, "start"), _bound(cx, s.stop, "stop")
    if start is None or isinstance(start, int) and start == 0:
        base, start = view.base, 0
    else:
        base = element_ptr(cx, view, start)
    length = None
    if stop is not None:
        if isinstance(stop, int) and isinstance(start, int):
            span = max(stop - start, 0)
        else:
            i32 = (lambda v: make_const(v, T.i32) if isinstance(v, int) else v)
            span = arith.emit(cx, "max", [arith.emit(cx, "sub", [i32(stop), i32(start)], T.i32),
                                          make_const(0, T.i32)], T.i32)
        if step is None:
            length = span
        elif isinstance(span, int):
            length = (span + step - 1) // step
        else:
            length = arith.emit(cx, "div", [arith.emit(cx, "add", [span, make_const(
                step - 1, T.i32)], T.i32), make_const(step, T.i32)], T.i32)
    if view.strides is not None:                 # a strided piece sliced again
        strides = (view.strides[0] * (step or 1),)
    else:
        strides = None if step is None else (step,)
    return ArrayView(base, view.elem, (length,), view.space, view.root, strides)
