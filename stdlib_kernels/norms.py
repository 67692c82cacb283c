"""RMSNorm and LayerNorm over the last axis: one block per row, warp-shuffle reductions.

Each reduction is a `shfl_xor` butterfly within every warp, then one shared-memory slot per warp
that every thread sums after a barrier (≤ 32 slots, broadcast reads).  LayerNorm uses the
two-pass variance Σ(x - mean)² rather than E[x²] - mean², which cancels catastrophically for rows
with a large mean; the row is re-read from cache, not kept in registers, so any hidden size works.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, thread_idx

from . import _validate as V
from ._warp import block_sum


@pyptx.kernel
def rmsnorm_kernel(out: f32[:, :], x: f32[:, :], weight: f32[:], eps: f32,
                   BLOCK: pyptx.constexpr):
    """out[r, j] = x[r, j] / sqrt(mean_j(x[r]²) + eps) * weight[j]; one block per row."""
    red = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    ss = 0.0
    for j in range(tid, n, BLOCK):
        v = x[row, j]
        ss += v * v
    total = block_sum(ss, red, BLOCK // 32)
    inv = 1.0 / pyptx.math.sqrt(total / f32(n) + eps)
    for j in range(tid, n, BLOCK):
        out[row, j] = x[row, j] * inv * weight[j]


@pyptx.kernel
def layernorm_kernel(out: f32[:, :], x: f32[:, :], gamma: f32[:], beta: f32[:], eps: f32,
                     BLOCK: pyptx.constexpr):
    """out[r, j] = (x[r, j] - μ) / sqrt(σ² + eps) * gamma[j] + beta[j]; one block per row."""
    red_sum = pyptx.shared.array(32, f32)
    red_var = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    s = 0.0
    for j in range(tid, n, BLOCK):
        s += x[row, j]
    mean = block_sum(s, red_sum, BLOCK // 32) / f32(n)
    q = 0.0
    for j in range(tid, n, BLOCK):
        d = x[row, j] - mean
        q += d * d
    var = block_sum(q, red_var, BLOCK // 32)
    inv = 1.0 / pyptx.math.sqrt(var / f32(n) + eps)
    for j in range(tid, n, BLOCK):
        out[row, j] = (x[row, j] - mean) * inv * gamma[j] + beta[j]


def _rows(fn: str, x) -> tuple[np.ndarray, np.ndarray]:
    x = V.float32_array(fn, "x", x, (1, 2, 3, 4))
    if x.shape[-1] == 0:
        raise ValueError(f"{fn}: x must have a non-empty last axis, got shape {x.shape}")
    return x, x.reshape(-1, x.shape[-1])


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm over the last axis: y = x / sqrt(mean(x²) + eps) * weight (float32).

    `x` is `[..., hidden]`, `weight` `[hidden]`; returns a new array of x's shape.
    """
    x, rows = _rows("rmsnorm", x)
    weight = V.float32_array("rmsnorm", "weight", weight, (1,))
    V.same_shape("rmsnorm", "weight", weight, x.shape[-1:], "x's last axis")
    eps = V.float_scalar("rmsnorm", "eps", eps)
    out = np.empty_like(rows)
    if rows.shape[0]:
        block = V.row_block(rows.shape[1])
        rmsnorm_kernel[rows.shape[0], block](out, rows, weight, eps, block)
    return out.reshape(x.shape)


def layernorm(x: np.ndarray, gamma: np.ndarray | None = None, beta: np.ndarray | None = None,
              eps: float = 1e-5) -> np.ndarray:
    """LayerNorm over the last axis: y = (x - μ) / sqrt(σ² + eps) * gamma + beta (float32).

    μ and σ² are the mean and (biased) variance of each row; `gamma` defaults to ones and `beta`
    to zeros.  Returns a new array of x's shape.
    """
    x, rows = _rows("layernorm", x)
    h = x.shape[-1]
    if gamma is None:
        gamma = np.ones(h, np.float32)
    if beta is None:
        beta = np.zeros(h, np.float32)
    gamma = V.float32_array("layernorm", "gamma", gamma, (1,))
    beta = V.float32_array("layernorm", "beta", beta, (1,))
    V.same_shape("layernorm", "gamma", gamma, (h,), "x's last axis")
    V.same_shape("layernorm", "beta", beta, (h,), "x's last axis")
    eps = V.float_scalar("layernorm", "eps", eps)
    out = np.empty_like(rows)
    if rows.shape[0]:
        block = V.row_block(h)
        layernorm_kernel[rows.shape[0], block](out, rows, gamma, beta, eps, block)
    return out.reshape(x.shape)
