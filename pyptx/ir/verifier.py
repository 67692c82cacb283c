"""IR well-formedness checks.  A failure is a compiler bug (never a user error): `IRError`.

The per-op type rules are the `check` of each op's record (`ops/`); this module checks what
holds for every op: arity, result, branch targets, SSA dominance.  Why so strict: the passes and
the backend rely on these invariants (types per op record, one terminator per block, SSA
dominance, branch arguments matching block arguments, `instr.block` kept up to date), and
catching a broken pass right where it breaks is far cheaper than debugging
wrong PTX.
"""
from __future__ import annotations

from ..types import VecType
from .core import TERMINATORS, Block, BlockArg, Const, Function, Instr, Param
from .ops import OPS


class IRError(Exception):
    """The IR is malformed (an internal compiler error)."""


class _Checker:
    def __init__(self, fn: Function):
        self.fn = fn
        self.where = ""

    def fail(self, msg: str):
        raise IRError(f"{self.fn.name}: {self.where}: {msg}" if self.where else
                      f"{self.fn.name}: {msg}")

    def need(self, cond, msg: str):
        if not cond:
            self.fail(msg)

    # ---- per-op type rules ------------------------------------------------------------------
    def check_types(self, ins: Instr, info):
        """The op's own rule (its record's `check`), after the offsets of its addresses."""
        at = ins.attrs
        for _, key in info.addresses:
            self.need(type(at.get(key, 0)) is int, f"{ins.op} {key} must be an int")
        if info.check is not None:
            info.check(self, ins, ins.type, [v.type for v in ins.operands])

    # ---- structure -------------------------------------------------------------------------
    def run(self):
        from .analysis import DomTree
        fn = self.fn
        self.need(fn.blocks, "function has no blocks")
        self.need(not fn.entry.args, "the entry block has arguments")
        block_set = set(fn.blocks)
        self.need(len(block_set) == len(fn.blocks), "a block is listed twice")
        params = {id(p) for p in fn.params}
        defined_in: dict[int, tuple[Block, int]] = {}
        for b in fn.blocks:
            for a in b.args:
                self.need(a.block is b, f"block arg of ^{b.name} points at another block")
                defined_in[id(a)] = (b, -1)
            for k, ins in enumerate(b.instrs):
                if id(ins) in defined_in:
                    self.where = f"^{b.name}"
                    self.fail(f"instruction '{ins.op}' appears twice")
                defined_in[id(ins)] = (b, k)
        dom = DomTree(fn)
        for b in fn.blocks:
            self.where = f"^{b.name}"
            self.need(b.instrs, "empty block (no terminator)")
            for k, ins in enumerate(b.instrs):
                self.where = f"^{b.name}[{k}] {ins.op}"
                last = k == len(b.instrs) - 1
                self.need(ins.block is b, "instr.block is not its block")
                self.need(ins.is_terminator == last,
                          "missing terminator" if last else "terminator in the middle of a block")
                self.check_instr(ins, block_set)
                for v in self.operand_values(ins):
                    self.check_use(v, b, k, params, defined_in, dom)

    @staticmethod
    def operand_values(ins: Instr):
        yield from ins.operands
        for _, args in ins.succs:
            yield from args

    def check_instr(self, ins: Instr, block_set):
        info = OPS.get(ins.op)
        self.need(info is not None, f"unknown opcode {ins.op!r}")
        if info.nargs is not None:
            self.need(len(ins.operands) == info.nargs,
                      f"expects {info.nargs} operands, has {len(ins.operands)}")
        for v in ins.operands:
            self.need(isinstance(v, (Instr, BlockArg, Param, Const)) and v.type is not None,
                      f"operand {v!r} is not a value")
            self.need(ins.op == "lane" or not isinstance(v.type, VecType),
                      "a vector value can only be taken apart by 'lane'")
        self.need((ins.type is not None) == info.result,
                  "must produce a value" if info.result else "must not produce a value")
        nsucc = info.succs or 0
        self.need(len(ins.succs) == nsucc, f"needs {nsucc} branch targets")
        for tgt, args in ins.succs:
            self.need(tgt in block_set, f"branch to unknown block {getattr(tgt, 'name', tgt)}")
            self.need(len(args) == len(tgt.args),
                      f"^{tgt.name} takes {len(tgt.args)} arguments, branch passes {len(args)}")
            for v, formal in zip(args, tgt.args):
                self.need(getattr(v, "type", None) == formal.type,
                          f"branch argument type {getattr(v, 'type', None)!r} does not match "
                          f"^{tgt.name}'s {formal.type!r}")
        self.check_types(ins, info)

    def check_use(self, v, b, k, params, defined_in, dom):
        if isinstance(v, Const):
            return
        if isinstance(v, Param):
            self.need(id(v) in params, f"use of a parameter {v.name!r} of another function")
            return
        site = defined_in.get(id(v))
        self.need(site is not None, f"use of a value not defined in this function: {v!r}")
        if not dom.reachable(b):
            return                       # uses in dead code are not constrained
        dblock, dk = site
        if dblock is b:
            self.need(dk < k, f"use of {v!r} before its definition")
        else:
            self.need(dom.dominates(dblock, b), f"use of {v!r} not dominated by its definition")


def verify(fn: Function) -> None:
    """Raise IRError if `fn` breaks an IR invariant; return None otherwise."""
    _Checker(fn).run()


__all__ = ["IRError", "verify", "TERMINATORS"]
