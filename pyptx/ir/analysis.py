"""Shared CFG/SSA analyses: reachability, reverse postorder, dominators, uses, natural loops.

Why one module: the verifier and several passes need the same facts, and recomputing them is the
main cost of the pipeline, so each is a single linear sweep (dominators: Cooper, Harvey & Kennedy,
"A Simple, Fast Dominance Algorithm", iterated over reverse postorder), and the passes get them
through `cfg(fn)`, which reuses the last ones computed while no block or edge has changed (most
passes edit instructions only).  Replacement maps (`replace_uses`) and use counts are keyed by
the IR values themselves: Instr, BlockArg and Param hash and compare by identity; a Const is
never a key (it compares by value).
"""
from __future__ import annotations

from .core import TERMINATORS, Block, BlockArg, Const, Function, Instr


def reverse_postorder(fn: Function) -> list[Block]:
    """Blocks reachable from the entry, in reverse postorder (iterative DFS)."""
    if not fn.blocks:
        return []
    post: list[Block] = []
    entry = fn.blocks[0]
    seen = {entry}
    add = seen.add
    stack = [(entry, iter(_succ_blocks(entry)))]
    push, pop, emit = stack.append, stack.pop, post.append
    while stack:
        b, it = stack[-1]
        for s in it:
            if s not in seen:
                add(s)
                push((s, iter(_succ_blocks(s))))
                break
        else:
            emit(b)
            pop()
    post.reverse()
    return post


def _succ_blocks(b: Block):
    """`b.successors` without the property/list overhead (this is the hottest helper)."""
    instrs = b.instrs
    if instrs:
        t = instrs[-1]
        if t.op in TERMINATORS:
            succs = t.succs
            if len(succs) == 2:                  # cbr (no comprehension frame)
                return [succs[0][0], succs[1][0]]
            return [s for s, _ in succs]
    return ()


def predecessors(fn: Function, blocks=None) -> dict[Block, list[Block]]:
    """Block -> predecessor blocks (one entry per edge, so a cbr to X twice lists its block twice)."""
    blocks = fn.blocks if blocks is None else blocks
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    get = preds.get
    for b in blocks:
        instrs = b.instrs
        if instrs:
            t = instrs[-1]
            if t.op in TERMINATORS:
                for s, _ in t.succs:
                    lst = get(s)
                    if lst is not None:
                        lst.append(b)
    return preds


class DomTree:
    """Immediate dominators of the reachable blocks, plus O(1) dominance queries via DFS numbers."""

    def __init__(self, fn: Function, rpo: list | None = None, preds: dict | None = None):
        """`rpo` / `preds` (reverse_postorder(fn), predecessors(fn, rpo)) when known."""
        self.rpo = reverse_postorder(fn) if rpo is None else rpo
        order = {b: i for i, b in enumerate(self.rpo)}
        if preds is None:
            preds = predecessors(fn, self.rpo)
        idom: dict[Block, Block] = {}
        if self.rpo:
            entry = self.rpo[0]
            idom[entry] = entry
            changed = True
            while changed:
                changed = False
                for b in self.rpo[1:]:
                    new = None
                    for p in preds[b]:
                        if p in idom:
                            new = p if new is None else _intersect(p, new, idom, order)
                    if idom.get(b) is not new:
                        idom[b] = new
                        changed = True
        self.idom = idom
        self.order = order
        self.children: dict[Block, list[Block]] = {b: [] for b in self.rpo}
        for b in self.rpo[1:]:
            self.children[idom[b]].append(b)
        # DFS interval numbering of the tree: a dominates b iff a's interval contains b's.
        self._pre: dict[Block, int] = {}
        self._post: dict[Block, int] = {}
        if self.rpo:
            counter = 0
            stack = [(self.rpo[0], False)]
            while stack:
                b, done = stack.pop()
                if done:
                    self._post[b] = counter
                    continue
                self._pre[b] = counter
                counter += 1
                stack.append((b, True))
                for c in reversed(self.children[b]):
                    stack.append((c, False))

    def reachable(self, b: Block) -> bool:
        return b in self._pre

    def dominates(self, a: Block, b: Block) -> bool:
        """a dominates b (reflexive).  False when either is unreachable."""
        pa, pb = self._pre.get(a), self._pre.get(b)
        if pa is None or pb is None:
            return False
        return pa <= pb and self._post[b] <= self._post[a]

    def preorder(self) -> list[Block]:
        """Dominator-tree preorder (every block after its dominators)."""
        return sorted(self._pre, key=self._pre.__getitem__)


def _intersect(a, b, idom, order):
    while a is not b:
        while order[a] > order[b]:
            a = idom[a]
        while order[b] > order[a]:
            b = idom[b]
    return a


def use_counts(fn: Function) -> dict:
    """value -> number of uses (operands and branch arguments).  Consts are not counted.
    Keys are the values themselves (IR values hash and compare by identity)."""
    counts: dict = {}
    get = counts.get
    for b in fn.blocks:
        for ins in b.instrs:
            for v in ins.operands:
                if v.__class__ is not Const:
                    counts[v] = get(v, 0) + 1
            for _, args in ins.succs:
                for v in args:
                    if v.__class__ is not Const:
                        counts[v] = get(v, 0) + 1
    return counts


def resolver(mapping: dict):
    """v -> its final replacement through `mapping` (old value -> new), following chains."""
    def resolve(v):
        seen = 0
        while v.__class__ is not Const and v in mapping and seen < 1000:
            v = mapping[v]
            seen += 1
        return v
    return resolve


def rewrite_operands(ins, mapping: dict, resolve) -> None:
    """Replace the operands and branch arguments of one instruction found in `mapping`
    (old value -> new; the lists are edited in place).  Keys are never constants: a constant
    operand is not looked up (Const compares by value)."""
    ops = ins.operands
    for v in ops:
        if v.__class__ is not Const and v in mapping:
            ops[:] = [resolve(x) if x.__class__ is not Const and x in mapping else x
                      for x in ops]
            break
    for _, args in ins.succs:
        for v in args:
            if v.__class__ is not Const and v in mapping:
                args[:] = [resolve(x) if x.__class__ is not Const and x in mapping else x
                           for x in args]
                break


def replace_uses(fn: Function, mapping: dict, blocks=None) -> None:
    """Rewrite every operand and branch argument through `mapping` (old value -> new),
    following chains (a -> b -> c) so that one sweep suffices.  `blocks`: only these (default:
    all).  The keys are the replaced values themselves (never constants), which also keeps
    them alive while the mapping is in use."""
    if not mapping:
        return
    resolve = resolver(mapping)
    for b in fn.blocks if blocks is None else blocks:
        for ins in b.instrs:
            for v in ins.operands:
                if v.__class__ is not Const and v in mapping:
                    rewrite_operands(ins, mapping, resolve)
                    break
            else:
                for _, args in ins.succs:
                    for v in args:
                        if v.__class__ is not Const and v in mapping:
                            args[:] = [resolve(x) if x.__class__ is not Const and x in mapping
                                       else x for x in args]
                            break


def natural_loops(fn: Function, dom: DomTree, preds: dict | None = None
                  ) -> list[tuple[Block, set]]:
    """(header, body blocks incl. header) per loop header; back edges to one header are merged.
    Sorted innermost first (smaller bodies first).  `preds`: predecessors(fn, dom.rpo) if known."""
    if preds is None:
        preds = predecessors(fn, dom.rpo)
    pre, post = dom._pre, dom._post
    bodies: dict[Block, set] = {}
    for b in dom.rpo:
        pb, qb = pre[b], post[b]
        for s in _succ_blocks(b):
            ps = pre.get(s)                     # dom.dominates(s, b), b reachable
            if ps is not None and ps <= pb and qb <= post[s]:
                body = bodies.get(s)
                if body is None:
                    body = bodies[s] = {s}
                stack = [b]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(preds[x])
    loops = [(h, body) for h, body in bodies.items()]
    loops.sort(key=lambda hb: (len(hb[1]), dom.order[hb[0]]))
    return loops


def defining_block(v):
    """The block that defines v (None for params and constants)."""
    if isinstance(v, Instr):
        return v.block
    if isinstance(v, BlockArg):
        return v.block
    return None


class CFG:
    """The CFG facts of one shape of `fn`: reverse postorder, predecessors, dominators, loops.

    `cfg(fn)` returns the one computed last when the shape is unchanged; the passes read these
    instead of recomputing them (most passes edit instructions, not edges).  The result is
    shared: callers must not modify it (copy a list before editing it)."""

    __slots__ = ("sig", "fn", "rpo", "_preds", "_rpo_preds", "_dom", "_loops")

    def __init__(self, fn: Function, sig: list):
        self.sig = sig
        self.fn = fn
        self.rpo = reverse_postorder(fn)
        self._preds = self._rpo_preds = self._dom = self._loops = None

    @property
    def preds(self) -> dict[Block, list[Block]]:
        """`predecessors(fn)`: every block of fn.blocks."""
        if self._preds is None:
            self._preds = predecessors(self.fn)
        return self._preds

    def rebase(self, fn: Function) -> None:
        """fn lost only unreachable blocks: reachability, dominators and loops stand (they never
        look at unreachable blocks); the predecessor map of every block is recomputed."""
        self.sig = cfg_signature(fn)
        self._preds = None

    @property
    def dom(self) -> DomTree:
        """`DomTree(fn)`."""
        if self._dom is None:
            self._dom = DomTree(self.fn, self.rpo, self.rpo_preds)
        return self._dom

    @property
    def rpo_preds(self) -> dict[Block, list[Block]]:
        """`predecessors(fn, rpo)`: the reachable blocks only."""
        if self._rpo_preds is None:
            self._rpo_preds = predecessors(self.fn, self.rpo)
        return self._rpo_preds

    @property
    def loops(self) -> list[tuple[Block, set]]:
        """`natural_loops(fn, dom)`."""
        if self._loops is None:
            self._loops = natural_loops(self.fn, self.dom, self.rpo_preds)
        return self._loops


def cfg_signature(fn: Function) -> list:
    """What the CFG analyses depend on: the blocks in order and each one's successor list."""
    sig: list = []
    add = sig.append
    for b in fn.blocks:
        add(b)
        instrs = b.instrs
        if instrs:
            t = instrs[-1]
            if t.op in TERMINATORS:
                for s, _ in t.succs:
                    add(s)
        add(None)
    return sig


def cfg(fn: Function) -> CFG:
    """The CFG facts of `fn` as it is now: the cached ones if no edge or block changed since
    they were computed (compared exactly, by identity of the blocks and successors), else new
    ones."""
    sig = cfg_signature(fn)
    got = fn.__dict__.get("_cfg_cache")
    if got is not None and got.sig == sig:
        return got
    got = CFG(fn, sig)
    fn.__dict__["_cfg_cache"] = got
    return got
