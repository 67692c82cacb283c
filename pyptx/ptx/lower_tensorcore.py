"""Lowerings of the tensor-core and async-copy ops: `mma`, `ldmatrix`, `part`, `cp_async`,
`cp_async_wait` (sm_80+; the fragment layouts are drawn in docs/tensor-cores.md).

`mma` and `ldmatrix` produce several registers.  The IR gives the op element 0 and a `part` op
per further element; here the op's registers are allocated once (`multi_regs`) and each `part`
is a plain `mov` from its register, which ptxas coalesces away.
"""
from __future__ import annotations

from .emitter import lowers

#: op -> (number of result registers for the instr, register prefix)
_SHAPES = {"mma": (lambda ins: 4, "%f"), "ldmatrix": (lambda ins: int(ins.attrs["count"]), "%r")}


def multi_regs(em, m) -> list[str]:
    """The result registers of the multi-register op `m` (element 0 is `m`'s own register)."""
    cache = em.__dict__.setdefault("multi", {})
    regs = cache.get(m)
    if regs is None:
        count, prefix = _SHAPES[m.op]
        regs = cache[m] = [em.reg(m)] + [em.new_reg(prefix) for _ in range(count(m) - 1)]
    return regs


@lowers("part")
def lower_part(em, ins) -> None:
    m = ins.operands[0]
    if m.op not in _SHAPES:
        raise em.error(f"part of a '{m.op}' (only mma and ldmatrix have parts)", ins)
    regs = multi_regs(em, m)
    k = int(ins.attrs["index"])
    if not 0 < k < len(regs):
        raise em.error(f"part index {k} out of range for {m.op}", ins)
    em.i(f"mov.{'f32' if regs[k].startswith('%f') else 'b32'} {em.dst(ins)}, {regs[k]}")


def _vec(regs) -> str:
    return "{" + ", ".join(regs) + "}"


@lowers("mma")
def lower_mma(em, ins) -> None:
    em.need("mma", ins)
    atype = ins.attrs["atype"]
    if atype not in ("f16", "bf16"):
        raise em.error(f"mma: unsupported input type {atype!r}", ins)
    ops = [em.reg(v) for v in ins.operands]
    em.i(f"mma.sync.aligned.m16n8k16.row.col.f32.{atype}.{atype}.f32 {_vec(multi_regs(em, ins))}, "
         f"{_vec(ops[0:4])}, {_vec(ops[4:6])}, {_vec(ops[6:10])}")


@lowers("ldmatrix")
def lower_ldmatrix(em, ins) -> None:
    em.need("ldmatrix", ins)
    count = int(ins.attrs["count"])
    trans = ".trans" if ins.attrs.get("trans") else ""
    em.i(f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {_vec(multi_regs(em, ins))}, "
         f"[{em.reg(ins.operands[0])}]")


@lowers("cp_async")
def lower_cp_async(em, ins) -> None:
    em.need("cp.async", ins)
    n = int(ins.attrs["nbytes"])
    dst, src = ins.operands
    cache = "cg" if n == 16 else "ca"          # .cg (L2 only) exists for 16-byte copies alone
    em.i(f"cp.async.{cache}.shared.global [{em.reg(dst)}], [{em.reg(src)}], {n}")


@lowers("cp_async_wait")
def lower_cp_async_wait(em, ins) -> None:
    em.need("cp.async", ins)
    em.i("cp.async.commit_group")
    em.i(f"cp.async.wait_group {int(ins.attrs['n'])}")
