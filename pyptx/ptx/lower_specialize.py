"""Lowerings of the warp-specialisation ops: `elect` (elect.sync) and `setmaxnreg`
(docs/hopper.md, "Warp specialisation").

elect.sync writes the leader's lane id and the predicate; the lane id goes to a scratch
register nothing reads (ptxas drops it), which keeps the PTX inside the `d|p` form every
consumer parses (the sink `_` form means the same).
"""
from __future__ import annotations

from .. import types as T
from .emitter import lowers


@lowers("elect")
def lower_elect(em, ins) -> None:
    (mask,) = ins.operands
    lane = em.tmp(T.u32)
    em.i(f"elect.sync {lane}|{em.dst(ins)}, {em.src(mask)}")


@lowers("setmaxnreg")
def lower_setmaxnreg(em, ins) -> None:
    if not em.fn.attrs.get("launch_bounds"):
        raise em.error("pyptx.setmaxnreg() needs the kernel's register count at entry: call "
                       "pyptx.launch_bounds(max_threads, min_blocks=1) in the kernel (ptxas "
                       "ignores setmaxnreg without it)", ins)
    action = "inc" if ins.attrs["inc"] else "dec"
    em.i(f"setmaxnreg.{action}.sync.aligned.u32 {ins.attrs['n']}")
