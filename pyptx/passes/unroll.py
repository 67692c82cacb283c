"""Full unrolling of short loops whose trip count is a compile-time constant (opt_level 2).

Why: a loop like `for k in range(16): acc += a[r, k] * b[k, c]` spends most of its instructions
on the counter, the compare and the branch; unrolled, the counter folds away and address folding
turns every access into one base register plus an immediate offset.

Which loops: a natural loop whose only exit is the header's conditional branch, with one back
edge and one entry edge, whose trip count follows from constants: the header's arguments that
the exit condition depends on start as constants and are updated by pure ops of constants and
themselves (the frontend's `for i in range(A, B, S)` with literal/constexpr bounds, and the
remainder loop of `pyptx.range(..., unroll=N)`).  The count is found by evaluating exactly those
ops (`evaluate.evaluate`), so any such loop counts, whatever its step or compare.

Budget: at most `MAX_TRIPS` iterations and `MAX_INSTRS` instructions after unrolling (trip count
× instructions in the loop); larger loops stay loops (the register pressure and instruction-cache
cost of bigger bodies is not worth it without knowing more).  Innermost loops are unrolled first;
an enclosing loop becomes a candidate on a later round if it then fits the budget.

The rewrite clones the loop blocks once per iteration, chaining each copy's back edge to the next
copy's header, plus one last header copy that branches to the exit.  Header arguments become the
values flowing in; uses after the loop read the last header copy's values.
"""
from __future__ import annotations

from ..ir.analysis import cfg, replace_uses
from ..ir.core import Block, BlockArg, Const, Function, Instr
from ..ir.ops import OPS
from .evaluate import evaluate

MAX_TRIPS = 32
MAX_INSTRS = 512
MAX_LOOPS_PER_RUN = 64


def _shape(header: Block, body: set, preds):
    """(entry block, latch block, continue-side successor, exit index) or None."""
    term = header.terminator
    if term is None or term.op != "cbr":
        return None
    inside = [t in body for t, _ in term.succs]
    if inside.count(True) != 1:
        return None
    for b in body:
        for s in b.successors:
            if s not in body and b is not header:
                return None
    outside = [p for p in preds[header] if p not in body]
    latches = [p for p in preds[header] if p in body]
    if len(outside) != 1 or len(latches) != 1:
        return None
    latch = latches[0]
    if latch.terminator.op != "br" or outside[0].terminator.op != "br":
        return None
    return outside[0], latch, inside.index(True)


def _incoming(pred: Block, header: Block) -> list:
    for t, args in pred.terminator.succs:
        if t is header:
            return args
    raise AssertionError("not a predecessor")


def _evaluator(header: Block, body: set, env: dict):
    """value -> Const under `env` (header args -> Const), or None when not computable."""
    memo: dict[int, object] = {}

    def ev(v, depth=0):
        if isinstance(v, Const):
            return v
        if isinstance(v, BlockArg):
            return env.get(id(v)) if v.block is header else None
        if not isinstance(v, Instr) or v.block not in body or depth > 64:
            return None
        if id(v) in memo:
            return memo[id(v)]
        info = OPS.get(v.op)
        result = None
        if info is not None and info.pure and info.result and v.op not in ("sreg", "addr"):
            vals = [ev(o, depth + 1) for o in v.operands]
            if all(x is not None for x in vals):
                r = evaluate(v.op, v.type, v.attrs, vals)
                result = Const(v.type, r) if r is not None else None
        memo[id(v)] = result
        return result
    return ev


def trip_count(header: Block, body: set, entry: Block, latch: Block, cont: int) -> int | None:
    """The number of times the loop body runs, if constants decide it and it is <= MAX_TRIPS."""
    term = header.terminator
    env = {id(a): v for a, v in zip(header.args, _incoming(entry, header))
           if isinstance(v, Const)}
    back = _incoming(latch, header)
    for trips in range(MAX_TRIPS + 1):
        ev = _evaluator(header, body, env)
        c = ev(term.operands[0])
        if c is None:
            return None
        if bool(c.value) != (cont == 0):
            return trips
        # the next iteration's header arguments, for the args the condition reads
        nxt = {}
        for a, v in zip(header.args, back):
            if id(a) in env:
                c = ev(v)
                if c is not None:
                    nxt[id(a)] = c
        env = nxt
    return None


def _clone_block(b: Block, name: str, vmap: dict, bmap: dict, with_args: bool) -> Block:
    nb = Block(name)
    if with_args:
        for a in b.args:
            vmap[a] = nb.add_arg(a.type, a.hint)
    bmap[b] = nb
    return nb


def _unroll(fn: Function, header: Block, body: set, entry: Block, latch: Block, cont: int,
            trips: int, order: list) -> None:
    blocks = [b for b in order if b in body]                  # header first (RPO)
    values = list(_incoming(entry, header))
    copies: list[Block] = []
    heads: list[Block] = []
    latch_ends: list[Instr] = []
    for j in range(trips + 1):
        last = j == trips
        vmap = dict(zip(header.args, values))       # original value -> this copy's
        get = vmap.get
        bmap: dict = {}
        todo = blocks[:1] if last else blocks
        for b in todo:
            nb = _clone_block(b, f"{b.name}.u{j}", vmap, bmap, b is not header)
            copies.append(nb)
        heads.append(bmap[header])                            # its arguments became values
        for b in todo:
            nb = bmap[b]
            out = nb.instrs
            for ins in b.instrs:
                attrs = ins.attrs
                ops = ins.operands
                if len(ops) == 2:                             # (no comprehension frame)
                    x, y = ops
                    ops = [x if x.__class__ is Const else get(x, x),
                           y if y.__class__ is Const else get(y, y)]
                elif len(ops) == 1:
                    x = ops[0]
                    ops = [x if x.__class__ is Const else get(x, x)]
                else:
                    ops = [v if v.__class__ is Const else get(v, v) for v in ops]
                new = Instr(ins.op, ops, ins.type, dict(attrs) if attrs else {}, ins.loc)
                if ins.succs:
                    new.succs = [(bmap.get(t, t), [v if v.__class__ is Const else get(v, v)
                                                   for v in args]) for t, args in ins.succs]
                    if b is header and ins.op == "cbr":
                        new.op, new.operands = "br", []
                        new.succs = [new.succs[1 - cont] if last else new.succs[cont]]
                new.block = nb
                out.append(new)
                vmap[ins] = new
        if last:
            # uses after the loop read the values of the last header copy (the loop's own
            # blocks are dropped below, and no copy uses an original value)
            replace_uses(fn, vmap, [b for b in fn.blocks if b not in body])
        else:
            end = bmap[latch].terminator
            values = end.succs[0][1]
            latch_ends.append(end)
    for j, end in enumerate(latch_ends):
        end.succs = [(heads[j + 1], [])]
    et = entry.terminator
    et.succs = [(heads[0], []) if t is header else (t, a) for t, a in et.succs]
    pos = fn.blocks.index(header)
    fn.blocks[:] = [b for b in fn.blocks if b not in body]
    fn.blocks[pos:pos] = copies


def _countable(fn: Function) -> set:
    """Blocks ending in a `cbr` whose condition `trip_count` might evaluate: built by pure ops
    from constants and the block's own arguments that receive a constant on some edge.  Any
    header whose trip count is known is in this set (it over-approximates `_evaluator`), so a
    loop whose header is not needs no dominators, loops or evaluation at all."""
    cbrs = []
    for b in fn.blocks:
        instrs = b.instrs
        if instrs and instrs[-1].op == "cbr":
            cbrs.append(b)
    out = set()
    if not cbrs:
        return out
    # arguments of those blocks that receive a constant on some edge
    with_args = {b for b in cbrs if b.args}
    const_args: set = set()
    if with_args:
        for b in fn.blocks:
            instrs = b.instrs
            if instrs:
                for tgt, args in instrs[-1].succs:
                    if tgt in with_args:
                        for a, v in zip(tgt.args, args):
                            if v.__class__ is Const:
                                const_args.add(id(a))
    memo: dict = {}

    def possible(v, header, depth):
        if v.__class__ is Const:
            return True
        if v.__class__ is BlockArg:
            return v.block is header and id(v) in const_args
        if v.__class__ is not Instr:
            return False
        if depth > 64:
            return True                                       # maybe
        key = (id(v), id(header))
        got = memo.get(key)
        if got is None:
            info = OPS.get(v.op)
            got = False
            if info is not None and info.pure and info.result and v.op not in ("sreg", "addr"):
                got = True
                for o in v.operands:
                    if not possible(o, header, depth + 1):
                        got = False
                        break
            memo[key] = got
        return got
    for b in cbrs:
        if possible(b.instrs[-1].operands[0], b, 0):
            out.add(b)
    return out


def _candidate(fn: Function):
    """The first innermost loop that fits the budget, with its shape and trip count."""
    maybe = _countable(fn)
    if not maybe:
        return None
    facts = cfg(fn)
    dom, loops, preds = facts.dom, facts.loops, facts.preds
    headers = {h for h, _ in loops}
    for header, body in loops:
        if any(h in body and h is not header for h in headers):
            continue                                          # innermost loops only
        shape = _shape(header, body, preds)
        if shape is None or header not in maybe:
            continue
        entry, latch, cont = shape
        trips = trip_count(header, body, entry, latch, cont)
        size = sum(len(b.instrs) for b in body)
        if trips is not None and trips * size <= MAX_INSTRS:
            return header, body, entry, latch, cont, trips, dom.rpo
    return None


def run(fn: Function) -> bool:
    """Unroll every loop that qualifies (analyses are recomputed after each one)."""
    changed = False
    for _ in range(MAX_LOOPS_PER_RUN):
        cand = _candidate(fn)
        if cand is None:
            break
        _unroll(fn, *cand)
        changed = True
    return changed
