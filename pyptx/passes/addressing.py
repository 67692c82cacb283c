"""Address folding: move constant parts of an address into the load/store byte `offset`.

Why: PTX addresses `[%rd + imm]` for free, so `x[i + 1]` should not need its own 64-bit address
computation.  Patterns, for `p` the pointer operand of a load or store:

    p = gep(q, K)                        -> q,           offset += K * size
    p = gep(q, add(j, K)) / add(K, j)    -> gep(q, j),   offset += K * size
    p = gep(q, sub(j, K))                -> gep(q, j),   offset -= K * size
    p = gep(gep(q, j), K)                -> gep(q, j),   offset += K * size   (as the first rule)

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


def _fold_once(p, block, pre, loc):
    """(new pointer, byte delta) for one folding step, or None."""
    if not isinstance(p, Instr) or p.op != "gep":
        return None
    q, idx = p.operands
    if idx.type.name == "i32" and not ASSUME_I32_INDEX_NO_WRAP and not isinstance(idx, Const):
        return None
    base, k = _split(idx)
    if k == 0:
        return None
    size = p.type.elem.mem_bytes
    if base is None:
        return q, k * size
    g = Instr("gep", [q, base], p.type, loc=p.loc if p.loc is not None else loc)
    g.block = block
    pre.append(g)
    return g, k * size


def run(fn: Function) -> bool:
    changed = False
    for b in fn.blocks:
        out = []
        for ins in b.instrs:
            if ins.op in ("load", "store", "vload", "vstore"):
                off = ins.attrs.get("offset", 0)
                p = ins.operands[0]
                pre: list = []
                while True:
                    step = _fold_once(p, b, pre, ins.loc)
                    if step is None or not _IMM_MIN <= off + step[1] <= _IMM_MAX:
                        if step is not None and pre and pre[-1] is step[0]:
                            pre.pop()
                        break
                    p, off = step[0], off + step[1]
                if p is not ins.operands[0]:
                    out.extend(pre)
                    ins.operands[0] = p
                    if off:
                        ins.attrs["offset"] = off
                    else:
                        ins.attrs.pop("offset", None)
                    changed = True
            out.append(ins)
        b.instrs[:] = out
    return changed
