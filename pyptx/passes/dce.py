"""Dead code elimination: unreachable blocks, unused pure instructions, unused block arguments.

Why mark-and-sweep (not "delete what has no uses"): a loop-carried variable that nothing reads is
used only by its own update (`^h(%i): %j = add %i, 1; br ^h(%j)`), a cycle that use counts never
break.  Liveness starts from side effects (stores, barriers, loads, atomics, prints) and branch
conditions and flows backwards; a live block argument makes the matching operand of every
incoming branch live.  Everything not marked is removed, and a removed block argument is removed
from every predecessor's branch operands as well.
"""
from __future__ import annotations

from ..ir.analysis import reverse_postorder
from ..ir.core import BlockArg, Const, Function, Instr
from ..ir.ops import OPS


def remove_unreachable(fn: Function) -> bool:
    reachable = reverse_postorder(fn)
    if len(reachable) == len(fn.blocks):
        return False
    keep = set(reachable)
    fn.blocks[:] = [b for b in fn.blocks if b in keep]
    return True


def run(fn: Function) -> bool:
    changed = remove_unreachable(fn)
    # incoming edges of every block: (branch instr, succ index)
    incoming: dict = {b: [] for b in fn.blocks}
    live: set[int] = set()
    work: list = []

    def mark(v):
        if isinstance(v, Const) or id(v) in live:
            return
        live.add(id(v))
        work.append(v)

    for b in fn.blocks:
        for ins in b.instrs:
            if not OPS[ins.op].pure:
                for v in ins.operands:
                    mark(v)
                live.add(id(ins))
            for k, (tgt, _) in enumerate(ins.succs):
                incoming[tgt].append((ins, k))
    while work:
        v = work.pop()
        if isinstance(v, Instr):
            for x in v.operands:
                mark(x)
        elif isinstance(v, BlockArg):
            for br, k in incoming[v.block]:
                mark(br.succs[k][1][v.index])
    for b in fn.blocks:
        kept = [ins for ins in b.instrs if id(ins) in live]
        if len(kept) != len(b.instrs):
            b.instrs[:] = kept
            changed = True
        if b is not fn.entry and any(id(a) not in live for a in b.args):
            keep_idx = [i for i, a in enumerate(b.args) if id(a) in live]
            for br, k in incoming[b]:
                tgt, args = br.succs[k]
                br.succs[k] = (tgt, [args[i] for i in keep_idx])
            b.args[:] = [b.args[i] for i in keep_idx]
            for i, a in enumerate(b.args):
                a.index = i
            changed = True
    return changed
