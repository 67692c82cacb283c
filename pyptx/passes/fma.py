"""FMA contraction (only with `fma=True`): `a * b + c` -> `fma(a, b, c)`, one rounding.

Why explicit: the backend emits `add.rn`/`mul.rn`, which ptxas never fuses, so contraction is
this pass's decision alone and the CPU executor (which runs the emitted `fma.rn`) agrees with
the GPU bit for bit.  Rules, float types only (f16/f32/f64), and only when the `mul` has exactly
one use (otherwise the product is computed anyway and fusing changes nothing but results):

    add(mul(a, b), c) / add(c, mul(a, b))  ->  fma(a, b, c)
    sub(mul(a, b), c)                      ->  fma(a, b, neg c)
    sub(c, mul(a, b))                      ->  fma(neg a, b, c)

(the rows of `RULES`, tried in order).  `neg` is exact, so each rewrite is `a*b ± c` rounded
once.  A constant being negated is negated in place instead of emitting `neg`.
"""
from __future__ import annotations

from ..ir.analysis import use_counts
from ..ir.core import Const, Function, Instr


#: the contraction rules, tried in order: (op, position of the product among its operands,
#: negate the other operand (c), negate the product's first factor (a)) -> fma(a, b, c)
RULES = (("add", 0, False, False), ("add", 1, False, False),
         ("sub", 0, True, False), ("sub", 1, False, True))


def _single_use_mul(v, t, uses) -> bool:
    """A product worth fusing: one use, and not of two constants (constant folding's job)."""
    return isinstance(v, Instr) and v.op == "mul" and v.type == t and uses.get(v, 0) == 1 \
        and not all(isinstance(o, Const) for o in v.operands)


def _neg(v, block, before: list, loc):
    if isinstance(v, Const):
        return Const(v.type, -float(v.value))
    n = Instr("neg", [v], v.type, loc=loc)
    n.block = block
    before.append(n)
    return n


def _has_candidate(fn: Function) -> bool:
    """Whether some float add/sub has a non-constant `mul` of its own type as an operand: the
    only shape the rewrite below looks at (it also needs the mul to have one use)."""
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.op in ("add", "sub"):
                t = ins.type
                if getattr(t, "is_float", False):
                    for v in ins.operands:
                        if v.__class__ is Instr and v.op == "mul" and v.type == t \
                                and not all(o.__class__ is Const for o in v.operands):
                            return True
    return False


def run(fn: Function) -> bool:
    if not _has_candidate(fn):
        return False
    uses = use_counts(fn)
    dead: set[int] = set()
    changed = False
    for b in fn.blocks:
        out = []
        for ins in b.instrs:
            t = ins.type
            if ins.op in ("add", "sub") and getattr(t, "is_float", False):
                pre: list = []
                new_ops = None
                for op, pos, neg_c, neg_a in RULES:
                    mul = ins.operands[pos]
                    if op != ins.op or not _single_use_mul(mul, t, uses) or id(mul) in dead:
                        continue
                    a, bb = mul.operands
                    c = ins.operands[1 - pos]
                    if neg_c:
                        c = _neg(c, b, pre, ins.loc)
                    if neg_a:
                        a = _neg(a, b, pre, ins.loc)
                    new_ops = [a, bb, c]
                    break
                if new_ops is not None:
                    dead.add(id(mul))
                    out.extend(pre)
                    ins.op, ins.operands = "fma", new_ops
                    changed = True
            out.append(ins)
        b.instrs[:] = out
    if dead:
        for b in fn.blocks:
            b.instrs[:] = [i for i in b.instrs if id(i) not in dead]
    return changed
