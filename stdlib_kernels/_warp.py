"""Warp-level building blocks shared by the reduction kernels (device functions, inlined).

All reductions are `shfl_xor` butterflies: after log2(32) = 5 exchange steps every lane holds the
result, so no lane has to broadcast it afterwards.  The online-softmax merge combines two partial
(max, sum-of-exp) pairs: (m, s) ⊕ (m', s') = (M, s·e^(m-M) + s'·e^(m'-M)) with M = max(m, m').
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
def block_sum(v: f32, red, NWARPS):
    """Sum of `v` over a block of NWARPS warps, returned to every thread.  `red` is a shared
    f32 array of at least NWARPS elements, used once (a second reduction needs another one, or a
    barrier before reuse)."""
    v = warp_sum(v)
    tid = pyptx.thread_idx.x
    if tid % 32 == 0:
        red[tid // 32] = v
    pyptx.syncthreads()
    total = 0.0
    for w in range(NWARPS):
        total += red[w]
    return total


@pyptx.func
def warp_max(v: f32):
    """Max of `v` over the 32 lanes, returned to every lane."""
    for i in pyptx.static_range(5):
        v = max(v, pyptx.shfl_xor(v, 16 >> i))
    return v


@pyptx.func
def merge_max_sum(m: f32, s: f32, m2: f32, s2: f32):
    """(m, s) ⊕ (m2, s2) for online softmax: s = Σ exp(x - m) over the elements seen."""
    mm = max(m, m2)
    return mm, s * pyptx.math.exp(m - mm) + s2 * pyptx.math.exp(m2 - mm)


@pyptx.func
def warp_max_sum(m: f32, s: f32):
    """Online-softmax (max, sum) merged over the 32 lanes, returned to every lane."""
    for i in pyptx.static_range(5):
        m2 = pyptx.shfl_xor(m, 16 >> i)
        s2 = pyptx.shfl_xor(s, 16 >> i)
        m, s = merge_max_sum(m, s, m2, s2)
    return m, s


@pyptx.func
def online_update(m: f32, s: f32, v: f32):
    """Add one element `v` to a running (max, sum-of-exp): one exp per element."""
    if v > m:
        s = s * pyptx.math.exp(m - v) + 1.0
        m = v
    else:
        s = s + pyptx.math.exp(v - m)
    return m, s
