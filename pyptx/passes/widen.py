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

Trade-off, measured over the stdlib with ptxas (docs/benchmarks.md): a product of two
block-uniform values (`row * shape1` with `row = block_idx.x`) that ptxas computed in uniform
registers as a 64 x 64 multiply takes two vector registers as a `mul.wide.s32`, so rope and the
row kernels gain 1-4 registers (all stay within 32, the full-occupancy budget); leaving those
products alone instead costs FlashAttention 3-5 registers (at D=64, causal: 130, past the
128-register step of its 128-thread blocks) and 8-13% of its SASS.  So every such product is
widened.

Runs after address folding, which peels constants out of `mulwide(add(j, K), S)` as it does out
of `mul(cvt(add(j, K)), S)`.
"""
from __future__ import annotations

from .. import types as T
from ..ir.core import Const, Function, Instr

_NARROW = {"i64": T.i32, "u64": T.u32}


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
    for b in fn.blocks:
        for ins in b.instrs:
            op, t = ins.op, ins.type
            if op == "mul" and getattr(t, "name", None) in _NARROW:
                x, y = (_narrow(v, t) for v in ins.operands)
                if x is None or y is None or isinstance(x, Const) and isinstance(y, Const):
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
