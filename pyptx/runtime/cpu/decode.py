"""Pre-decode every instruction of an entry once into an `Op`: a closure `run(st, sel)` over
numpy lanes plus what the scheduler needs (kind, guard slot, branch target).

`sel` is None (all lanes of the batch) or an int index array of the lanes executing.  The
builder of an opcode is looked up by its base name in the registry (`opkinds.BUILDERS`), which
the builder modules imported here fill with `@builds` as they load; anything else is a
LaunchError naming the instruction and its PTX line.
"""
from __future__ import annotations

import numpy as np

# the builder modules register themselves on import (opkinds.builds)
from . import control, mbarrier, memops, printf, scalar, tensorcore, warp, wgmma  # noqa: F401
from . import specialize  # noqa: F401
from .instrument import instrument_op
from .opkinds import BUILDERS, KIND_NAMES, Op
from .operands import Ctx


def decode(ctx: Ctx, ins) -> Op:
    """One Instr -> Op (LaunchError for anything outside the subset)."""
    ctx.instr = ins
    parts = ins.opcode.split(".")
    entry = BUILDERS.get(parts[0])
    if entry is None:
        ctx.error(f"unknown instruction '{ins.opcode}'")
    try:
        res = entry.build(ctx, ins, parts)
    except (IndexError, KeyError, ValueError, TypeError) as e:
        ctx.error(f"unsupported form of '{ins.opcode}' ({type(e).__name__}: {e})")
    op = res if isinstance(res, Op) else Op(res)
    if op.kind not in entry.kinds:      # the registration is what the profiler and tests read
        raise RuntimeError(f"CPU builder of '{ins.opcode}' made a {KIND_NAMES[op.kind]} op; "
                           f"its registration says {[KIND_NAMES[k] for k in entry.kinds]}")
    op.instr = ins
    if ins.guard is not None:
        reg, neg = ins.guard
        if ctx.reg_type(reg) != "pred":
            ctx.error(f"guard {reg} is not a predicate")
        op.gslot, op.gneg = ctx.slot(reg, np.bool_), neg
    if ctx.mode is not None:            # a checked launch's copy of the program
        instrument_op(ctx, op, *entry.classify(parts))
    return op
