"""Common subexpression elimination: dominator-scoped value numbering of pure ops.

Why scoped by the dominator tree: an expression computed in a block is available in every block
it dominates (the branches of an `if`, a loop body), and nowhere else.  One preorder walk of the
tree with a hash table plus an undo log per scope gives global CSE in linear time.

The key of an instruction is (op, result type, attributes, operand keys); the operands of
commutative ops (their record's `commutative`) are put in a canonical order first.  Float
`min`/`max` are not treated as commutative (two zeros of opposite sign may depend on the order).
"""
from __future__ import annotations

from ..ir.analysis import DomTree, cfg, replace_uses, resolver, rewrite_operands
from ..ir.core import Const, Function
from ..ir.ops import COMMUTATIVE as _COMMUTATIVE, INT_COMMUTATIVE as _INT_COMMUTATIVE, OPS

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


_CONST_KEYS: dict = {}


def _const_key(v):
    """("c", repr(type), repr(value)) of a constant, cached for Python ints, bools and floats
    by (type identity, class, value) (the two zeros and NaNs, whose equality and repr
    disagree, are not cached)."""
    x = v.value
    t = v.type
    c = x.__class__
    if c is int or c is bool or (c is float and x == x and x != 0):
        k = (id(t), c, x)
        got = _CONST_KEYS.get(k)
        if got is not None and got[0] is t:
            return got[1]
        if len(_CONST_KEYS) > 4096:
            _CONST_KEYS.clear()
        key = ("c", _type_key(t), repr(x))
        _CONST_KEYS[k] = (t, key)
        return key
    return ("c", _type_key(t), repr(x))


def _key(ins):
    """(op, type, attrs, operand keys...): equal keys, equal instructions.  An operand's key is
    its id (an int) for a value and ("c", type, repr(value)) for a constant; the operands of
    commutative ops are put in a canonical order (ints before tuples, each sorted)."""
    op = ins.op
    t = ins.type
    got = _TYPE_KEYS.get(id(t))
    tk = got[1] if got is not None and got[0] is t else _type_key(t)
    attrs = ins.attrs
    if not attrs:
        ak = ()
    elif len(attrs) == 1:
        ak = tuple(attrs.items())            # one item: already sorted
    else:
        ak = tuple(sorted(attrs.items()))
    ops = ins.operands
    if len(ops) == 2:
        a, b = ops
        a = id(a) if a.__class__ is not Const else _const_key(a)
        b = id(b) if b.__class__ is not Const else _const_key(b)
        if op in _COMMUTATIVE or (op in _INT_COMMUTATIVE and t.is_int):
            if a.__class__ is b.__class__:
                if b < a:
                    a, b = b, a
            elif a.__class__ is not int:
                a, b = b, a
        return (op, tk, ak, a, b)
    if len(ops) == 1:
        a = ops[0]
        return (op, tk, ak, id(a) if a.__class__ is not Const else _const_key(a))
    keys = [id(v) if v.__class__ is not Const else _const_key(v) for v in ops]
    if len(keys) > 2 and (op in _COMMUTATIVE or (op in _INT_COMMUTATIVE and t.is_int)):
        keys.sort(key=lambda k: (k.__class__ is not int, k if k.__class__ is int else 0,
                                 () if k.__class__ is int else k))
    return (op, tk, ak, *keys)


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
        kept = None                       # the block's instructions, once one is dropped
        instrs = b.instrs
        for i, ins in enumerate(instrs):
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
                    prev = k = None
                if prev is not None:
                    repl[ins] = prev
                    if kept is None:
                        kept = instrs[:i]
                    continue
                if k is not None:
                    table[k] = ins
                    added.append(k)
            if kept is not None:
                kept.append(ins)
        if kept is not None:
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
