"""Common subexpression elimination: dominator-scoped value numbering of pure ops.

Why scoped by the dominator tree: an expression computed in a block is available in every block
it dominates (the branches of an `if`, a loop body), and nowhere else.  One preorder walk of the
tree with a hash table plus an undo log per scope gives global CSE in linear time.

The key of an instruction is (op, result type, attributes, operand keys); the operands of
commutative ops are put in a canonical order first.  Float `min`/`max` are not treated as
commutative (two zeros of opposite sign may depend on the order).
"""
from __future__ import annotations

from ..ir.analysis import DomTree, cfg, replace_uses, resolver, rewrite_operands
from ..ir.core import Const, Function
from ..ir.ops import OPS

_COMMUTATIVE = frozenset({"add", "mul", "and", "or", "xor", "mulhi", "mulwide"})
_INT_COMMUTATIVE = frozenset({"min", "max"})
_PURE_VALUE_OPS = frozenset(name for name, info in OPS.items() if info.pure)
_TYPE_KEYS: dict = {}


def _type_key(t):
    """repr(t), cached by identity (types are a handful of long-lived objects)."""
    got = _TYPE_KEYS.get(id(t))
    if got is None or got[0] is not t:
        if len(_TYPE_KEYS) > 256:        # pointer types are created per kernel: stay bounded
            _TYPE_KEYS.clear()
        got = _TYPE_KEYS[id(t)] = (t, repr(t))
    return got[1]


def _key(ins):
    op = ins.op
    ops = [("c", _type_key(v.type), repr(v.value)) if v.__class__ is Const else ("v", id(v))
           for v in ins.operands]
    if op in _COMMUTATIVE or (op in _INT_COMMUTATIVE and ins.type.is_int):
        ops.sort()
    attrs = ins.attrs
    return (op, _type_key(ins.type), tuple(sorted(attrs.items())) if attrs else (), tuple(ops))


def run(fn: Function, dom: DomTree | None = None) -> bool:
    dom = dom or cfg(fn).dom
    if not dom.rpo:
        return False
    table: dict = {}
    repl: dict[int, object] = {}
    children = dom.children
    pure = _PURE_VALUE_OPS
    # iterative preorder walk; on leaving a block, undo the entries it added
    resolve = resolver(repl)
    stack = [(dom.rpo[0], False)]
    undo_marks: list[list] = []
    while stack:
        b, leaving = stack.pop()
        if leaving:
            for k in undo_marks.pop():
                del table[k]
            continue
        added = []
        kept = []
        for ins in b.instrs:
            if repl:
                rewrite_operands(ins, repl, resolve)
            if ins.op in pure and ins.type is not None:
                try:
                    k = _key(ins)
                    prev = table.get(k)
                except TypeError:         # unhashable attribute value: leave it alone
                    kept.append(ins)
                    continue
                if prev is not None:
                    repl[id(ins)] = prev
                    continue
                table[k] = ins
                added.append(k)
            kept.append(ins)
        if len(kept) != len(b.instrs):
            b.instrs[:] = kept
        undo_marks.append(added)
        stack.append((b, True))
        for c in reversed(children[b]):
            stack.append((c, False))
    replace_uses(fn, repl)      # uses on back edges / in unreachable blocks
    return bool(repl)
