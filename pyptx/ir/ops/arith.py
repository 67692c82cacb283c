"""Arithmetic, floating-point functions, comparison, selection and conversions.

T is the instruction's result type; unless stated otherwise operands have type T.  Sub-32-bit
integers wrap at their own width after every op (i8 add wraps at 8 bits); f16 arithmetic is real
f16, correctly rounded.
"""
from __future__ import annotations

from ...types import PtrType, ScalarType, bool_
from . import numeric as N
from .record import family, is_float, is_int, is_num, rule

op = family("arith")

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
APPROX_FNS = ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt", "rcp", "sqrt")

_num2 = rule(lambda T, a: is_num(T) and a == [T, T],
             "operands and result must be one int/float type")
_num1 = rule(lambda T, a: is_num(T) and a == [T], "operand must have the result's int/float type")
_float1 = rule(lambda T, a: is_float(T) and a == [T], "needs a float operand of the result type")


def _int2(name):
    return rule(lambda T, a: is_int(T) and a == [T, T], f"{name} needs int operands of the "
                "result type")


def _arith(name, operands, doc, check=_num2, **kw):
    """An op whose fold is chosen by result type (int / bool logic / float)."""
    return op(name, operands, doc, check=check, fold=N.typed(name), **kw)


def _check_approx(c, ins, T, a):
    c.need(T == a[0] and is_float(T) and T.name == "f32", "approx is f32 -> f32")
    c.need(ins.attrs.get("fn") in APPROX_FNS, f"approx fn must be one of {APPROX_FNS}")


def _check_cmp(c, ins, T, a):
    c.need(T == bool_ and a[0] == a[1] and a[0] is not None, "cmp: equal operand types, "
           "bool_ result")
    c.need(ins.attrs.get("pred") in CMP_PREDICATES, f"cmp pred must be one of {CMP_PREDICATES}")


def _width(t):
    if isinstance(t, PtrType):
        return 64
    if isinstance(t, ScalarType):
        return t.bits
    return None


_F16_MINMAX = ("minmax.f16", 70, 80)
#: what the backend adds around an op: f16/bf16 computed in f32 (widen, round back; bf16 below
#: sm_80 rounds on the bits) and 8-bit results re-extended
_W = ("cvt", "mov", "shl", "bfe", "add", "shr", "or", "setp", "selp")

OPS = [
    _arith("add", "a, b", "a + b (float: IEEE round-to-nearest; int: wraps)",
           commutative="all", ptx=("add", *_W)),
    _arith("sub", "a, b", "a - b", ptx=("sub", *_W)),
    _arith("mul", "a, b", "a * b (float: .rn; int: low bits, wraps)", commutative="all",
           ptx=("mul", *_W)),
    _arith("div", "a, b",
           "float: IEEE a / b (.rn); f32 with attribute `full` (fastmath): `div.full.f32`, "
           "within 2 ulp.  int: C truncating division; b == 0 or (MIN / -1) give an "
           "unspecified value - the frontend guards those to implement Python `//`.",
           ptx=("div", *_W)),
    _arith("rem", "a, b", "int only: C remainder (sign of a); b == 0 unspecified",
           check=_int2("rem"), ptx=("rem", *_W)),
    _arith("floordiv", "a, b",
           "int only: Python/numpy floor division a // b, total: a // 0 == 0, MIN // -1 == MIN.  "
           "The frontend's `//`; passes/strength.py expands it (shifts for powers of two)",
           check=_int2("floordiv"),
           expanded_by="passes/strength.py"),
    _arith("floormod", "a, b",
           "int only: Python/numpy a % b (sign of b), total: a % 0 == 0.  The frontend's `%`; "
           "expanded by passes/strength.py before the backend", check=_int2("floormod"),
           expanded_by="passes/strength.py"),
    _arith("neg", "a", "-a (int wraps)", check=_num1, features=(("neg.f16", 60, 53),),
           ptx=("neg", *_W)),
    _arith("abs", "a", "|a| (int: MIN stays MIN)", check=_num1, features=(("abs.f16", 65, 53),),
           ptx=("abs", *_W)),
    _arith("min", "a, b", "min; float: if one operand is NaN the other is returned",
           commutative="int", features=(_F16_MINMAX,), ptx=("min", *_W)),
    _arith("max", "a, b", "max; float NaN rule as min", commutative="int",
           features=(_F16_MINMAX,), ptx=("max", *_W)),
    _arith("fma", "a, b, c", "float only: a * b + c with a single rounding (.rn)",
           check=rule(lambda T, a: is_float(T) and a == [T, T, T],
                      "fma needs three floats of the result type"),
           ptx=("fma", *_W)),
    _arith("mulhi", "a, b", "int 32/64 only: high half of the full product", commutative="all",
           check=rule(lambda T, a: is_int(T, (32, 64)) and a == [T, T],
                      "mulhi needs 32/64-bit int operands"), ptx=("mul",)),
    op("mulwide", "a, b",
       "a, b are i32 (or u32); T is i64 (u64): the exact 64-bit product", commutative="all",
       check=rule(lambda T, a: is_int(T, (64,)) and a[0] == a[1] and is_int(a[0], (32,))
                  and a[0].kind == T.kind, "mulwide: i32/u32 operands, i64/u64 result"),
       fold=N.fold_mulwide, ptx=("mul",)),
    # ---- floating-point functions (T float; f16 operands are computed in f32 by the frontend) --
    _arith("sqrt", "a", "correctly rounded square root (.rn)", check=_float1,
           ptx=("sqrt", *_W)),
    _arith("rcp", "a", "correctly rounded 1/a (.rn)", check=_float1,
           ptx=("rcp", *_W)),
    _arith("floor", "a", "round toward -inf to an integral float", check=_float1,
           ptx=_W),
    _arith("ceil", "a", "round toward +inf to an integral float", check=_float1,
           ptx=_W),
    _arith("trunc", "a", "round toward 0 to an integral float", check=_float1,
           ptx=_W),
    _arith("rint", "a", "round to nearest even to an integral float", check=_float1,
           ptx=_W),
    op("approx", "a",
       "attrs fn in {'ex2','lg2','sin','cos','tanh','rsqrt','rcp','sqrt'}: the PTX "
       "`<fn>.approx.f32` instruction (T f32), with its PTX-ISA error bound.  Only the math "
       "library's implementations and `fast_*` names use it.  Never folded (hardware specific)",
       check=_check_approx, features=(("tanh.approx.f32", 70, 75),), ptx=APPROX_FNS),
    # ---- comparison and selection --------------------------------------------------------------
    op("cmp", "a, b",
       "T bool_.  attrs pred in {'eq','ne','lt','le','gt','ge'}.  Floats: every predicate is "
       "false when an operand is NaN except 'ne', which is true (Python semantics).",
       check=_check_cmp, fold=N.fold_cmp, ptx=("setp", "not", "and", "xor", *_W)),
    op("select", "c, a, b", "c is bool_: a if c else b (both evaluated)",
       check=rule(lambda T, a: a[0] == bool_ and a[1] == T and a[2] == T,
                  "select: bool_ condition, both values of the result type"),
       fold=N.fold_select, ptx=("selp", "and", "not", "or")),
    op("isnan", "a", "float a; T bool_",
       check=rule(lambda T, a: T == bool_ and is_float(a[0]),
                  "isnan: float operand, bool_ result"),
       fold=N.fold_isnan, ptx=("setp", *_W)),
    # ---- conversions ----------------------------------------------------------------------------
    op("cvt", "a",
       "convert a to T.  int->int: wrap/sign-extend like numpy astype.  float->int: round "
       "toward zero, saturate to T's range, NaN -> 0 (PTX cvt.rzi).  int->float and "
       "float->float: round to nearest even.  bool->number: 0/1.  number->bool: a != 0.",
       check=rule(lambda T, a: isinstance(T, ScalarType) and isinstance(a[0], ScalarType),
                  "cvt converts between scalar types"),
       fold=N.fold_cvt, ptx=("and", *_W)),
    op("bitcast", "a", "reinterpret the bits of a as T (same width)",
       check=rule(lambda T, a: _width(T) is not None and _width(T) == _width(a[0]),
                  "bitcast needs types of the same width"),
       fold=N.fold_bitcast, ptx=("mov", "cvt")),
]
