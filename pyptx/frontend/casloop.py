"""Compare-and-swap loops: the atomics PTX has no instruction for (float min/max before sm_90,
64-bit inc/dec) are built the way nvcc and Numba build them, from `atom.cas` in a loop."""
from __future__ import annotations

from .. import types as T
from . import arith


def cas_loop(cx, ptr, t, update, attempt=None):
    """`old = a[i]; a[i] = update(old)` atomically (only while `attempt(old)` holds, when given),
    returning `old`.  Floats compare bits, so a NaN in memory still counts as unchanged."""
    b = cx.b
    var = cx.fresh("casold")
    cx.hidden_types[var] = (t, False)
    b.write(var, arith.emit(cx, "load", [ptr], t))
    head = b.new_block("cas")
    go = b.new_block("cas_try") if attempt is not None else None
    done = b.new_block("cas_done")
    b.loop_assigned[head] = {var}
    b.br(head)
    b.block = head
    old = b.read(var)
    if go is not None:
        b.cbr(attempt(old), go, done)
        b.seal(go)
        b.block = go
    seen = arith.emit(cx, "atomic", [ptr, old, update(old)], t, kind="cas")
    if t.is_float:
        bt = T.u32 if t.bits == 32 else T.u64
        pair = [arith.emit(cx, "bitcast", [seen], bt), arith.emit(cx, "bitcast", [old], bt)]
    else:
        pair = [seen, old]
    swapped = arith.emit(cx, "cmp", pair, T.bool_, pred="eq")
    b.write(var, seen)
    b.cbr(swapped, done, head)
    b.seal(head)
    b.seal(done)
    b.block = done
    return b.read(var)
