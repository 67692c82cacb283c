"""`OpDef`: everything the compiler knows about one IR op, in one record.

Why one record: an op used to be described in parallel per-op lists (the opcode table, the
verifier's if-chain, the constant folder's dispatch, CSE's commutative set, the backend's feature
table) that nothing cross-checked, and they drifted.  Each consumer now reads the field it needs
from the record, and tests/test_op_coherence.py checks that every op has what it must have.

Field by field (see the family modules - arith, bits, memory, warp, sync, tensorcore, control):

    name, operands, nargs   the operand list (informal text) and exact count (None = variadic,
                            the `check` then decides)
    pure, result            no side effects / produces a value: CSE, DCE, LICM, unrolling
    doc                     what it means, exactly (the backend and the CPU executor agree on it)
    check(c, ins, T, a)     the verifier's type rule: `c.need(cond, msg)`, `c.fn`; T the result
                            type, a the operand types
    fold(t, attrs, vals, types)   constant folding (bit-exact with PTX) -> value, None = do not
                            fold this instance; fold=None: the op is never folded
    commutative             "" | "all" | "int" (int only: float min/max may tell -0.0 from +0.0)
    addresses               ((operand index, attrs key), ...): the byte offset folded into each
                            address operand (passes/addressing.py, the backend's `[%r+off]`)
    succs                   None for non-terminators, else the number of branch targets (the
                            emitter lowers terminators itself)
    expanded_by             the pass that rewrites the op before the backend ("" = the backend
                            has a lowering for it)
    gate                    (feature, min PTX ISA x10, min sm) every use of the op needs; the
                            emitter checks it before lowering.  The sm is an int (that sm or
                            newer) or an arch string such as "sm_90a" for an arch-specific
                            feature: exactly that arch has it (wgmma.py)
    features                further (feature, isa, sm) the lowering may need for some types
                            (`em.need(feature)`), e.g. f16 min/max
    ptx                     the PTX mnemonics (first dotted part) its lowering may emit: what a
                            PTX consumer such as the CPU executor must implement
"""
from __future__ import annotations

from dataclasses import dataclass

from ...types import ScalarType


@dataclass(frozen=True)
class OpDef:
    name: str
    operands: str
    nargs: int | None
    pure: bool
    result: bool
    doc: str
    family: str = ""
    check: object = None
    fold: object = None
    commutative: str = ""
    addresses: tuple = ()
    succs: int | None = None
    expanded_by: str = ""
    gate: tuple | None = None
    features: tuple = ()
    ptx: tuple = ()


def _nargs(operands: str):
    if any(s in operands for s in ("[", "..")):
        return None
    return len([x for x in operands.split(",") if x.strip()])


def family(name: str):
    """`op(...)` for one family: builds records with the family name filled in.  Defaults: pure,
    produces a value, operand count from the operand text."""
    def op(opname: str, operands: str, doc: str, *, nargs=-1, pure=True, result=True, **kw):
        return OpDef(opname, operands, _nargs(operands) if nargs == -1 else nargs, pure,
                     result, doc, family=name, **kw)
    return op


# ---- type predicates shared by the type rules ---------------------------------------------------

def is_num(t) -> bool:
    return isinstance(t, ScalarType) and (t.is_int or t.is_float)


def is_int(t, widths=None) -> bool:
    return isinstance(t, ScalarType) and t.is_int and (widths is None or t.bits in widths)


def is_float(t) -> bool:
    return isinstance(t, ScalarType) and t.is_float


def is_i32ish(t) -> bool:
    return isinstance(t, ScalarType) and t.is_int and t.bits == 32


def rule(pred, msg: str):
    """A type rule that is one predicate over (result type, operand types)."""
    def check(c, ins, T, a):
        c.need(pred(T, a), msg)
    return check
