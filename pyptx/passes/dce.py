"""Dead code elimination: unreachable blocks, unused pure instructions, unused block arguments.

Why mark-and-sweep (not "delete what has no uses"): a loop-carried variable that nothing reads is
used only by its own update (`^h(%i): %j = add %i, 1; br ^h(%j)`), a cycle that use counts never
break.  Liveness starts from side effects (stores, barriers, loads, atomics, prints) and branch
conditions and flows backwards; a live block argument makes the matching operand of every
incoming branch live.  Everything not marked is removed, and a removed block argument is removed
from every predecessor's branch operands as well.
"""
from __future__ import annotations

from ..ir.analysis import cfg
from ..ir.core import BlockArg, Const, Function, Instr
from ..ir.ops import OPS
from .report import report


def remove_unreachable(fn: Function) -> bool:
    facts = cfg(fn)
    reachable = facts.rpo
    if len(reachable) == len(fn.blocks):
        return False
    keep = set(reachable)
    fn.blocks[:] = [b for b in fn.blocks if b in keep]
    facts.rebase(fn)
    return True


_PURE_BY_OP: dict = {}


def _is_pure(op: str) -> bool:
    got = _PURE_BY_OP.get(op)
    if got is None:
        got = _PURE_BY_OP[op] = OPS[op].pure
    return got




def run(fn: Function) -> bool:
    """Remove dead instructions, unreachable blocks and unused block arguments;
    `report(fn).args_removed` says whether arguments went (branch operands were edited)."""
    rep = report(fn)
    rep.args_removed = False
    changed = remove_unreachable(fn)
    # incoming edges of the blocks with arguments (the only ones looked up below):
    # (branch instr, succ index)
    incoming: dict = {b: [] for b in fn.blocks if b.args}
    # live values (instructions, block args, params) by identity: none of them defines __eq__
    live: set = set()
    work: list = []
    pure = _PURE_BY_OP

    for b in fn.blocks:
        for ins in b.instrs:
            p = pure.get(ins.op)
            if p is None:
                p = _is_pure(ins.op)
            if not p:
                for v in ins.operands:
                    if v.__class__ is not Const and v not in live:
                        live.add(v)
                        work.append(v)
                live.add(ins)
            if ins.succs:
                for k, (tgt, _) in enumerate(ins.succs):
                    edges = incoming.get(tgt)
                    if edges is not None:
                        edges.append((ins, k))
    while work:
        v = work.pop()
        cls = v.__class__
        if cls is Instr:
            for x in v.operands:
                if x.__class__ is not Const and x not in live:
                    live.add(x)
                    work.append(x)
        elif cls is BlockArg:
            idx = v.index
            for br, k in incoming[v.block]:
                x = br.succs[k][1][idx]
                if x.__class__ is not Const and x not in live:
                    live.add(x)
                    work.append(x)
    entry = fn.blocks[0] if fn.blocks else None
    for b in fn.blocks:
        instrs = b.instrs
        for ins in instrs:
            if ins not in live:
                b.instrs[:] = [i for i in instrs if i in live]
                changed = True
                break
        if b is not entry and b.args:
            for a in b.args:
                if a not in live:
                    break
            else:
                continue
            keep_idx = [i for i, a in enumerate(b.args) if a in live]
            for br, k in incoming[b]:
                tgt, args = br.succs[k]
                br.succs[k] = (tgt, [args[i] for i in keep_idx])
            b.args[:] = [b.args[i] for i in keep_idx]
            for i, a in enumerate(b.args):
                a.index = i
            changed = True
            rep.args_removed = True
    return changed
