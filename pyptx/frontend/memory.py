"""Arrays inside kernels: parameters, shared/local allocations, element addresses, loads, stores.

Offsets are 64-bit: a 1-D index stays i32 (the `gep` widens it at the address), an n-d index is
linearised in i64 so that arrays of more than 2**31 elements work - except in shared memory,
whose arrays are far smaller and whose addresses are 32-bit: there it is linearised in i32.
"""
from __future__ import annotations

import math

from .. import types as T
from ..ir.core import Const, MemDecl, Param
from .arith import convert, convert_literal, describe, emit, type_of
from .values import PY_SCALARS, ArrayView, make_const


def array_param(name: str, atype: T.ArrayType, params: list) -> ArrayView:
    """`x: f32[:, :]` -> Params x (ptr.global<f32>), x_shape0, x_shape1 and the view.

    The strided specialisation (layout 'A': a non-contiguous launch argument) adds x_stride0,
    x_stride1 (i64, in elements, any sign) after the sizes; its view carries them as its
    strides, so indexing and slicing it is the code of an in-kernel strided view (views.py).
    A contiguous parameter's list and code are unchanged."""
    base = Param(name, T.PtrType("global", _slot(atype.dtype)), len(params))
    params.append(base)
    shape = []
    for d in range(atype.ndim):
        p = Param(f"{name}_shape{d}", T.i32, len(params))
        params.append(p)
        shape.append(p)
    strides = None
    if atype.layout != "C":
        strides = []
        for d in range(atype.ndim):
            p = Param(f"{name}_stride{d}", T.i64, len(params))
            params.append(p)
            strides.append(p)
        strides = tuple(strides)
    return ArrayView(base, atype.dtype, tuple(shape), "global", name, strides)


def _slot(elem: T.ScalarType) -> T.ScalarType:
    """The pointer element type of an array of `elem` (c64 arrays count 8-byte slots)."""
    return T.u64 if elem is T.c64 else elem


class BoundView:
    """`a.view` before it is called."""
    __slots__ = ("array",)

    def __init__(self, array: ArrayView):
        self.array = array


def attribute(cx, view: ArrayView, attr: str):
    if attr == "shape":
        if any(s is None for s in view.shape):
            raise cx.err("dynamic shared memory has no known shape; pass its length as a "
                         "kernel parameter")
        return tuple(view.shape)
    if attr == "size":                     # numpy's a.size: the product of the shape (i32)
        if any(s is None for s in view.shape):
            raise cx.err("dynamic shared memory has no known size; pass its length as a "
                         "kernel parameter")
        size = 1
        for s in view.shape:
            size = size * s if isinstance(s, int) and isinstance(size, int) else \
                emit(cx, "mul", [convert(cx, size, T.i32), s if not isinstance(s, int)
                                 else make_const(s, T.i32)], T.i32)
        return size
    if attr == "ndim":
        return view.ndim
    if attr == "dtype":
        return view.elem
    if attr == "view":
        return BoundView(view)
    raise cx.err(f"arrays in kernels have no '.{attr}'; use .shape, .size, .ndim, .dtype or "
                 f".view(type)")


def as_dtype(cx, v, what: str) -> T.ScalarType:
    if isinstance(v, T.ScalarType):
        return v
    raise cx.err(f"{what} must be a pyptx scalar type such as f32 or i32, got "
                     f"{describe(v)}")


def reinterpret(cx, view: ArrayView, dtype: T.ScalarType) -> ArrayView:
    """numpy's `a.view(dtype)`: same bytes, the last dimension rescaled."""
    if dtype.is_bool or view.elem.is_bool:
        raise cx.err("view() to or from bool_ is not supported; use u8")
    old, new = view.elem.mem_bytes, dtype.mem_bytes
    if old != new and view.strides is not None:
        raise cx.err(f"view({dtype.name}) of a strided view would change its element size; "
                     f"reinterpret the whole array first, then slice it")
    base = emit(cx, "bitcast", [view.base], T.PtrType(view.space, dtype))
    shape = list(view.shape)
    last = shape[-1]
    if old != new and last is not None:
        if isinstance(last, int):
            if (last * old) % new:
                raise cx.err(f"view({dtype.name}): the last dimension ({last} x {old} bytes) is "
                             f"not a multiple of {new} bytes; make it a multiple, e.g. "
                             f"{-(-last * old // new) * new // old} elements")
            shape[-1] = last * old // new
        elif old > new:
            shape[-1] = emit(cx, "mul", [last, make_const(old // new, T.i32)], T.i32)
        else:
            bytes_ = emit(cx, "mul", [last, make_const(old, T.i32)], T.i32)
            shape[-1] = emit(cx, "div", [bytes_, make_const(new, T.i32)], T.i32)
    return ArrayView(base, dtype, tuple(shape), view.space, view.root, view.strides)


def _static_shape(cx, shape) -> tuple[int, ...]:
    dims = shape if isinstance(shape, tuple) else (shape,)
    out = []
    for d in dims:
        if isinstance(d, Const) and isinstance(d.value, int) and not isinstance(d.value, bool):
            d = d.value
        if not isinstance(d, int) or isinstance(d, bool):
            raise cx.err("the shape of a shared/local array must be an int or a tuple of "
                         "compile-time ints (literals or pyptx.constexpr parameters), e.g. "
                         "pyptx.shared.array((16, 16), f32)")
        if d <= 0:
            raise cx.err(f"array dimensions must be positive, got {d}; use a size of 1 or more")
        out.append(d)
    if not 1 <= len(out) <= 3:
        raise cx.err("shared/local arrays have 1 to 3 dimensions; use e.g. "
                     "pyptx.shared.array((16, 16), f32)")
    return tuple(out)


def allocate(cx, space: str, shape, dtype) -> ArrayView:
    """`pyptx.shared.array(shape, dtype)` / `pyptx.local.array(shape, dtype)`."""
    if space == "shared" and type(shape) is int and shape == 0:
        return dynamic_shared(cx, dtype)          # Numba's idiom: shared.array(0, dtype)
    dims = _static_shape(cx, shape)
    elem = as_dtype(cx, dtype, "the dtype")
    count = math.prod(dims)
    decls = cx.fn.shared if space == "shared" else cx.fn.locals
    name = f"{'smem' if space == 'shared' else 'lmem'}{len(decls)}"
    decls.append(MemDecl(name, _slot(elem), count, max(16, elem.mem_bytes)))
    base = emit(cx, "addr", [], T.PtrType(space, _slot(elem)), space=space, symbol=name)
    return ArrayView(base, elem, dims, space, None)


def dynamic_shared(cx, dtype) -> ArrayView:
    elem = as_dtype(cx, dtype, "the dtype")
    cx.fn.dynamic_shared = True
    base = emit(cx, "addr", [], T.PtrType("shared", _slot(elem)), space="shared",
                symbol="__dynamic_shared")
    return ArrayView(base, elem, (None,), "shared", None)


# ---- indexing ---------------------------------------------------------------------------------

def _index_scalar(cx, i, wide: bool):
    if isinstance(i, PY_SCALARS):
        if isinstance(i, (bool, float)):
            raise cx.err(f"array index must be an integer, got {i!r}; write an int, e.g. "
                         f"a[{int(i)}], or convert with i32(x)")
        if wide or not -2**31 <= i < 2**31:
            return make_const(i, T.i64)
        return make_const(i, T.i32)
    t, _ = type_of(cx, i)
    if not t.is_int:
        raise cx.err(f"array index must be an integer, got {t.name}; convert it with i32(x)")
    if wide or t.bits == 64 or t == T.u32:
        return convert(cx, i, T.i64)
    return convert(cx, i, T.i32)


def element_ptr(cx, view: ArrayView, index):
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != view.ndim:
        raise cx.err(f"this array has {view.ndim} dimension(s) but {len(idx)} index(es) were "
                     f"given; write a[{', '.join('ijk'[:view.ndim])}]")
    if view.strides is not None:
        return _strided_ptr(cx, view, idx)
    if view.ndim == 1:
        return emit(cx, "gep", [view.base, _index_scalar(cx, idx[0], False)], view.base.type)
    if all(isinstance(i, int) for i in idx) and all(isinstance(s, int) for s in view.shape):
        lin = 0
        for i, s in zip(idx, view.shape):
            lin = lin * s + i
        return emit(cx, "gep", [view.base, make_const(lin, T.i64)], view.base.type)
    # shared arrays are smaller than 2**31 bytes: their in-bounds flat index fits i32, and the
    # backend addresses them in 32 bits anyway
    shared = view.space == "shared"
    lt = T.i32 if shared else T.i64

    def index(i):
        v = _index_scalar(cx, i, not shared)
        if shared and v.type != T.i32:          # an i64/u32 index: truncated, wraps like the address
            v = make_const(_wrap32(v.value), T.i32) if isinstance(v, Const) else \
                convert(cx, v, T.i32)
        return v
    lin = index(idx[0])
    for i, s in zip(idx[1:], view.shape[1:]):
        lin = emit(cx, "mul", [lin, convert(cx, s, lt)], lt)
        lin = emit(cx, "add", [lin, index(i)], lt)
    return emit(cx, "gep", [view.base, lin], view.base.type)


def _wrap32(v: int) -> int:
    return (int(v) + (1 << 31)) % (1 << 32) - (1 << 31)


def _strided_ptr(cx, view: ArrayView, idx):
    """`base + sum(i_d * stride_d)`: i64 unless the view is 1-D with a compile-time stride
    (then an i32 index times the stride stays inside the parent axis, as `a[i]` does); a stride
    of 1 costs no multiply."""
    strides = view.strides
    if all(type(i) is int for i in idx) and all(isinstance(s, int) for s in strides):
        lin = sum(i * s for i, s in zip(idx, strides))
        return view.base if lin == 0 else emit(cx, "gep", [view.base, make_const(lin, T.i64)],
                                               view.base.type)
    wide = view.ndim > 1 or not isinstance(strides[0], int)
    lin = None
    for i, s in zip(idx, strides):
        term = _index_scalar(cx, i, wide)
        if not (isinstance(s, int) and s == 1):
            term = emit(cx, "mul", [term, convert(cx, s, term.type)], term.type)
        lin = term if lin is None else emit(cx, "add", [lin, term], T.i64)
    return emit(cx, "gep", [view.base, lin], view.base.type)


def inner_contiguous(cx, view: ArrayView, what: str) -> None:
    """Vector and tensor-core accesses read consecutive elements along the last axis."""
    if view.strides is not None and not (isinstance(view.strides[-1], int)
                                         and view.strides[-1] == 1):
        raise cx.err(f"{what} needs consecutive elements along the last axis, but this view "
                     f"is strided there (a column, a slice with a step, or an array argument "
                     f"launched non-contiguous); index its elements one by one, or take the "
                     f"vector from a contiguous array")


def load(cx, view: ArrayView, ptr):
    if view.elem is T.c64:
        from . import complex64
        return complex64.load(cx, ptr)
    return emit(cx, "load", [ptr], view.elem)


def store(cx, view: ArrayView, ptr, value) -> None:
    if view.elem is T.c64:
        from . import complex64
        complex64.store(cx, ptr, value)
        mark_written(cx, view)
        return
    from .complex64 import is_complex
    if is_complex(value):        # a Complex is a tuple inside the frontend: say what it is
        name = view.elem.name
        raise cx.err(f"cannot store a complex value into {'an' if name[0] in 'fi' else 'a'} "
                     f"{name} array; store its parts (z.real, z.imag, each a number) or "
                     f"abs(z), or make the array c64 (numpy complex64) to store the complex "
                     f"value itself")
    if isinstance(value, (tuple, ArrayView)) or not (
            isinstance(value, PY_SCALARS) or isinstance(getattr(value, "type", None), T.ScalarType)):
        raise cx.err(f"only numbers can be stored into an array element, got {describe(value)}; "
                     f"store a number, e.g. out[i] = x[i] * 2.0")
    v = convert_literal(cx, value, view.elem)
    emit(cx, "store", [ptr, v], None)
    mark_written(cx, view)


def mark_written(cx, view: ArrayView) -> None:
    if view.space == "const":
        raise cx.err("a constant array (pyptx.const_array / cuda.const.array_like) is "
                     "read-only; copy it into a local or shared array to change it")
    if view.root is not None:
        cx.written.add(view.root)
