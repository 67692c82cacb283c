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
    """(op, type, attrs, operand keys).  An operand's key is its id (an int) for a value and
    ("c", type, repr(value)) for a constant: equal keys, equal operands.  Commutative operands
    are put in a canonical order (ints before tuples, each sorted)."""
    op = ins.op
    tk = _TYPE_KEYS
    ops = []
    for v in ins.operands:
        if v.__class__ is Const:
            t = v.type
            got = tk.get(id(t))
            ops.append(("c", got[1] if got is not None and got[0] is t else _type_key(t),
                        repr(v.value)))
        else:
            ops.append(id(v))
    if op in _COMMUTATIVE or (op in _INT_COMMUTATIVE and ins.type.is_int):
        if len(ops) == 2:
            a, b = ops
            if a.__class__ is b.__class__:
                if b < a:
                    ops = [b, a]
            elif a.__class__ is not int:
                ops = [b, a]
        else:
            ops.sort(key=lambda k: (k.__class__ is not int, k if k.__class__ is int else 0,
                                    () if k.__class__ is int else k))
    t = ins.type
    got = tk.get(id(t))
    attrs = ins.attrs
    if not attrs:
        akey = ()
    elif len(attrs) == 1:
        akey = tuple(attrs.items())          # one item: already sorted
    else:
        akey = tuple(sorted(attrs.items()))
    return (op, got[1] if got is not None and got[0] is t else _type_key(t), akey, tuple(ops))


def run(fn: Function, dom: DomTree | None = None) -> bool:
    dom = dom or cfg(fn).dom
    if not dom.rpo:
        return False
    table: dict = {}
    repl: dict = {}                      # replaced value -> its replacement
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
                for v in ins.operands:
                    if v.__class__ is not Const and v in repl:
                        rewrite_operands(ins, repl, resolve)
                        break
                else:
                    if ins.succs:
                        rewrite_operands(ins, repl, resolve)
            if ins.op in pure and ins.type is not None:
                try:
                    k = _key(ins)
                    prev = table.get(k)
                except TypeError:         # unhashable attribute value: leave it alone
                    kept.append(ins)
                    continue
                if prev is not None:
                    repl[ins] = prev
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
    # Every use in a reachable block was rewritten on the way: its definition dominates it
    # (SSA), so it was visited first, and a value kept in the table is never replaced later.
    # What is left: uses in unreachable blocks.
    if repl:
        pre = dom._pre
        replace_uses(fn, repl, [b for b in fn.blocks if b not in pre])
    return bool(repl)
