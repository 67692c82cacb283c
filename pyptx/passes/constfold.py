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


def simplify(ins: Instr):
    """A value equal to `ins` for every input (identity rule), or None."""
    op, t, ops = ins.op, ins.type, ins.operands
    if op == "select":
        c, a, b = ops
        if isinstance(c, Const):
            return a if c.value else b
        return a if a is b or (isinstance(a, Const) and a == b) else None
    if op == "gep":                     # p + 0 elements is p (same pointer type)
        return ops[0] if _is(ops[1], 0) and ops[0].type == t else None
    if not hasattr(t, "is_int"):
        return None
    is_int, is_bool = t.is_int, t.is_bool
    a = ops[0] if ops else None
    b = ops[1] if len(ops) > 1 else None
    if op == "add" and is_int:
        if _is(b, 0):
            return a
        if _is(a, 0):
            return b
    elif op == "sub" and is_int:
        if _is(b, 0):
            return a
        if a is b:
            return Const(t, 0)
    elif op == "mul":
        if _is(b, 1):
            return a
        if _is(a, 1):
            return b
        if is_int and (_is(a, 0) or _is(b, 0)):
            return Const(t, 0)
    elif op == "div" and _is(b, 1):
        return a
    elif op in ("and", "or") and is_bool:
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const):
                keep = bool(y.value) == (op == "and")      # and true / or false: identity
                return x if keep else y
        if a is b:
            return a
    elif op == "and" and is_int:
        if _is(a, 0) or _is(b, 0):
            return Const(t, 0)
        if _all_ones(b):
            return a
        if _all_ones(a):
            return b
        if a is b:
            return a
    elif op == "or" and is_int:
        if _is(b, 0):
            return a
        if _is(a, 0):
            return b
        if a is b:
            return a
    elif op == "xor" and (is_int or is_bool):
        if _is(b, 0) or (is_bool and isinstance(b, Const) and b.value is False):
            return a
        if _is(a, 0) or (is_bool and isinstance(a, Const) and a.value is False):
            return b
        if a is b:
            return Const(t, False if is_bool else 0)
    elif op in ("shl", "shr") and _is(b, 0):
        return a
    elif op == "cvt" and a.type == t and (is_int or is_bool):
        return a
    elif op in ("neg", "not") and isinstance(a, Instr) and a.op == op and (is_int or is_bool):
        return a.operands[0]
    return None


#: ops `fold_instr` looks at (their record has a `fold`), and the ops `simplify` has a rule for:
#: a set lookup instead of re-deriving both for every instruction.
_FOLDABLE = frozenset(FOLDS)
_FOLDABLE_OR_GEP = _FOLDABLE | {"gep"}
_SIMPLIFIED = frozenset({"select", "add", "sub", "mul", "div", "and", "or", "xor", "shl", "shr",
                         "cvt", "neg", "not"})


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
