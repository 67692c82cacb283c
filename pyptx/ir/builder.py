"""IRBuilder: builds SSA form directly while the frontend walks the AST.

The algorithm is Braun et al. 2013, "Simple and Efficient Construction of SSA Form": every
source variable has a current definition per block; reading it in a block without one looks
through the predecessors, creating a *block argument* (our phi) where paths join.  Blocks whose
predecessors are not all known yet (loop headers) are *unsealed*: a read there creates an
incomplete argument whose operands are filled in by `seal`.  Arguments that turn out trivial
(every operand is the same value or the argument itself) are removed.

Values written to variables are IR values, plain Python constants (compile-time values of the
frontend) or `UNDEF`.  Two callbacks keep the builder free of typing rules:

* `phi_type(var, operands)` -> (type, weak): the type of a new argument of `var`; `operands` is
  None for an incomplete argument, else the incoming values.
* `coerce(value, type, block)` -> IR value of `type`, emitted at the end of `block` (before its
  terminator) when needed.
"""
from __future__ import annotations

from .core import Block, BlockArg, Const, Function, Instr


_PY_CONSTS = (bool, int, float)


class _Undef:
    """A variable read on a path where it was never assigned."""

    def __repr__(self):
        return "UNDEF"


UNDEF = _Undef()


def value_key(v):
    """Identity for triviality checks: Python constants compare by type and value."""
    if isinstance(v, (bool, int, float)):
        return (type(v), repr(v))
    return v


class IRBuilder:
    """Braun-style SSA construction over `ir.Function` blocks with block arguments."""

    def __init__(self, fn: Function, phi_type, coerce):
        self.fn = fn
        self.phi_type = phi_type
        self.coerce = coerce
        self.block: Block | None = None
        self.loc: tuple[int, int] | None = None
        self.defs: dict[str, dict[Block, object]] = {}
        self.sealed: set[Block] = set()
        self.incomplete: dict[Block, dict[str, BlockArg]] = {}
        self.preds: dict[Block, list[tuple[Block, int]]] = {}
        self.replaced: dict = {}
        self.weak: set = set()           # IR values that promote like Python literals
        self.loop_assigned: dict[Block, set] = {}
        self.phi_log: list = []          # (var, arg) for every argument created
        self._n = 0

    # ---- blocks and instructions -------------------------------------------------------------
    def new_block(self, hint: str = "bb") -> Block:
        b = Block(f"{hint}{self._n}")
        self._n += 1
        self.fn.blocks.append(b)
        self.preds[b] = []
        return b

    @property
    def blocks_made(self) -> int:
        """How many blocks this builder has numbered so far (block names end in the number)."""
        return self._n

    def reserve_blocks(self, n: int) -> int:
        """Number `n` blocks made elsewhere (a cached template spliced in, frontend/templates.py)
        as if this builder had made them; returns the first number reserved."""
        first = self._n
        self._n += n
        return first

    def emit(self, op: str, operands: list, type=None, **attrs) -> Instr:
        return self.block.append(Instr(op, operands, type, attrs, self.loc))

    def emit_at_end(self, block: Block, instr: Instr) -> Instr:
        """Insert before `block`'s terminator (used to convert values flowing into an arg)."""
        instr.block = block
        instr.loc = instr.loc or self.loc
        if block.terminator is not None:
            block.instrs.insert(len(block.instrs) - 1, instr)
        else:
            block.instrs.append(instr)
        return instr

    def _terminate(self, instr: Instr) -> None:
        src = self.block
        src.append(instr)
        for k, (target, _) in enumerate(instr.succs):
            self.preds[target].append((src, k))
        self.block = None

    def br(self, target: Block) -> None:
        self._terminate(Instr("br", [], None, {}, self.loc, [(target, [])]))

    def cbr(self, cond, if_true: Block, if_false: Block) -> None:
        self._terminate(Instr("cbr", [cond], None, {}, self.loc,
                              [(if_true, []), (if_false, [])]))

    def ret(self) -> None:
        self.block.append(Instr("ret", [], None, {}, self.loc))
        self.block = None

    # ---- variables ---------------------------------------------------------------------------
    def resolve(self, v):
        # only block arguments are ever replaced (a trivial argument by its one value), so
        # anything else - a constant, an instruction, a compile-time object - is final
        replaced = self.replaced
        while v.__class__ is BlockArg:
            nxt = replaced.get(v)
            if nxt is None:
                return v
            v = nxt
        return v

    def write(self, var: str, value, block: Block | None = None) -> None:
        d = self.defs.get(var)
        if d is None:
            d = self.defs[var] = {}
        d[block or self.block] = value

    def read(self, var: str, block: Block | None = None):
        block = block or self.block
        d = self.defs.get(var)
        if d is not None and block in d:
            return self.resolve(d[block])
        return self._drive(self._read_missing(var, block))

    def _drive(self, reader):
        """Run a `_read_missing` generator to its value with an explicit stack of readers.

        A read walks back through predecessors as far as the last definition (thousands of
        blocks after a long unrolled body or a chain of ifs), so recursion would hit Python's
        limit.  Each reader yields the (var, block) reads it needs and receives their values;
        reads happen in exactly the order the recursive formulation would do them."""
        stack = [reader]
        value = None
        while stack:
            try:
                var, block = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                continue
            d = self.defs.get(var)
            if d is not None and block in d:
                value = self.resolve(d[block])
            else:
                stack.append(self._read_missing(var, block))
                value = None
        return value

    def _through(self, var: str, block: Block):
        """The one block a read of `var` in `block` (no definition there) continues in: the
        predecessor of a sealed block with one, or the preheader of a loop header whose loop
        does not assign `var`; None when `block` needs an argument or is the entry."""
        preds = self.preds[block]
        if block in self.sealed:
            return preds[0][0] if len(preds) == 1 else None
        assigned = self.loop_assigned.get(block)
        if assigned is not None and preds and not _in_loop(var, assigned):
            return preds[0][0]
        return None

    def _read_missing(self, var: str, block: Block):
        """Generator: the value of `var` in `block`, which has no definition of it yet."""
        nxt = self._through(var, block)
        if nxt is not None:
            # A chain of blocks the read passes through (straight-line code, an unrolled body,
            # loop headers that do not assign `var`) is followed here rather than by one
            # reader per block: the same reads, the same writes in the same order (farthest
            # block first), without a generator each.
            chain = []
            d = self.defs.get(var)
            while d is None or nxt not in d:
                after = self._through(var, nxt)
                if after is None:
                    break
                chain.append(nxt)
                nxt = after
            val = yield var, nxt
            for c in reversed(chain):
                self.write(var, val, c)
        elif block not in self.sealed:
            t, weak = self.phi_type(var, None)
            val = self._new_arg(block, var, t, weak)
            self.incomplete.setdefault(block, {})[var] = val
        elif not self.preds[block]:
            val = UNDEF
        else:
            arg = self._new_arg(block, var, None, False)
            self.write(var, arg, block)
            incoming = []
            for p, _ in self.preds[block]:
                incoming.append((yield var, p))
            val = self._add_operands(var, arg, incoming)
        self.write(var, val, block)
        return val

    def _new_arg(self, block: Block, var: str, t, weak: bool) -> BlockArg:
        arg = block.add_arg(t, var.rsplit(":", 1)[-1])
        if weak:
            self.weak.add(arg)
        self.phi_log.append((var, arg))
        return arg

    def _add_operands(self, var: str, arg: BlockArg, incoming: list):
        block = arg.block
        if arg.type is None:
            others = [v for v in incoming if v is not arg and v is not UNDEF]
            t, weak = self.phi_type(var, others)
            arg.type = t
            if weak:
                self.weak.add(arg)
        same = self._trivial(arg, incoming)
        if same is not None:
            self._remove_arg(arg, same, appended=False)
            return same
        for (p, k), v in zip(self.preds[block], incoming):
            p.terminator.succs[k][1].append(self._materialise(v, arg.type, p))
        return arg

    def _materialise(self, v, t, block: Block):
        v = self.resolve(v)
        if v is UNDEF:
            return UNDEF                  # replaced by a zero constant in finish()
        if getattr(v, "type", None) == t and not isinstance(v, (bool, int, float)):
            return v
        return self.coerce(v, t, block)

    def _trivial(self, arg: BlockArg, incoming):
        """The single value `arg` stands for, or None when it is a real join.

        An undefined path joined with one IR value keeps the argument (the undefined side reads
        as 0): that value's definition cannot dominate the join (had every path passed it, none
        would be undefined), so using it directly would break SSA dominance.  Constants and
        parameters are available everywhere and may stand in for the undefined side."""
        same = None
        undef = False
        for v in incoming:
            v = self.resolve(v)
            if v is arg:
                continue
            if v is UNDEF:
                undef = True
                continue
            if same is not None and value_key(v) == value_key(same):
                continue
            if same is not None:
                return None
            same = v
        if same is None:
            return UNDEF
        if undef and isinstance(same, (BlockArg, Instr)):
            return None
        return same

    def _remove_arg(self, arg: BlockArg, same, appended: bool) -> None:
        block = arg.block
        idx = block.args.index(arg)
        del block.args[idx]
        for i, a in enumerate(block.args):
            a.index = i
        if appended:
            for p, k in self.preds[block]:
                ops = p.terminator.succs[k][1]
                if len(ops) > idx:
                    del ops[idx]
        self.replaced[arg] = same
        self.weak.discard(arg)

    def seal(self, block: Block) -> None:
        if block in self.sealed:
            return
        self.sealed.add(block)
        for var, arg in list(self.incomplete.pop(block, {}).items()):
            incoming = [self.read(var, p) for p, _ in self.preds[block]]
            for (p, k), v in zip(self.preds[block], incoming):
                p.terminator.succs[k][1].append(self._materialise(v, arg.type, p))
            same = self._trivial(arg, incoming)
            if same is not None:
                self._remove_arg(arg, same, appended=True)

    # ---- the end -----------------------------------------------------------------------------
    def finish(self) -> None:
        """Drop unreachable blocks, remove remaining trivial arguments, rewrite every use."""
        fn = self.fn
        reachable = {fn.blocks[0]}
        work = [fn.blocks[0]]
        while work:
            for s in work.pop().successors:
                if s not in reachable:
                    reachable.add(s)
                    work.append(s)
        fn.blocks = [b for b in fn.blocks if b in reachable]
        edges = {b: [] for b in fn.blocks}
        for b in fn.blocks:
            term = b.terminator
            for target, ops in (term.succs if term is not None else ()):
                edges[target].append(ops)
        changed = True
        while changed:
            changed = False
            for b in fn.blocks:
                for arg in list(b.args):
                    same = self._trivial(arg, [ops[arg.index] for ops in edges[b]])
                    if same is not None:
                        idx = arg.index
                        del b.args[idx]
                        for i, a in enumerate(b.args):
                            a.index = i
                        for ops in edges[b]:
                            del ops[idx]
                        self.replaced[arg] = same
                        changed = True
        replaced = self.replaced
        for b in fn.blocks:
            for ins in b.instrs:
                # only operands that were replaced (block args) or are not IR values yet need
                # `_final`; the list is rebuilt exactly as before when one does
                for v in ins.operands:
                    if v.__class__ is BlockArg and v in replaced or v is UNDEF or \
                            isinstance(v, _PY_CONSTS):
                        ins.operands = [self._final(v) for v in ins.operands]
                        break
                else:
                    ins.operands = list(ins.operands)
                if ins.succs:
                    ins.succs = [(t, [self._final(v, t.args[i].type) for i, v in enumerate(ops)])
                                 for t, ops in ins.succs]

    def _final(self, v, t=None):
        orig = v
        v = self.resolve(v)
        if v is UNDEF or isinstance(v, (bool, int, float)):
            t = t if t is not None else getattr(orig, "type", None)
            return self.coerce(0 if v is UNDEF else v, t, None)
        return v


def _in_loop(var: str, assigned: set) -> bool:
    return var in assigned or var.split(".", 1)[0] in assigned


__all__ = ["IRBuilder", "UNDEF", "Const", "value_key"]
