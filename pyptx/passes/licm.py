"""Loop-invariant code motion: hoist pure, non-trapping ops out of natural loops.

Why: the frontend recomputes address arithmetic (`gep`, index `mul`/`add`/`cvt`, `sreg`, `addr`)
inside loop bodies; computing it once before the loop saves instructions per iteration.

Every pure op except integer `div`/`rem` by a runtime value (division by zero is unspecified)
is safe to execute speculatively, so an invariant op is hoisted even from a block that does not
run on every iteration.  `div`/`rem` by a nonzero constant cannot misbehave and is hoisted; the
floor ops `floordiv`/`floormod` are total (x // 0 == 0) and are hoisted whatever the divisor.  Loops are handled innermost first; code hoisted out of an
inner loop lands in its preheader, which lies in the outer loop and is hoisted further from there.

A loop needs a preheader: a block outside the loop whose only successor is the header and which
is the header's only predecessor from outside.  Missing ones are created first (carrying the
header's block arguments through), then the analyses are computed once more.
"""
from __future__ import annotations

from ..ir.analysis import cfg
from ..ir.core import Block, Const, Function, Instr
from ..ir.ops import OPS


def _preheader(header, body, preds):
    outside = [p for p in preds[header] if p not in body]
    if len(outside) == 1:
        p = outside[0]
        if p.terminator is not None and p.terminator.op == "br":
            return p
    return None


def _make_preheader(fn: Function, header: Block, body: set, preds) -> Block | None:
    outside = [p for p in preds[header] if p not in body]
    if not outside:
        return None
    ph = Block(f"{header.name}.ph")
    args = [ph.add_arg(a.type, a.hint) for a in header.args]
    ph.append(Instr("br", [], None, succs=[(header, list(args))]))
    for p in dict.fromkeys(outside):
        term = p.terminator
        for k, (tgt, targs) in enumerate(term.succs):
            if tgt is header:
                term.succs[k] = (ph, targs)
    fn.blocks.insert(fn.blocks.index(header), ph)
    return ph


def _hoistable(ins: Instr) -> bool:
    info = OPS[ins.op]
    if not info.pure or ins.type is None:
        return False
    if ins.op in ("div", "rem") and ins.type.is_int:
        d = ins.operands[1]
        return isinstance(d, Const) and d.value != 0
    return True


def run(fn: Function) -> bool:
    facts = cfg(fn)
    dom, loops = facts.dom, facts.loops
    if not loops:
        return False
    preds = facts.preds
    created = False
    for header, body in loops:
        if header is not fn.entry and _preheader(header, body, preds) is None:
            created |= _make_preheader(fn, header, body, preds) is not None
            preds = cfg(fn).preds
    if created:
        facts = cfg(fn)
        dom, loops, preds = facts.dom, facts.loops, facts.preds
    changed = created
    for header, body in loops:
        ph = _preheader(header, body, preds)
        if ph is None:
            continue
        hoisted = []
        for b in dom.rpo:
            if b not in body:
                continue
            kept = []
            for ins in b.instrs:
                if _hoistable(ins):
                    for v in ins.operands:
                        if getattr(v, "block", None) in body:
                            kept.append(ins)
                            break
                    else:
                        hoisted.append(ins)
                        ins.block = ph
                else:
                    kept.append(ins)
            if len(kept) != len(b.instrs):
                b.instrs[:] = kept
        if hoisted:
            ph.instrs[-1:-1] = hoisted
            changed = True
    return changed
