"""Builders of the instructions the scheduler runs itself: branches, exits, barriers (bar.red's
block reduction included), trap, and the memory-ordering no-ops (membar, fence, nop).

They return an `Op` whose kind (BRANCH, EXIT, BARRIER) the executor's loop acts on; a checked
launch gives them a probe (instrument.py) instead of wrapping their run.
"""
from __future__ import annotations

import numpy as np

from .memory import Trap
from .opkinds import BARRIER, BRANCH, EXIT, WARPSYNC, Op, builds
from .operands import reader, writer


@builds("membar", "fence", cls="sync")
@builds("nop", cls="other")
def _noop(ctx, ins, parts):
    """Memory ordering is a no-op here: every lane's access is done when its op returns."""
    return lambda st, sel: None


@builds("bra", kind=BRANCH, cls="control")
def _bra(ctx, ins, parts):
    return Op(None, BRANCH, ins.operands[0][1])


@builds("ret", "exit", kind=EXIT, cls="control")
def _exit(ctx, ins, parts):
    return Op(None, EXIT)


@builds("trap", cls="control")
def _trap(ctx, ins, parts):
    """`trap` ends the launch: the first lane that runs it (only lanes whose guard holds do)
    becomes a MemoryFault that says what the compiler's check was (`Instr.note`)."""
    why = ins.note or "the kernel executed trap"

    def run(st, sel):
        raise Trap(0, why)
    return Op(run)


def _bar_class(parts) -> tuple:
    return ("warp" if "warp" in parts else "sync"), 0


@builds("bar", "barrier", kind=(BARRIER, WARPSYNC), cls=_bar_class)
def _bar(ctx, ins, parts):
    if "warp" in parts:
        return Op(lambda st, sel: None, WARPSYNC, mask=reader(ctx, ins.operands[0], "b32"))
    if "red" in parts:
        return _bar_red(ctx, ins, parts)
    if "arrive" in parts:
        ctx.error("only bar.sync / bar.red / barrier.sync are supported")
    if len(ins.operands) > 1:
        ctx.error("bar.sync with a thread count is not supported")
    return Op(None, BARRIER)


def _bar_red(ctx, ins, parts):
    """`bar.red.{popc,and,or} d, 0, p`: a barrier whose `run(st, lanes)` the scheduler calls
    once with every thread of the released blocks, all of them having arrived."""
    mode = next(p for p in parts if p in ("popc", "and", "or"))
    if len(ins.operands) != 3:
        ctx.error("bar.red with a thread count is not supported")
    d = writer(ctx, ins.operands[0], "u32" if mode == "popc" else "pred")
    p = reader(ctx, ins.operands[2], "pred")

    def run(st, lanes):
        lanes = st.tidx if lanes is None else lanes
        blk = st.blk[lanes]
        pv = np.broadcast_to(np.asarray(p(st, lanes), bool), lanes.shape)
        count = np.bincount(blk, weights=pv, minlength=st.nb).astype(np.int64)
        got = count[blk]
        if mode == "popc":
            d(st, lanes, got.astype(np.uint32))
        elif mode == "and":
            d(st, lanes, got == np.bincount(blk, minlength=st.nb)[blk])
        else:
            d(st, lanes, got > 0)
    return Op(run, BARRIER)


