"""Bitwise ops (T int or bool) and bit counting."""
from __future__ import annotations

from ...types import ScalarType, u32
from . import numeric as N
from .record import family, is_i32ish, is_int, rule

op = family("bits")


def _logic(name, operands, doc, n, **kw):
    """and / or / xor / not: int or bool operands of the result type."""
    msg = ("bitwise ops need int/bool operands of the result type" if n == 2 else
           "not needs an int/bool operand of the result type")
    return op(name, operands, doc, fold=N.typed(name), ptx=(name, "cvt"),
              check=rule(lambda T, a: isinstance(T, ScalarType) and not T.is_float
                         and a == [T] * n, msg), **kw)


def _shift(name, doc):
    return op(name, "a, n", doc, fold=N.typed(name), ptx=(name, "cvt"),
              check=rule(lambda T, a: is_int(T) and a[0] == T and is_i32ish(a[1]),
                         "shifts: value of the result type, 32-bit shift count"))


_count = rule(lambda T, a: T.__class__ is ScalarType and T.name == "i32"
              and is_int(a[0], (32, 64)), "popc/clz: 32/64-bit int operand, i32 result")

OPS = [
    _logic("and", "a, b", "a & b", 2, commutative="all"),
    _logic("or", "a, b", "a | b", 2, commutative="all"),
    _logic("xor", "a, b", "a ^ b", 2, commutative="all"),
    _logic("not", "a", "~a (bool: logical not)", 1),
    _shift("shl", "a << n; n is u32; n >= bits(T) gives 0"),
    _shift("shr", "a >> n; n is u32; arithmetic for signed T, logical for unsigned; n >= bits(T) "
                  "gives 0 or -1 (sign fill)"),
    op("popc", "a", "a: int 32/64; T = i32: number of set bits", check=_count,
       fold=N.fold_bitcount("popc"), ptx=("popc",)),
    op("clz", "a", "a: int 32/64; T = i32: leading zero bits", check=_count,
       fold=N.fold_bitcount("clz"), ptx=("clz",)),
    op("brev", "a", "a: int 32/64; T = type of a: bits reversed", fold=N.typed("brev"),
       check=rule(lambda T, a: is_int(T, (32, 64)) and a == [T],
                  "brev: 32/64-bit int of the result type"), ptx=("brev",)),
    op("dp4a", "a, b, c",
       "T i32 or u32 (= type of c); a, b i32/u32: c + dot of the four bytes of a and b, each "
       "byte signed or unsigned per the operand's type (PTX dp4a)", fold=N.fold_dp4a,
       check=rule(lambda T, a: is_i32ish(T) and a[2] == T and is_i32ish(a[0])
                  and is_i32ish(a[1]), "dp4a: i32/u32 operands, result = type of c"),
       gate=("dp4a", 50, 61), ptx=("dp4a",)),
    op("bfind", "a",
       "a: int 32/64; T u32: the bit position of the most significant non-sign bit (attrs "
       "shiftamt: its distance from the top instead); 0xFFFFFFFF when there is none (PTX bfind)."
       "  Not folded",
       check=rule(lambda T, a: T == u32 and is_int(a[0], (32, 64)),
                  "bfind: 32/64-bit int operand, u32 result"), ptx=("bfind",)),
]
