"""Warp-level building blocks shared by the reduction kernels (device functions, inlined).

All reductions are `shfl_xor` butterflies: after log2(32) = 5 exchange steps every lane holds the
result, so no lane has to broadcast it afterwards.  Across warps (`block_sum`, `block_max`) each
warp leaves its partial in shared memory and warp 0 alone merges them, once, and broadcasts.
"""
from __future__ import annotations

import pyptx
from pyptx import f32

#: the most negative finite float32: the identity of a running max.  Finite on purpose: -inf
#: would make the merge compute exp(-inf - (-inf)) = exp(nan) for two empty partials.
NEG_BIG = -3.4028234663852886e38


@pyptx.func
def warp_sum(v: f32):
    """Sum of `v` over the 32 lanes, returned to every lane."""
    for i in pyptx.static_range(5):
        v = v + pyptx.shfl_xor(v, 16 >> i)
    return v


@pyptx.func
def warp_max(v: f32):
    """Max of `v` over the 32 lanes, returned to every lane."""
    for i in pyptx.static_range(5):
        v = max(v, pyptx.shfl_xor(v, 16 >> i))
    return v


@pyptx.func
def block_reduce(v: f32, red, NWARPS, MAX):
    """Max (MAX true) or sum of `v` over a block of NWARPS warps, returned to every thread: warp
    butterflies, then warp 0 alone merges the NWARPS partials and broadcasts the result through
    red[0].  `red` (shared, ≥ NWARPS floats) is used once (reuse needs a barrier first)."""
    v = warp_max(v) if MAX else warp_sum(v)
    if NWARPS > 1:
        tid = pyptx.thread_idx.x
        if tid % 32 == 0:
            red[tid // 32] = v
        pyptx.syncthreads()
        if tid < 32:
            neutral = red[0] if MAX else f32(0.0)           # lanes past the last warp
            w = red[tid] if tid < NWARPS else neutral
            w = warp_max(w) if MAX else warp_sum(w)
            if tid == 0:
                red[0] = w
        pyptx.syncthreads()
        v = red[0]
    return v


@pyptx.func
def block_sum(v: f32, red, NWARPS):
    """Sum of `v` over the block, returned to every thread (`block_reduce`)."""
    return block_reduce(v, red, NWARPS, False)


@pyptx.func
def block_max(v: f32, red, NWARPS):
    """Max of `v` over the block, returned to every thread (`block_reduce`)."""
    return block_reduce(v, red, NWARPS, True)
