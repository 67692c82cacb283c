"""Lowerings of the warpgroup-MMA ops: `wgmma`, `wgmma_fence`, `wgmma_commit`, `wgmma_wait`,
`fence_proxy_async` (sm_90a; docs/hopper.md, "Warpgroup MMA").

The accumulator is in-out in PTX: `wgmma ... {d0, ..., dk}, ...` reads C from the registers it
writes D to.  The IR has separate SSA values for the accumulator passed in and the one returned,
so the naive lowering copies C into fresh D registers before each wgmma.  Those copies sit
between `wgmma.fence` and the wgmma, where ptxas must not see non-wgmma writes to accumulator
registers (it serialises the wgmma pipeline and says so), and they cost a mov per register per
K step.  So when every accumulator value passed in is dead after the wgmma (the usual
`acc = wgmma(..., acc)`, a loop-carried block argument or the previous wgmma's lanes), the
result simply takes over their registers: no copy at all, and the loop's back-edge copies
become self-copies, which the emitter drops.  Otherwise (an accumulator still used later, the
same value twice, a constant) the copies are emitted as before.
"""
from __future__ import annotations

from ..ir.core import Const
from .emitter import lowers
from .lower_vector import _lanes


def _live_out(fn) -> dict:
    """block -> the set of values live on exit (block arguments are defined at entry; branch
    arguments are uses at the end of the block that passes them)."""
    gen, kill = {}, {}
    for b in fn.blocks:
        defined = set(b.args)
        used = set()
        for ins in b.instrs:
            for v in ins.operands:
                if v.__class__ is not Const and v not in defined:
                    used.add(v)
            for _, args in ins.succs:
                used.update(v for v in args if v.__class__ is not Const and v not in defined)
            defined.add(ins)
        gen[b], kill[b] = used, defined
    live_in = {b: set(gen[b]) for b in fn.blocks}
    live_out = {b: set() for b in fn.blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(fn.blocks):
            out = set()
            for s in b.successors:
                out |= live_in[s]
            if out != live_out[b]:
                live_out[b] = out
                new_in = gen[b] | (out - kill[b])
                if new_in != live_in[b]:
                    live_in[b] = new_in
                changed = True
    return live_out


def _live_after(em, ins) -> set:
    """The values live just after `ins` (computed once per function, then per query)."""
    table = em.__dict__.get("_wgmma_live_out")
    if table is None:
        table = em._wgmma_live_out = _live_out(em.fn)
    b = ins.block
    live = set(table[b])
    after = b.instrs[b.instrs.index(ins) + 1:]
    for later in after:
        live.update(later.operands)
        for _, args in later.succs:
            live.update(args)
    return live


def _result_regs(em, ins, acc) -> tuple[list[str], bool]:
    """The D registers of this wgmma and whether C must first be copied into them."""
    if ins not in em.regs and all(v.__class__ is not Const for v in acc):
        regs = [em.reg(v) for v in acc]
        if len(set(regs)) == len(regs) and not (_live_after(em, ins) & set(acc)):
            em.regs[ins] = regs            # D takes over C's registers: C is dead after this
            return regs, False
    return _lanes(em, ins), True


def _vec(regs) -> str:
    return "{" + ", ".join(regs) + "}"


@lowers("wgmma")
def lower_wgmma(em, ins) -> None:
    at = ins.attrs
    n, t = int(at["n"]), at["atype"]
    regs_a = ins.operands[0].type.name == "u32"
    na = 4 if regs_a else 1
    a_ops, b, scale_d = ins.operands[:na], ins.operands[na], ins.operands[na + 1]
    acc = ins.operands[na + 2:]
    d, copy = _result_regs(em, ins, acc)
    if copy:
        for r, v in zip(d, acc):
            em.i(f"mov.f32 {r}, {em.src(v)}")
    a = _vec([em.reg(v) for v in a_ops]) if regs_a else em.reg(a_ops[0])
    trans = f"{int(at.get('trans_b', False))}" if regs_a else \
        f"{int(at.get('trans_a', False))}, {int(at.get('trans_b', False))}"
    em.i(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {_vec(d)}, {a}, {em.reg(b)}, "
         f"{em.reg(scale_d)}, 1, 1, {trans}")


@lowers("wgmma_fence")
def lower_wgmma_fence(em, ins) -> None:
    em.i("wgmma.fence.sync.aligned")


@lowers("wgmma_commit")
def lower_wgmma_commit(em, ins) -> None:
    em.i("wgmma.commit_group.sync.aligned")


@lowers("wgmma_wait")
def lower_wgmma_wait(em, ins) -> None:
    em.i(f"wgmma.wait_group.sync.aligned {int(ins.attrs['n'])}")


@lowers("fence_proxy_async")
def lower_fence_proxy_async(em, ins) -> None:
    em.i("fence.proxy.async.shared::cta")
