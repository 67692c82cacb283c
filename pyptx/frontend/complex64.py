"""Complex64 scalars in kernels: a `Complex` is a pair of f32 values (real, imag) that lives only
in the frontend; the IR and the PTX never see a complex type.

Arithmetic follows numpy's complex64: `+ - *` componentwise formulas in f32; `/` is numpy's
Smith's algorithm (scale by the larger component of the divisor, so `|c|**2` never overflows,
as C99 Annex G recommends); `abs` is a scaled hypot (max * sqrt(1 + (min/max)**2), inf if either part is
inf).  A real operand of any type converts to f32 (numpy would widen f64 + c64 to c128; pyptx has
no c128).  Arrays of `c64` (numpy complex64) hold (re, im) f32 pairs: the array's pointer counts
8-byte elements and each access is two f32 loads/stores.
"""
from __future__ import annotations

from .. import types as T
from . import arith
from .values import PY_SCALARS, TupleVar, make_const

c64 = T.c64
#: what a c64 array's pointer counts in (8-byte elements); loads go through f32 pointers
SLOT = T.u64


class Complex(tuple):
    """(re, im): two f32 IR values."""
    __slots__ = ()

    def __new__(cls, re, im):
        return tuple.__new__(cls, (re, im))

    @property
    def re(self):
        return self[0]

    @property
    def im(self):
        return self[1]


class ComplexVar(TupleVar):
    """A variable holding a Complex: its parts live in `name.0`, `name.1`."""
    __slots__ = ()


class BoundConjugate:
    """`z.conjugate` before it is called."""
    __slots__ = ("z",)

    def __init__(self, z):
        self.z = z


def is_complex(v) -> bool:
    return isinstance(v, (Complex, complex))


def _f32(cx, v):
    if isinstance(v, PY_SCALARS):
        return make_const(float(v), T.f32)
    t, _ = arith.type_of(cx, v)
    if t.is_bool:
        raise cx.err("a boolean cannot be used as a complex number; convert it first, f32(b)")
    return arith.convert(cx, v, T.f32)


def make(cx, re, im=0.0) -> Complex:
    return Complex(_f32(cx, re), _f32(cx, im))


def as_complex(cx, v) -> Complex:
    if isinstance(v, Complex):
        return v
    if isinstance(v, complex):
        return make(cx, v.real, v.imag)
    return make(cx, v, 0.0)


def _e(cx, op, *xs):
    return arith.emit(cx, op, list(xs), T.f32)


def binop(cx, op: str, a, b):
    if op == "pow":
        return _power(cx, a, b)
    x, y = as_complex(cx, a), as_complex(cx, b)
    if op in ("add", "sub"):
        return Complex(_e(cx, op, x.re, y.re), _e(cx, op, x.im, y.im))
    if op == "mul":
        return Complex(_e(cx, "sub", _e(cx, "mul", x.re, y.re), _e(cx, "mul", x.im, y.im)),
                       _e(cx, "add", _e(cx, "mul", x.re, y.im), _e(cx, "mul", x.im, y.re)))
    if op == "truediv":
        return _div(cx, x, y)
    raise cx.err(f"'{arith.SYMBOL[op]}' is not defined for complex numbers; use + - * / and "
                 f"abs(z), z.real, z.imag, z.conjugate()")


def _div(cx, x, y):
    """numpy's complex64 division (Smith's algorithm): with p the larger-magnitude part of the
    divisor and q the other, r = q / p and scl = 1 / (p + q*r), so |c|**2 + |d|**2 is never
    formed (no overflow or underflow on the way); a zero divisor gives numpy's inf / nan."""
    a, b, c, d = x.re, x.im, y.re, y.im
    sel = lambda cond, u, v: arith.emit(cx, "select", [cond, u, v], T.f32)
    ac, ad = _e(cx, "abs", c), _e(cx, "abs", d)
    use_c = arith.emit(cx, "cmp", [ac, ad], T.bool_, pred="ge")
    p, q = sel(use_c, c, d), sel(use_c, d, c)
    r = _e(cx, "div", q, p)
    scl = _e(cx, "div", make_const(1.0, T.f32), _e(cx, "add", p, _e(cx, "mul", q, r)))
    x1, x2 = sel(use_c, a, b), sel(use_c, b, a)          # re = (x1 + x2*r) * scl
    re = _e(cx, "mul", _e(cx, "add", x1, _e(cx, "mul", x2, r)), scl)
    im = _e(cx, "mul", _e(cx, "sub", x2, _e(cx, "mul", x1, r)), scl)   # branch 1: b - a*r
    im = sel(use_c, im, _e(cx, "neg", im))               # branch 2: b*r - a = -(a - b*r)
    zero = arith.emit(cx, "cmp", [ac, make_const(0.0, T.f32)], T.bool_, pred="eq")
    zero = arith.emit(cx, "and", [zero, arith.emit(cx, "cmp", [ad, make_const(0.0, T.f32)],
                                                  T.bool_, pred="eq")], T.bool_)
    return Complex(sel(zero, _e(cx, "div", a, ac), re), sel(zero, _e(cx, "div", b, ac), im))


def _power(cx, a, b):
    if not isinstance(a, (Complex, complex)) or isinstance(b, bool) or \
            not isinstance(b, int) or not 1 <= b <= 64:
        raise cx.err("'**' on complex numbers needs a positive integer literal exponent "
                     "(z ** 2); write other powers with * and /")
    z = as_complex(cx, a)
    result, base, n = None, z, b
    while n:
        if n & 1:
            result = base if result is None else binop(cx, "mul", result, base)
        n >>= 1
        if n:
            base = binop(cx, "mul", base, base)
    return result


def unary(cx, op: str, v):
    z = as_complex(cx, v)
    if op == "pos":
        return z
    if op == "neg":
        return Complex(_e(cx, "neg", z.re), _e(cx, "neg", z.im))
    raise cx.err(f"this operator is not defined for complex numbers")


def absolute(cx, v):
    """|z| as numpy's complex64 abs: hypot without overflow or needless underflow."""
    z = as_complex(cx, v)
    ax, ay = _e(cx, "abs", z.re), _e(cx, "abs", z.im)
    big, small = _e(cx, "max", ax, ay), _e(cx, "min", ax, ay)
    ratio = _e(cx, "div", small, big)
    mag = _e(cx, "mul", big, _e(cx, "sqrt", _e(cx, "add", make_const(1.0, T.f32),
                                              _e(cx, "mul", ratio, ratio))))
    inf = make_const(float("inf"), T.f32)
    zero = arith.emit(cx, "cmp", [big, make_const(0.0, T.f32)], T.bool_, pred="eq")
    is_inf = arith.emit(cx, "cmp", [big, inf], T.bool_, pred="eq")
    nan = arith.emit(cx, "or", [arith.emit(cx, "isnan", [z.re], T.bool_),
                                arith.emit(cx, "isnan", [z.im], T.bool_)], T.bool_)
    r = arith.emit(cx, "select", [zero, make_const(0.0, T.f32), mag], T.f32)
    r = arith.emit(cx, "select", [nan, make_const(float("nan"), T.f32), r], T.f32)
    return arith.emit(cx, "select", [is_inf, inf, r], T.f32)


def attribute(cx, z, attr: str):
    z = as_complex(cx, z)
    if attr == "real":
        return z.re
    if attr == "imag":
        return z.im
    if attr == "conjugate":
        return BoundConjugate(z)
    raise cx.err(f"complex numbers have .real, .imag and .conjugate(), not '.{attr}'")


def conjugate(cx, bound: BoundConjugate, args, kwargs):
    if args or kwargs:
        raise cx.err("z.conjugate() takes no arguments")
    return Complex(bound.z.re, _e(cx, "neg", bound.z.im))


def compare(cx, pred: str, a, b):
    if pred not in ("eq", "ne"):
        raise cx.err("complex numbers are not ordered; compare abs(z) or z.real")
    x, y = as_complex(cx, a), as_complex(cx, b)
    same = arith.emit(cx, "and", [arith.emit(cx, "cmp", [x.re, y.re], T.bool_, pred="eq"),
                                  arith.emit(cx, "cmp", [x.im, y.im], T.bool_, pred="eq")],
                      T.bool_)
    return same if pred == "eq" else arith.emit(cx, "not", [same], T.bool_)


# ---- arrays -----------------------------------------------------------------------------------

def load(cx, ptr) -> Complex:
    p = arith.emit(cx, "bitcast", [ptr], T.PtrType(ptr.type.space, T.f32))
    q = arith.emit(cx, "gep", [p, make_const(1, T.i32)], p.type)
    return Complex(arith.emit(cx, "load", [p], T.f32), arith.emit(cx, "load", [q], T.f32))


def store(cx, ptr, value) -> None:
    z = as_complex(cx, value)
    p = arith.emit(cx, "bitcast", [ptr], T.PtrType(ptr.type.space, T.f32))
    q = arith.emit(cx, "gep", [p, make_const(1, T.i32)], p.type)
    arith.emit(cx, "store", [p, z.re], None)
    arith.emit(cx, "store", [q, z.im], None)
