"""What an expression evaluates to while lowering, and compile-time constant arithmetic.

A lowered expression is one of:
* a Python `bool`/`int`/`float`: a compile-time constant that promotes like a NumPy-2 *weak*
  Python literal (literals, constexprs, module constants, static_range indices);
* an `ir.Value` (Instr, BlockArg, Param, Const): a runtime scalar; it is strong unless it sits
  in the builder's `weak` set (a variable that was only ever assigned Python literals);
* an `ArrayView`, a Python tuple of values, or another compile-time object (module, device
  function, scalar type, DSL intrinsic marker, str).
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as T
from ..ir.core import Const

PY_SCALARS = (bool, int, float)


def is_const(v) -> bool:
    return isinstance(v, PY_SCALARS)


class ArrayView:
    """An array inside a kernel: base pointer (IR value), element type, shape, address space.

    shape entries are IR values (i32) or Python ints; `None` for the unknown length of dynamic
    shared memory.  `root` names the kernel parameter it points into (for written_params).
    `strides` is None for a C-contiguous array (the plain, stride-free addressing), else one
    element stride per dimension: a Python int or an i64 IR value (frontend/views.py).
    """
    __slots__ = ("base", "elem", "shape", "space", "root", "strides")

    def __init__(self, base, elem: T.ScalarType, shape: tuple, space: str, root: str | None,
                 strides: tuple | None = None):
        self.base = base
        self.elem = elem
        self.shape = shape
        self.space = space
        self.root = root
        self.strides = strides

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return f"<array {self.elem.name}{list(self.shape)} in {self.space}>"


class TupleVar:
    """Marks a variable that holds a tuple: its elements live in variables `name.0`, ...
    `depth` is the runtime-loop nesting at its binding: at the same depth (not across a loop's
    back edge) it may be rebound to a tuple of another length, e.g. grown with `t = t + (x,)`
    in an unrolled static_range."""
    __slots__ = ("n", "depth")

    def __init__(self, n: int, depth: int = 0):
        self.n = n
        self.depth = depth


def wrap_int(value: int, t: T.ScalarType) -> int:
    bits = t.bits
    value &= (1 << bits) - 1
    if t.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def const_value(value, t: T.ScalarType):
    """Convert a Python constant to the exact value `t` holds, with `cvt` semantics."""
    if t.is_bool:
        return bool(value)
    if t is T.bf16:
        return T.bf16_value(T.bf16_bits(float(value)))
    if t.is_float:
        return float(t.dtype.type(float(value))) if not isinstance(value, bool) else float(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            info = np.iinfo(t.dtype)
            return int(info.max) if value > 0 else int(info.min)
        info = np.iinfo(t.dtype)
        return max(int(info.min), min(int(info.max), int(value)))
    return wrap_int(int(value), t)


def make_const(value, t: T.ScalarType) -> Const:
    return Const(t, const_value(value, t))


class TypeAcc:
    """Accumulates the types assigned to one variable (one type per local)."""
    __slots__ = ("strong", "weak")

    def __init__(self):
        self.strong: T.ScalarType | None = None
        self.weak: T.ScalarType | None = None     # the default type of the weak values

    def add(self, t: T.ScalarType, weak: bool) -> None:
        if weak:
            self.weak = t if self.weak is None else weak_join(self.weak, t)
        else:
            self.strong = t if self.strong is None else T.promote(self.strong, t)

    def final(self) -> tuple[T.ScalarType, bool]:
        if self.strong is None:
            return (self.weak or T.i32), True
        if self.weak is None:
            return self.strong, False
        try:
            return T.promote_weak(self.strong, sample_literal(self.weak)), False
        except OverflowError:
            return T.promote(self.strong, self.weak), False


def sample_literal(t: T.ScalarType):
    """A Python literal of the kind a weak value of default type `t` stands for."""
    if t.is_bool:
        return False
    if t.is_float:
        return 0.0
    return 0


def weak_join(a: T.ScalarType, b: T.ScalarType) -> T.ScalarType:
    """Default type of two weak (Python-literal-like) values combined: int < float, widest."""
    if a.is_float or b.is_float:
        return T.f32
    if a.is_bool and b.is_bool:
        return T.bool_
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    return a if a.bits >= b.bits else b
