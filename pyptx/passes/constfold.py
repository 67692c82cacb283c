"""Constant folding and exact algebraic identities.

Why only exact rewrites: the GPU, the CPU executor and numpy must agree bit for bit, so an
identity is applied only when it holds for every input of that type: `x + 0` and `x * 0` only for
ints (`-0.0 + 0.0` is `+0.0`; `inf * 0` is NaN), `x * 1` / `x / 1` for ints and floats, and
`gep p, 0` is `p`.  Folding itself is `evaluate.evaluate` (each op record's `fold`).  `select`
and `cbr` on a constant condition pick their side, and a `trap_if` on a constant false condition
(a run-time check of an index that became known) goes.

One sweep in reverse postorder (every definition is seen before its uses), with a replacement map
applied to operands on the fly; one final sweep rewrites uses the first one could not reach.
"""
from __future__ import annotations

from ..ir.analysis import cfg, replace_uses, resolver, rewrite_operands
from ..ir.core import Const, Function, Instr
from ..ir.ops import FOLDS
from .evaluate import evaluate


def _is(c, value) -> bool:
    return isinstance(c, Const) and not isinstance(c.value, bool) and c.value == value \
        and not (isinstance(c.value, float) and c.value == 0 and str(c.value).startswith("-"))


def _all_ones(c) -> bool:
    return isinstance(c, Const) and c.type.is_int and c.value == (-1 if c.type.is_signed
                                                                else (1 << c.type.bits) - 1)


def _int(t) -> bool:
    return getattr(t, "is_int", False)


def _bool(t) -> bool:
    return getattr(t, "is_bool", False)


def _int_or_bool(t) -> bool:
    return getattr(t, "is_int", False) or getattr(t, "is_bool", False)


def _any(t) -> bool:
    return True


def _select(ops, t):
    c, a, b = ops
    if isinstance(c, Const):
        return a if c.value else b
    return a if a is b or (isinstance(a, Const) and a == b) else None


def _bool_identity(keep_if: bool):
    """`and true` / `or false` is the other operand; `and false` / `or true` the constant."""
    def rewrite(ops, t):
        a, b = ops
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const):
                return x if bool(y.value) == keep_if else y
        return a if a is b else None
    return rewrite


def _is_false(c) -> bool:
    return isinstance(c, Const) and c.value is False


def _xor(ops, t):
    a, b = ops
    if _is(b, 0) or (t.is_bool and _is_false(b)):
        return a
    if _is(a, 0) or (t.is_bool and _is_false(a)):
        return b
    return Const(t, False if t.is_bool else 0) if a is b else None


def _scalar(t) -> bool:
    return hasattr(t, "is_int")


#: The exact identities, as rows (op, guard on the result type, rewrite(operands, type) -> a
#: value equal to the instruction for every input, or None), tried in order.  Ints only where
#: floats differ (`-0.0 + 0.0` is `+0.0`; `inf * 0` is NaN); `select` and `gep` for any type.
IDENTITIES = (
    ("select", _any, _select),
    ("gep", _any, lambda ops, t: ops[0] if _is(ops[1], 0) and ops[0].type == t else None),
    ("add", _int, lambda ops, t: ops[0] if _is(ops[1], 0) else ops[1] if _is(ops[0], 0)
     else None),
    ("sub", _int, lambda ops, t: ops[0] if _is(ops[1], 0) else Const(t, 0) if ops[0] is ops[1]
     else None),
    ("mul", _scalar, lambda ops, t: ops[0] if _is(ops[1], 1) else ops[1] if _is(ops[0], 1)
     else None),
    ("mul", _int, lambda ops, t: Const(t, 0) if _is(ops[0], 0) or _is(ops[1], 0) else None),
    ("div", _scalar, lambda ops, t: ops[0] if _is(ops[1], 1) else None),
    ("and", _bool, _bool_identity(True)),
    ("or", _bool, _bool_identity(False)),
    ("and", _int, lambda ops, t: Const(t, 0) if _is(ops[0], 0) or _is(ops[1], 0) else
     ops[0] if _all_ones(ops[1]) else ops[1] if _all_ones(ops[0]) else
     ops[0] if ops[0] is ops[1] else None),
    ("or", _int, lambda ops, t: ops[0] if _is(ops[1], 0) else ops[1] if _is(ops[0], 0) else
     ops[0] if ops[0] is ops[1] else None),
    ("xor", _int_or_bool, _xor),
    ("shl", _scalar, lambda ops, t: ops[0] if _is(ops[1], 0) else None),
    ("shr", _scalar, lambda ops, t: ops[0] if _is(ops[1], 0) else None),
    ("cvt", _int_or_bool, lambda ops, t: ops[0] if ops[0].type == t else None),
    ("neg", _int_or_bool, lambda ops, t: ops[0].operands[0]
     if isinstance(ops[0], Instr) and ops[0].op == "neg" else None),
    ("not", _int_or_bool, lambda ops, t: ops[0].operands[0]
     if isinstance(ops[0], Instr) and ops[0].op == "not" else None),
)
_RULES: dict = {}
for _op, _guard, _rewrite in IDENTITIES:
    _RULES.setdefault(_op, []).append((_guard, _rewrite))


def simplify(ins: Instr):
    """A value equal to `ins` for every input (the first `IDENTITIES` row that applies), or
    None."""
    t = ins.type
    for guard, rewrite in _RULES.get(ins.op, ()):
        if guard(t):
            v = rewrite(ins.operands, t)
            if v is not None:
                return v
    return None


#: ops `fold_instr` looks at (their record has a `fold`), and the ops `simplify` has a rule for:
#: a set lookup instead of re-deriving both for every instruction.
_FOLDABLE = frozenset(FOLDS)
_FOLDABLE_OR_GEP = _FOLDABLE | {"gep"}
_SIMPLIFIED = frozenset(_RULES)


def fold_instr(ins: Instr):
    """The value replacing `ins` (a Const or an existing value), or None."""
    op = ins.op
    if op == "gep":                     # never evaluated (addresses), but p + 0 is p
        return simplify(ins)
    if op not in _FOLDABLE:
        return None
    ops = ins.operands
    if ops:
        for v in ops:
            if v.__class__ is not Const:
                break
        else:
            value = evaluate(op, ins.type, ins.attrs, ops)
            if value is not None:
                return Const(ins.type, value)
    if op not in _SIMPLIFIED:
        return None
    return simplify(ins)


def _fold_branch(ins: Instr) -> bool:
    """cbr on a constant (or to one target with the same args) -> br."""
    c = ins.operands[0]
    (t0, a0), (t1, a1) = ins.succs
    if isinstance(c, Const):
        keep = ins.succs[0] if c.value else ins.succs[1]
    elif t0 is t1 and len(a0) == len(a1) and all(x is y or (isinstance(x, Const) and x == y)
                                                 for x, y in zip(a0, a1)):
        keep = ins.succs[0]
    else:
        return False
    ins.op, ins.operands, ins.succs = "br", [], [keep]
    return True


def run(fn: Function) -> bool:
    """Fold in place.  Returns True if anything changed."""
    repl: dict = {}                      # replaced value -> its replacement
    changed = False
    order = list(cfg(fn).rpo)
    reached = set(order)
    order += [b for b in fn.blocks if b not in reached]

    resolve = resolver(repl)
    foldable = _FOLDABLE_OR_GEP
    for b in order:
        kept = None
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
            op = ins.op
            if op == "cbr" and _fold_branch(ins):
                changed = True
            elif op == "trap_if" and isinstance(ins.operands[0], Const) \
                    and not ins.operands[0].value:
                changed = True                  # a check that can never fail
                if kept is None:
                    kept = instrs[:i]
                continue
            elif op in foldable:
                new = fold_instr(ins)
                if new is not None and new is not ins:
                    repl[ins] = new
                    changed = True
                    if kept is None:
                        kept = instrs[:i]
                    continue
            if kept is not None:
                kept.append(ins)
        if kept is not None:
            b.instrs[:] = kept
    # A reachable use comes after its definition in reverse postorder (SSA: the definition
    # dominates it) and was rewritten on the way; a replacement is final when made (it is a
    # constant or a value visited before).  What is left: unreachable blocks using values of
    # unreachable blocks visited after them.
    if repl:
        replace_uses(fn, repl, [b for b in fn.blocks if b not in reached])
    return changed
