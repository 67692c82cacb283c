"""Widening index arithmetic: keep 32-bit index math 32-bit up to the one widening step.

Why: n-d indices are linearised in i64 (arrays may have more than 2**31 elements), so `a[r, c]`
computes `cvt(r) * cvt(shape1)`: a 64 x 64-bit multiply (three IMADs and a register for the sign
word on the GPU), where the product of two sign-extended 32-bit values is exactly PTX
`mul.wide.s32` (one IMAD.WIDE).  And `gep` already sign-extends an i32 index with its own
widening multiply, so an explicit `cvt` in front of it is one instruction and one 64-bit register
too many.  Every rewrite here is exact (no overflow assumption):

    mul(cvt(a: i32) : i64, cvt(b: i32) : i64)  -> mulwide(a, b)
    mul(cvt(a: i32) : i64, K)  (K fits i32)    -> mulwide(a, K)
    (u32 -> u64 alike, zero-extended)
    gep(p, cvt(j: i32) : i64)                  -> gep(p, j)

A product of two block-uniform values (parameters, `block_idx`, `block_dim`, `grid_dim`,
constants and arithmetic on them, e.g. `row * shape1` with `row = block_idx.x`) is left alone:
ptxas computes such a 64-bit product on the uniform datapath, in uniform registers, while a
`mul.wide.s32` gets two vector registers.  Measured with ptxas over the stdlib
(docs/benchmarks.md): widening those too costs decode/paged attention and flash_attention_f32
4-6 registers on sm_80 (32 -> 37/38, past the full-occupancy step) and rope/the row kernels 1-4
on sm_90, for a few % of SASS in FlashAttention.

Runs after address folding, which peels constants out of `mulwide(add(j, K), S)` as it does out
of `mul(cvt(add(j, K)), S)`.
"""
from __future__ import annotations

from .. import types as T
from ..ir.core import Const, Function, Instr, Param

_NARROW = {"i64": T.i32, "u64": T.u32}
#: special registers with one value per block
_UNIFORM_SREGS = frozenset(f"{r}.{d}" for r in ("ctaid", "ntid", "nctaid") for d in "xyz")
#: pure ops whose result is block-uniform when every operand is
_UNIFORM_OPS = frozenset({"add", "sub", "mul", "mulwide", "mulhi", "div", "rem", "floordiv",
                          "floormod", "neg", "abs", "min", "max", "and", "or", "xor", "not",
                          "shl", "shr", "cvt", "bitcast", "select", "cmp"})


def _uniform(v, memo: dict, depth: int = 0) -> bool:
    """True when `v` is provably the same in every thread of a block (conservative: loads,
    block arguments and deep expressions count as varying)."""
    if isinstance(v, (Const, Param)):
        return True
    if not isinstance(v, Instr) or depth > 12:
        return False
    key = id(v)
    if key not in memo:
        if v.op == "sreg":
            memo[key] = v.attrs.get("name") in _UNIFORM_SREGS
        else:
            memo[key] = v.op in _UNIFORM_OPS and all(
                _uniform(o, memo, depth + 1) for o in v.operands)
    return memo[key]


def _narrow(v, wide):
    """The 32-bit value `v` (of type `wide`) extends exactly, or None."""
    nt = _NARROW[wide.name]
    if isinstance(v, Const):
        info = (-(1 << 31), (1 << 31) - 1) if nt is T.i32 else (0, (1 << 32) - 1)
        if isinstance(v.value, int) and info[0] <= v.value <= info[1]:
            return Const(nt, v.value)
        return None
    if isinstance(v, Instr) and v.op == "cvt" and v.operands[0].type == nt:
        return v.operands[0]
    return None


def run(fn: Function) -> bool:
    changed = False
    memo: dict = {}
    for b in fn.blocks:
        for ins in b.instrs:
            op, t = ins.op, ins.type
            if op == "mul" and getattr(t, "name", None) in _NARROW:
                x, y = (_narrow(v, t) for v in ins.operands)
                if x is None or y is None or isinstance(x, Const) and isinstance(y, Const) \
                        or _uniform(x, memo) and _uniform(y, memo):
                    continue
                if isinstance(x, Const):
                    x, y = y, x
                ins.op = "mulwide"
                ins.operands[:] = [x, y]
                changed = True
            elif op == "gep":
                i = ins.operands[1]
                if isinstance(i, Instr) and i.op == "cvt" and i.type.name == "i64" \
                        and i.operands[0].type == T.i32:
                    ins.operands[1] = i.operands[0]
                    changed = True
    return changed
