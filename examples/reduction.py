"""A sum reduction in two levels: a warp-shuffle butterfly inside each warp, then the warps'
partial sums through shared memory, then one atomic add per block.

    python examples/reduction.py
"""
import numpy as np

import pyptx
from pyptx import constexpr, f32, i32

WARP = 32


@pyptx.func
def warp_sum(v: f32):
    """Every lane ends with the sum of the warp's 32 values (shfl_xor butterfly)."""
    for k in pyptx.static_range(5):
        v += pyptx.shfl_xor(v, 16 >> k)
    return v


@pyptx.kernel
def block_sum(total: f32[:], x: f32[:], n: i32, BLOCK: constexpr):
    partial = pyptx.shared.array(BLOCK // WARP, f32)
    t = pyptx.thread_idx.x
    # grid-stride loop: each thread first sums its own strided slice
    acc = f32(0)
    i = pyptx.block_idx.x * BLOCK + t
    while i < n:
        acc += x[i]
        i += pyptx.grid_dim.x * BLOCK
    acc = warp_sum(acc)
    lane = pyptx.lane_id()
    if lane == 0:
        partial[t // WARP] = acc
    pyptx.syncthreads()
    if t < WARP:                                   # the first warp sums the partial sums
        v = partial[t] if t < BLOCK // WARP else f32(0)
        v = warp_sum(v)
        if t == 0:
            pyptx.atomic_add(total, 0, v)


def main():
    n, block, blocks = 50_000, 256, 8
    x = np.random.default_rng(1).random(n, dtype=np.float32)
    total = np.zeros(1, np.float32)                # the atomic adds need a zero start
    block_sum[blocks, block](total, x, n, block)
    expected = x.astype(np.float64).sum()
    assert abs(total[0] - expected) <= 1e-5 * expected, (total[0], expected)
    print(f"sum of {n} floats on the {pyptx.device()}: {total[0]:.3f} (numpy: {expected:.3f})")


if __name__ == "__main__":
    main()
