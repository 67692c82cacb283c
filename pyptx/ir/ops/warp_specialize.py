"""Ops of warp-specialised kernels (a producer warp feeding consumer warpgroups; docs/hopper.md,
"Warp specialisation"): `elect` (PTX elect.sync) and `setmaxnreg`.

Why a family of its own: neither computes anything a kernel could not write otherwise (a
`lane == 0` test, no register hint at all); they exist so that ptxas sees what the kernel means.
`elect.sync` tells ptxas that exactly one lane of the warp is selected, so it no longer wraps
the TMA issue of a producer thread in a loop over the lanes that might take the branch;
`setmaxnreg` moves registers from the producer warpgroup to the consumers.  Neither is pure:
both are warp / warpgroup collectives that must stay where the kernel put them.
"""
from __future__ import annotations

from ...types import bool_, u32
from .record import family, rule

op = family("warp_specialize")

#: the counts setmaxnreg accepts: multiples of 8 in 24..256 (PTX ISA, setmaxnreg)
SETMAXNREG_COUNTS = tuple(range(24, 257, 8))


def _check_setmaxnreg(c, ins, T, a):
    at = ins.attrs
    c.need(at.get("n") in SETMAXNREG_COUNTS and type(at.get("n")) is int,
           "setmaxnreg: attrs n a multiple of 8 in 24..256")
    c.need(isinstance(at.get("inc"), bool), "setmaxnreg: attrs inc a bool")


OPS = [
    op("elect", "mask",
       "T bool_: true in exactly one lane of the lanes of mask (u32) that execute it together, "
       "false in the others (PTX elect.sync _|p, mask; the ISA only promises one deterministic "
       "leader per mask; the CPU executor and the hardware elect the lowest active lane).  "
       "Every executing lane must be in mask",
       pure=False, check=rule(lambda T, a: T == bool_ and a[0] == u32,
                              "elect: u32 mask, bool_ result"),
       gate=("elect.sync", 80, 90), ptx=("elect",)),
    op("setmaxnreg", "",
       "PTX setmaxnreg.{inc,dec}.sync.aligned.u32 n (attrs n a multiple of 8 in 24..256, inc "
       "bool): the executing warpgroup's per-thread register limit becomes n (inc: raised, "
       "waiting for free registers of the block's pool; dec: lowered, releasing them).  "
       "Warpgroup-collective: all four warps run the same one.  No effect on values; the "
       "kernel must declare pyptx.launch_bounds so ptxas knows the count at entry",
       pure=False, result=False, check=_check_setmaxnreg, gate=("setmaxnreg", 80, "sm_90a"),
       ptx=("setmaxnreg",)),
]
