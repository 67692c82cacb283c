"""Address folding: move constant parts of an address into the access's byte offset.

Why: PTX addresses `[%rd + imm]` for free, so `x[i + 1]` should not need its own 64-bit address
computation.  Every memory op that takes an address (`ir.ops.ADDRESS_OFFSETS`: load, store,
vload, vstore, atomic, ldmatrix, both addresses of cp_async) carries a byte offset attribute per
address.  Patterns, for `p` such a pointer operand:

    p = gep(q, K)                        -> q,           offset += K * size
    p = gep(q, add(j, K)) / add(K, j)    -> gep(q, j),   offset += K * size
    p = gep(q, sub(j, K))                -> gep(q, j),   offset -= K * size
    p = gep(gep(q, j), K)                -> gep(q, j),   offset += K * size   (as the first rule)
    p = gep(q, add(X, cvt(add(j, K))))   -> gep(q, add(X, cvt(j))), offset += K * size
    p = gep(q, add(mul(add(j, K), S), X)) -> gep(q, add(mul(j, S), X)), offset += K * S * size
    (mulwide(add(j, K), S) as mul: the form passes/widen.py gives a sign-extended product)

(the last two: constants peeled out of the i64 linearisation of n-d indices and out of i32 sign
extensions, so the copies of an unrolled loop share one address computation)

applied repeatedly while the total offset stays a signed 32-bit immediate.

Assumption (the same one C makes for signed ints and Numba for its indices): index arithmetic in
i32 does not overflow.  `gep` sign-extends an i32 index, so `gep(q, add(j, K))` equals
`gep(q, j) + K * size` unless `j + K` wraps around 2**31 - an index that would already be out of
bounds (negative) or a program relying on 32-bit wraparound of an address, which the DSL's
indexing never produces.  Set `ASSUME_I32_INDEX_NO_WRAP = False` to fold only i64 indices,
which is exact without assumptions.  The new `gep(q, j)` often already exists (the loop's plain
`x[i]`); CSE merges the two.
"""
from __future__ import annotations

from ..ir.core import Const, Function, Instr
from ..ir.ops import ADDRESS_OFFSETS
from .report import report

ASSUME_I32_INDEX_NO_WRAP = True
_IMM_MIN, _IMM_MAX = -(1 << 31), (1 << 31) - 1


def _const_index(v):
    return v.value if isinstance(v, Const) and v.type.is_int else None


def _split(idx):
    """index -> (base index or None, constant K) with idx == base + K (under the assumption)."""
    k = _const_index(idx)
    if k is not None:
        return None, k
    if not isinstance(idx, Instr) or idx.op not in ("add", "sub"):
        return idx, 0
    if idx.type.name == "i32" and not ASSUME_I32_INDEX_NO_WRAP:
        return idx, 0
    a, b = idx.operands
    kb, ka = _const_index(b), _const_index(a)
    if kb is not None:
        return a, (kb if idx.op == "add" else -kb)
    if ka is not None and idx.op == "add":
        return b, ka
    return idx, 0


def _split_deep(idx, new, rep, depth=0):
    """`_split`, also looking through the i64 linearisation of n-d indices and the sign extension
    of i32 indices: `add(X, cvt(add(j, K)))` -> `add(X, cvt(j))` + K, `mul(add(j, K), S)` ->
    `mul(j, S)` + K*S (S constant).  New base instructions come from `new(op, operands, type)`.
    Only signed index types, under the same no-overflow assumption."""
    if depth > 8:
        rep.depth_limited = True
    if not ASSUME_I32_INDEX_NO_WRAP or depth > 8 or not isinstance(idx, Instr) \
            or not idx.type.is_signed:
        return _split(idx)
    op, t = idx.op, idx.type
    if op == "cvt" and t.name == "i64" and idx.operands[0].type.name == "i32":
        base, k = _split_deep(idx.operands[0], new, rep, depth + 1)
        if k == 0:
            return idx, 0
        return (None if base is None else new("cvt", [base], t)), k
    if op in ("mul", "mulwide") and _const_index(idx.operands[1]) is not None:
        s = _const_index(idx.operands[1])
        base, k = _split_deep(idx.operands[0], new, rep, depth + 1)
        if k == 0 or base is None:
            return idx, 0
        return new(op, [base, idx.operands[1]], t), k * s
    if op in ("add", "sub"):
        a, b = idx.operands
        ba, ka = _split_deep(a, new, rep, depth + 1)
        bb, kb = _split_deep(b, new, rep, depth + 1)
        if ka == 0 and kb == 0:
            return idx, 0
        if op == "sub":
            kb = -kb
            if bb is not None:
                bb = new("neg", [bb], t) if ba is None else bb
        if ba is None or bb is None:
            return (bb if ba is None else ba), ka + kb
        return new(op, [ba, bb], t), ka + kb
    return idx, 0


def _fold_once(p, block, pre, loc, rep):
    """(new pointer, byte delta) for one folding step, or None."""
    if not isinstance(p, Instr) or p.op != "gep":
        return None
    q, idx = p.operands
    if idx.type.name == "i32" and not ASSUME_I32_INDEX_NO_WRAP and not isinstance(idx, Const):
        return None
    made: list = []

    def new(op, operands, t):
        ins = Instr(op, operands, t, loc=p.loc if p.loc is not None else loc)
        ins.block = block
        made.append(ins)
        return ins
    base, k = _split_deep(idx, new, rep)
    if k == 0:
        return None
    pre.extend(made)
    size = p.type.elem.mem_bytes
    if base is None:
        return q, k * size
    g = Instr("gep", [q, base], p.type, loc=p.loc if p.loc is not None else loc)
    g.block = block
    pre.append(g)
    return g, k * size


def _fold_address(ins, slot, key, block, out, rep) -> bool:
    """Fold the constant part of operand `slot`'s address into `ins.attrs[key]`."""
    off = ins.attrs.get(key, 0)
    p = ins.operands[slot]
    pre: list = []
    while True:
        mark = len(pre)
        step = _fold_once(p, block, pre, ins.loc, rep)
        if step is None or not _IMM_MIN <= off + step[1] <= _IMM_MAX:
            del pre[mark:]
            break
        p, off = step[0], off + step[1]
    if p is ins.operands[slot]:
        return False
    out.extend(pre)
    ins.operands[slot] = p
    if off:
        ins.attrs[key] = off
    else:
        ins.attrs.pop(key, None)
    return True




def run(fn: Function) -> bool:
    """Fold constant index parts into address offsets; `report(fn).depth_limited` says whether
    an index expression was cut at the depth limit (the pipeline's skip bookkeeping)."""
    rep = report(fn)
    rep.depth_limited = False
    changed = False
    for b in fn.blocks:
        out = []
        for ins in b.instrs:
            for slot, key in ADDRESS_OFFSETS.get(ins.op, ()):
                changed |= _fold_address(ins, slot, key, b, out, rep)
            out.append(ins)
        b.instrs[:] = out
    return changed
