"""Lowerings of the tensor-core and async-copy ops: `mma`, `ldmatrix`, `pack2`, `cp_async`,
`cp_async_wait` (sm_80+; the fragment layouts are drawn in docs/tensor-cores.md).

`mma` and `ldmatrix` produce several registers: their IR result is a VecType value whose
registers (allocated once, `lower_vector._lanes`) are named by `lane` ops, as for `vload`.
"""
from __future__ import annotations

from .. import types as T
from ..ir.core import Const
from .emitter import lowers
from .lower_memory import _address
from .lower_vector import _lanes


def _vec(regs) -> str:
    return "{" + ", ".join(regs) + "}"


@lowers("mma")
def lower_mma(em, ins) -> None:
    atype = ins.attrs["atype"]
    na = 2 if len(ins.operands) == 7 else 4         # A registers: the int8 m16n8k16 form has 2
    if atype in ("f16", "bf16"):
        form = f"m16n8k16.row.col.f32.{atype}.{atype}.f32"
    elif atype in ("s8", "u8"):            # no .satfinite: the s32 sums wrap modulo 2**32
        form = f"m16n8k{8 * na}.row.col.s32.{atype}.{atype}.s32"
    else:
        raise em.error(f"mma: unsupported input type {atype!r}", ins)
    ops = [em.reg(v) for v in ins.operands]
    nb = na // 2
    em.i(f"mma.sync.aligned.{form} {_vec(_lanes(em, ins))}, "
         f"{_vec(ops[0:na])}, {_vec(ops[na:na + nb])}, {_vec(ops[na + nb:])}")


@lowers("ldmatrix")
def lower_ldmatrix(em, ins) -> None:
    count = int(ins.attrs["count"])
    trans = ".trans" if ins.attrs.get("trans") else ""
    em.i(f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {_vec(_lanes(em, ins))}, "
         f"{_address(em, ins.operands[0], ins)}")


@lowers("cp_async")
def lower_cp_async(em, ins) -> None:
    n = int(ins.attrs["nbytes"])
    dst, src, *fill = ins.operands
    cache = "cg" if n == 16 else "ca"          # .cg (L2 only) exists for 16-byte copies alone
    size = f"{n}"
    if fill and not (isinstance(fill[0], Const) and int(fill[0].value) == n):
        size += f", {em.src(fill[0])}"          # src-size: bytes past it are zero-filled
    em.i(f"cp.async.{cache}.shared.global {_address(em, dst, ins)}, "
         f"{_address(em, src, ins, 'src_offset')}, {size}")


@lowers("cp_async_wait")
def lower_cp_async_wait(em, ins) -> None:
    em.i("cp.async.commit_group")
    em.i(f"cp.async.wait_group {int(ins.attrs['n'])}")


@lowers("pack2")
def lower_pack2(em, ins) -> None:
    """One cvt.rn.{f16x2,bf16x2}.f32 on sm_80+ (F2FP in SASS: one instruction for the word);
    f16 below sm_80: two conversions, widened, shifted and or-ed."""
    dt = ins.attrs["dtype"]
    lo, hi = (em.reg(v) for v in ins.operands)
    d = em.dst(ins)
    if em.sm >= 80 or dt == "bf16":
        em.need("cvt.f16x2.f32", ins)
        em.i(f"cvt.rn.{dt}x2.f32 {d}, {hi}, {lo}")
        return
    words = []
    for x in (lo, hi):
        h, b, w = em.tmp(T.f16), em.tmp(T.u16), em.tmp(T.u32)
        em.i(f"cvt.rn.f16.f32 {h}, {x}")
        em.i(f"mov.b16 {b}, {h}")
        em.i(f"cvt.u32.u16 {w}, {b}")
        words.append(w)
    high = em.tmp(T.u32)
    em.i(f"shl.b32 {high}, {words[1]}, 16")
    em.i(f"or.b32 {d}, {words[0]}, {high}")
