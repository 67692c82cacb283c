"""Row softmax: one warp per row for short rows, one block per row for long ones.

Both kernels make two passes over the row: pass 1 keeps a running (max m, sum s = Σ e^(x-m)) per
thread (one exp per element, "online softmax"), merges the partials with `shfl_xor` butterflies
(and, for the block kernel, across warps through shared memory); pass 2 writes e^(x-m) / s.
Subtracting the row max keeps every exponent ≤ 0, so ±80 (or ±1e30) inputs never overflow.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, thread_idx

from . import _validate as V
from ._warp import NEG_BIG, merge_max_sum, online_update, warp_max_sum

#: rows up to this length use the one-warp-per-row kernel
WARP_ROW_MAX = 1024
#: threads per block of the warp-per-row kernel (= rows per block × 32)
WARP_KERNEL_BLOCK = 256


@pyptx.kernel
def softmax_warp_kernel(out: f32[:, :], x: f32[:, :]):
    """One warp per row (rows of up to ~1k elements): no shared memory, no barriers."""
    row = block_idx.x * (block_dim.x // 32) + thread_idx.x // 32
    lane = thread_idx.x % 32
    n_rows = x.shape[0]
    n = x.shape[1]
    if row < n_rows:
        m = NEG_BIG
        s = 0.0
        for j in range(lane, n, 32):
            m, s = online_update(m, s, x[row, j])
        m, s = warp_max_sum(m, s)
        inv = 1.0 / s
        for j in range(lane, n, 32):
            out[row, j] = pyptx.math.exp(x[row, j] - m) * inv


@pyptx.kernel
def softmax_block_kernel(out: f32[:, :], x: f32[:, :], BLOCK: pyptx.constexpr):
    """One block of BLOCK threads per row (long rows, up to millions of elements)."""
    red_m = pyptx.shared.array(32, f32)
    red_s = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    m = NEG_BIG
    s = 0.0
    for j in range(tid, n, BLOCK):
        m, s = online_update(m, s, x[row, j])
    m, s = warp_max_sum(m, s)
    if tid % 32 == 0:
        red_m[tid // 32] = m
        red_s[tid // 32] = s
    pyptx.syncthreads()
    m = red_m[0]
    s = red_s[0]
    for w in range(1, BLOCK // 32):
        m, s = merge_max_sum(m, s, red_m[w], red_s[w])
    inv = 1.0 / s
    for j in range(tid, n, BLOCK):
        out[row, j] = pyptx.math.exp(x[row, j] - m) * inv


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(x)_i = exp(x_i - max(x)) / Σ_j exp(x_j - max(x)) along `axis` (float32).

    Any number of dimensions; rows of any length.  Returns a new array of x's shape.
    """
    x = V.float32_array("softmax", "x", x, (1, 2, 3, 4, 5, 6))
    axis = V.int_scalar("softmax", "axis", axis, -x.ndim, x.ndim - 1)
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    if moved.size == 0:
        return np.empty_like(x)
    rows = np.ascontiguousarray(moved.reshape(-1, n))
    out = np.empty_like(rows)
    n_rows = rows.shape[0]
    if n <= WARP_ROW_MAX:
        per_block = min(WARP_KERNEL_BLOCK // 32, n_rows)
        softmax_warp_kernel[V.ceil_div(n_rows, per_block), 32 * per_block](out, rows)
    else:
        block = V.row_block(n)
        softmax_block_kernel[n_rows, block](out, rows, block)
    return np.ascontiguousarray(np.moveaxis(out.reshape(moved.shape), -1, axis))
