"""Intrinsics of warp-specialised kernels: `elect_one`, `setmaxnreg`, `launch_bounds`
(docs/hopper.md, "Warp specialisation").

`elect_one(mask)` is PTX elect.sync: true in one lane of the lanes of `mask` that run it.  A
producer thread chosen by `elect_one()` instead of `lane == 0` is one ptxas can see is a single
lane, so it emits the TMA issue once instead of a loop over the lanes that might take it.
`setmaxnreg(n, inc=)` moves registers between warpgroups; ptxas honours it only when it knows
the per-thread count at entry, which `launch_bounds(max_threads, min_blocks)` declares
(`.maxntid` / `.minnctapersm`; every count is checked here so a mistake is a CompileError at
the call, not a ptxas message).
"""
from __future__ import annotations

from .. import types as T
from ..ir.ops.warp_specialize import SETMAXNREG_COUNTS
from . import arith
from .intrinsics import intrinsic
from .operands import u32_arg

#: the most threads a block may have (PTX .maxntid bound on every target pyptx emits)
MAX_BLOCK_THREADS = 1024


@intrinsic("elect_one", "mask", mask=0xFFFFFFFF)
def _elect_one(cx, mask):
    return arith.emit(cx, "elect", [u32_arg(cx, mask, "elect_one()'s mask")], T.bool_)


@intrinsic("setmaxnreg", "n", "inc")
def _setmaxnreg(cx, n, inc):
    if isinstance(n, bool) or not isinstance(n, int) or n not in SETMAXNREG_COUNTS:
        raise cx.err(f"setmaxnreg()'s n must be a compile-time int, a multiple of 8 from 24 "
                     f"to 256 (the per-thread register count), got {arith.describe(n)}; "
                     f"write e.g. setmaxnreg(40, inc=False) or setmaxnreg(232, inc=True)")
    if not isinstance(inc, bool):
        raise cx.err("setmaxnreg()'s inc must be the literal True (raise the limit: "
                     "setmaxnreg.inc) or False (lower it: setmaxnreg.dec)")
    arith.emit(cx, "setmaxnreg", [], None, n=n, inc=inc)


@intrinsic("launch_bounds", "max_threads", "min_blocks", min_blocks=1)
def _launch_bounds(cx, max_threads, min_blocks):
    for v, what, top in ((max_threads, "max_threads", MAX_BLOCK_THREADS),
                         (min_blocks, "min_blocks", 32)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
            raise cx.err(f"launch_bounds()'s {what} must be a compile-time int from 1 to "
                         f"{top}, got {arith.describe(v)}; write e.g. "
                         f"pyptx.launch_bounds(384, 1)")
    old = cx.fn.attrs.get("launch_bounds")
    if old is not None and old != (max_threads, min_blocks):
        raise cx.err(f"launch_bounds() is already {old}: a kernel has one; call it once")
    cx.fn.attrs["launch_bounds"] = (max_threads, min_blocks)
