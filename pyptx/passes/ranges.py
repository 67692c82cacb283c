"""Sign analysis: which integer values are provably non-negative.

Why: Python's floor `//` and `%` need a sign fix-up after PTX's truncating `div`/`rem`, and
`div`/`rem` by a power of two are single shifts/masks only for a non-negative dividend.  Index
arithmetic in kernels is almost always built from non-negative pieces (`thread_idx`, `block_idx`,
array shapes, loop counters counting up from 0), so a one-bit lattice ("known >= 0") is enough.

Sources of facts: non-negative constants, every special register (`%tid`, `%ctaid`, `%laneid`,
...), the parameters the frontend lists in `fn.attrs["nonneg_params"]` (array shapes), values of
unsigned type, and block arguments whose every incoming value is non-negative (an optimistic
fixpoint, so a loop counter `i = 0; i += 1` is non-negative).

Assumption (the same as address folding's, and C's rule for signed ints): `add`, `mul` and `shl`
of two non-negative signed 32/64-bit values do not overflow, so their result is non-negative.
Set `ASSUME_NO_SIGNED_OVERFLOW = False` to use only exact rules.  8/16-bit signed arithmetic is
never assumed not to wrap.
"""
from __future__ import annotations

from ..ir.analysis import cfg
from ..ir.core import BlockArg, Const, Function, Instr, Param

ASSUME_NO_SIGNED_OVERFLOW = True


def _int(t) -> bool:
    return getattr(t, "is_int", False) and not t.is_bool


def known_nonneg(v, facts: set) -> bool:
    """v is an integer value known to be >= 0 (as a number of its own type)."""
    t = v.type
    if not _int(t):
        return False
    if not t.is_signed:
        return True
    if isinstance(v, Const):
        return v.value >= 0
    return v in facts


def _rule(ins: Instr, facts: set) -> bool:
    op, t, ops = ins.op, ins.type, ins.operands

    def nn(k):
        return known_nonneg(ops[k], facts)

    if op in ("sreg", "popc", "clz"):
        return True
    if op in ("add", "mul", "shl"):
        return ASSUME_NO_SIGNED_OVERFLOW and t.bits >= 32 and nn(0) and (op == "shl" or nn(1))
    if op in ("or", "xor", "min", "mulhi", "mulwide"):
        return nn(0) and nn(1)
    if op in ("and", "max"):
        return nn(0) or nn(1)
    if op == "shr":
        return nn(0)
    if op == "select":
        return nn(1) and nn(2)
    if op == "div":
        b = ops[1]
        return nn(0) and isinstance(b, Const) and b.value > 0
    if op == "rem":
        b = ops[1]
        return nn(0) and isinstance(b, Const) and b.value != 0
    if op == "floordiv":
        return nn(0) and nn(1)
    if op == "floormod":
        return nn(1)
    if op in ("cvt", "bitcast"):
        src = ops[0].type
        if getattr(src, "is_bool", False):
            return op == "cvt"
        if not _int(src):
            return False
        if src.bits < t.bits:
            return nn(0)
        return src.bits == t.bits and src.is_signed and nn(0)
    return False


def nonnegative(fn: Function) -> set:
    """The signed integer values of `fn` proven >= 0 (unsigned values are implied), as a set
    of the values themselves (IR values hash by identity)."""
    order = cfg(fn).rpo
    incoming: dict = {}
    args: list[BlockArg] = []
    for b in order:
        for a in b.args:
            if _int(a.type) and a.type.is_signed:
                args.append(a)
                incoming[a] = []
    for b in order:
        term = b.terminator
        if term is None:
            continue
        for tgt, targs in term.succs:
            for a, v in zip(tgt.args, targs):
                got = incoming.get(a)
                if got is not None:
                    got.append(v)
    given = fn.attrs.get("nonneg_params", ())
    base = {p for p in fn.params if isinstance(p, Param) and p.name in given}
    assumed = set(args)                      # optimistic start, only ever shrinks
    # the signed integer instructions, in order (the fixpoint below sweeps them repeatedly)
    signed = [ins for b in order for ins in b.instrs
              if ins.type is not None and _int(ins.type) and ins.type.is_signed]
    while True:
        facts = base | assumed
        for ins in signed:
            if _rule(ins, facts):
                facts.add(ins)
        still = {a for a in args if a in assumed
                 and all(known_nonneg(v, facts) for v in incoming[a])}
        if still == assumed:
            return facts
        assumed = still
