"""Integer strength reduction, and the expansion of Python's floor `//` and `%`.

The frontend lowers integer `a // b` and `a % b` to one op each, `floordiv` / `floormod` (total
functions with Python/numpy semantics, ir/ops/), so that constant folding, CSE and LICM see one
pure op instead of a guard sequence.  This pass replaces them by what PTX has, choosing the
cheapest exact form:

    a // 2**k  -> shr(a, k)         exact for signed a too: an arithmetic shift rounds down
    a %  2**k  -> and(a, 2**k - 1)  exact for signed a too (two's complement, result in [0, 2**k))
    a // K, a % K (K > 0) with a unsigned or known >= 0 (ranges.py) -> div / rem, no fix-up
    a // K, a % K (K > 0) otherwise -> div / rem plus the floor fix-up (one compare, one select)
    runtime b -> the guarded sequences (b == 0 gives 0, MIN // -1 gives MIN, as numpy)

and, for PTX's truncating `div` / `rem` by 2**k, a shift / mask when the dividend is unsigned or
known >= 0.  Division by other constants is left to ptxas (it emits a multiply-high sequence).
`mul` by 2**k is left alone: ptxas already turns it into a shift or LEA.

`run(fn, use_ranges=False)` (opt_level 0) still expands every floor op, without sign facts: the
backend has no template for them.
"""
from __future__ import annotations

from .. import types as T
from ..ir.analysis import replace_uses
from ..ir.core import Const, Function, Instr
from .ranges import known_nonneg, nonnegative


def _log2(v) -> int | None:
    """k if v is the int 2**k (k >= 0), else None."""
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or v & (v - 1):
        return None
    return v.bit_length() - 1


class _Emitter:
    """Appends new instructions in front of the one being rewritten."""

    def __init__(self, block, loc):
        self.block, self.loc, self.out = block, loc, []

    def __call__(self, op, operands, t, **attrs) -> Instr:
        ins = Instr(op, operands, t, attrs, self.loc)
        ins.block = self.block
        self.out.append(ins)
        return ins


def _become(ins: Instr, op: str, operands: list, **attrs) -> None:
    ins.op, ins.operands, ins.attrs = op, operands, attrs


def _floor_fixup(e, ins, a, b, a_nonneg: bool, facts):
    """Python `//`/`%` of a by b in terms of PTX `div`/`rem`; rewrites `ins` into the last op."""
    t = ins.type
    zero, one = Const(t, 0), Const(t, 1)
    is_div = ins.op == "floordiv"
    k = b.value if isinstance(b, Const) else None
    if k is not None and k > 0:
        if not t.is_signed or a_nonneg:
            _become(ins, "div" if is_div else "rem", [a, b])
            return
        r = e("rem", [a, b], t)
        neg = e("cmp", [r, zero], T.bool_, pred="lt")
        if is_div:
            q = e("div", [a, b], t)
            _become(ins, "select", [neg, e("sub", [q, one], t), q])
        else:
            _become(ins, "select", [neg, e("add", [r, b], t), r])
        return
    bz = e("cmp", [b, zero], T.bool_, pred="eq")
    if not t.is_signed or (a_nonneg and known_nonneg(b, facts)):
        safe = e("select", [bz, one, b], t)
        _become(ins, "select", [bz, zero, e("div" if is_div else "rem", [a, safe], t)])
        return
    bm1 = e("cmp", [b, Const(t, -1)], T.bool_, pred="eq")
    safe = e("select", [e("or", [bz, bm1], T.bool_), one, b], t)
    if is_div:
        q = e("div", [a, safe], t)
        q = e("select", [bm1, e("neg", [a], t), q], t)
        r = e("sub", [a, e("mul", [q, b], t)], t)
    else:
        r = e("rem", [a, safe], t)
    fix = e("and", [e("cmp", [r, zero], T.bool_, pred="ne"),
                    e("cmp", [e("xor", [r, b], t), zero], T.bool_, pred="lt")], T.bool_)
    if is_div:
        q = e("select", [fix, e("sub", [q, one], t), q], t)
        _become(ins, "select", [bz, zero, q])
    else:
        _become(ins, "select", [fix, e("add", [r, b], t), r])


def _rewrite(ins: Instr, e, facts) -> object:
    """Rewrite one instruction in place (new ops go through `e`); returns a replacement value
    when `ins` disappears altogether, else None."""
    op, t = ins.op, ins.type
    a, b = ins.operands
    k = b.value if isinstance(b, Const) else None
    nonneg = facts is not None and known_nonneg(a, facts)
    if op in ("div", "rem"):
        n = _log2(k)
        if n is not None and (not t.is_signed or nonneg):
            if op == "div":
                _become(ins, "shr", [a, Const(T.u32, n)])
            else:
                _become(ins, "and", [a, Const(t, k - 1)])
        return None
    if k == 0 or (op == "floormod" and k in (1, -1)):
        return Const(t, 0)
    if op == "floordiv" and k == 1:
        return a
    n = _log2(k)
    if n is not None:
        if op == "floordiv":
            _become(ins, "shr", [a, Const(T.u32, n)])
        else:
            _become(ins, "and", [a, Const(t, k - 1)])
        return None
    if op == "floordiv" and k == -1:
        _become(ins, "neg", [a])
        return None
    _floor_fixup(e, ins, a, b, nonneg, facts)
    return None


_TARGETS = frozenset({"floordiv", "floormod", "div", "rem"})


def run(fn: Function, use_ranges: bool = True) -> bool:
    """Expand floor ops and strength-reduce int div/rem in place; True if anything changed."""
    todo = [ins for b in fn.blocks for ins in b.instrs
            if ins.op in _TARGETS and ins.type is not None and ins.type.is_int
            and not ins.type.is_bool]
    if not todo:
        return False
    facts = nonnegative(fn) if use_ranges else None
    repl: dict = {}
    changed = False
    for b in fn.blocks:
        out = []
        for ins in b.instrs:
            if ins.op not in _TARGETS or ins.type is None or not ins.type.is_int \
                    or ins.type.is_bool:
                out.append(ins)
                continue
            before = ins.op
            e = _Emitter(b, ins.loc)
            gone = _rewrite(ins, e, facts)
            out.extend(e.out)
            if gone is not None:
                repl[ins] = gone
                changed = True
                continue
            out.append(ins)
            changed |= ins.op != before or bool(e.out)
        b.instrs[:] = out
    replace_uses(fn, repl)
    return changed
