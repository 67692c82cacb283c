"""CFG simplification: trivial block arguments, forwarding blocks, straight-line merges.

Why: the frontend emits a block per statement boundary (if/else joins, loop exits, `continue`
targets), most of which end up as a lone `br`.  Fewer blocks means fewer labels and branches in
the PTX and larger blocks for CSE.  Rewrites, each local and exact:

* a block argument that receives the same value on every incoming edge (or itself, on a back
  edge) is that value;
* `cbr c, ^a(x), ^a(x)` is `br ^a(x)`;
* a block holding only `br ^t(args)` is bypassed: each predecessor jumps to ^t directly, with
  the forwarded block's arguments substituted (skipped when the forwarder's arguments are used
  elsewhere, or when a cbr would end up with one target and two different argument lists);
* a block whose single predecessor ends in `br` to it is appended to that predecessor.
"""
from __future__ import annotations

from ..ir.analysis import cfg, replace_uses
from ..ir.core import TERMINATORS, Const, Function
from .constfold import _fold_branch
from .dce import remove_unreachable
from .report import report




def _same(a, b) -> bool:
    return a is b or (isinstance(a, Const) and isinstance(b, Const) and a == b)


def trivial_args(fn: Function) -> bool:
    """Replace block args that get one value on every edge; drop them from the edges."""
    entry = fn.blocks[0] if fn.blocks else None
    # incoming edges of the blocks that have arguments (the only ones looked at)
    incoming: dict = {b: [] for b in fn.blocks if b.args and b is not entry}
    if not incoming:
        return False
    for b in fn.blocks:
        instrs = b.instrs
        if instrs:
            t = instrs[-1]
            if t.op in TERMINATORS:
                for k, (tgt, _) in enumerate(t.succs):
                    if tgt in incoming:
                        incoming[tgt].append((t, k))
    repl: dict = {}
    for b, edges in incoming.items():
        if not edges:
            continue
        drop = []
        for i, a in enumerate(b.args):
            value = None
            for br, k in edges:
                v = br.succs[k][1][i]
                if v is a:
                    continue
                if value is None:
                    value = v
                elif not _same(v, value):
                    break
            else:
                if value is not None:
                    repl[a] = value
                    drop.append(i)
        if drop:
            keep = [i for i in range(len(b.args)) if i not in drop]
            for br, k in edges:
                tgt, args = br.succs[k]
                br.succs[k] = (tgt, [args[i] for i in keep])
            b.args[:] = [b.args[i] for i in keep]
            for j, a in enumerate(b.args):
                a.index = j
    replace_uses(fn, repl)
    return bool(repl)


def _forwarder_target(b, fn, used_outside):
    """If b is `br ^t(args)` only (and may be bypassed), return that br."""
    if b is fn.entry or len(b.instrs) != 1 or b.instrs[0].op != "br":
        return None
    br = b.instrs[0]
    if br.succs[0][0] is b or any(id(a) in used_outside for a in b.args):
        return None
    return br


def bypass_forwarders(fn: Function) -> bool:
    # block args used anywhere except their own block's terminator block the bypass.  Only the
    # arguments of one-instruction blocks are ever asked about (a forwarder is a lone `br`; a
    # lone `cbr` may become one below), so only their uses are collected.
    asked: set[int] = set()
    for blk in fn.blocks:
        if len(blk.instrs) == 1 and blk.args and blk.instrs[0].op in ("br", "cbr"):
            asked.update(id(a) for a in blk.args)
    used_outside: set[int] = set()
    if asked:
        for blk in fn.blocks:
            for ins in blk.instrs:
                for v in ins.operands:
                    if id(v) in asked:
                        used_outside.add(id(v))
                for _, args in ins.succs:
                    for v in args:
                        if id(v) in asked and not (
                                len(blk.instrs) == 1 and getattr(v, "block", None) is blk
                                and not hasattr(v, "op")):
                            used_outside.add(id(v))
    changed = False
    for blk in fn.blocks:
        instrs = blk.instrs
        if not instrs or instrs[-1].op not in TERMINATORS:
            continue
        term = instrs[-1]
        for k, (tgt, args) in enumerate(term.succs):
            if len(tgt.instrs) != 1:
                continue                                  # not a forwarder
            fwd = _forwarder_target(tgt, fn, used_outside)
            if fwd is None or tgt is blk:
                continue
            final, fargs = fwd.succs[0]
            sub = {id(a): v for a, v in zip(tgt.args, args)}
            new_args = [sub.get(id(v), v) for v in fargs]
            if term.op == "cbr":
                other_t, other_a = term.succs[1 - k]
                if other_t is final and not all(map(_same, other_a, new_args)):
                    continue
            term.succs[k] = (final, new_args)
            changed = True
        if term.op == "cbr" and _fold_branch(term):
            rep = report(fn)
            rep.branch_folds += 1
            if not changed:
                rep.silent_edits += 1
    if changed:
        remove_unreachable(fn)
    return changed


def merge_chains(fn: Function) -> bool:
    facts = cfg(fn)
    base = facts.preds                   # shared: edits go to `moved` (entries replaced)
    moved: dict = {}
    entry = fn.blocks[0]
    changed = False
    dead = set()
    repl: dict = {}
    for b in facts.rpo:
        if b in dead:
            continue
        while True:
            instrs = b.instrs
            if not instrs:
                break
            term = instrs[-1]
            if term.op != "br":
                break
            succ, args = term.succs[0]
            if succ is b or succ is entry:
                break
            p = moved.get(succ)
            if len(base[succ] if p is None else p) != 1:
                break
            for a, v in zip(succ.args, args):
                repl[a] = v
            instrs.pop()
            for ins in succ.instrs:
                ins.block = b
            instrs.extend(succ.instrs)
            for s in succ.successors:
                p = moved.get(s)
                moved[s] = [b if x is succ else x for x in (base[s] if p is None else p)]
            dead.add(succ)
            changed = True
    if dead:
        fn.blocks[:] = [b for b in fn.blocks if b not in dead]
        replace_uses(fn, repl)
    return changed




def run(fn: Function) -> bool:
    """Simplify the CFG; the edits `changed` does not cover go to `report(fn)`."""
    changed = False
    rep = report(fn)
    rep.fixpoint = False
    for _ in range(4):
        silent = rep.silent_edits
        step = trivial_args(fn)
        step |= bypass_forwarders(fn)
        step |= merge_chains(fn)
        changed |= step
        if not step:
            rep.fixpoint = rep.silent_edits == silent
            break
    return changed
