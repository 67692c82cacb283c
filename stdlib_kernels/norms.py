"""RMSNorm and LayerNorm over the last axis: one block per row, x read once when it fits.

Rows are read in 128-bit chunks whatever the hidden size (`_rows.py`: a misaligned row has a
partial first and last chunk).  When the row fits in registers (CHUNKS > 0) each thread loads
its chunks once and keeps them for the reductions and the output; longer rows stream (x re-read
from cache).  Reductions are warp
butterflies, then warp 0 merges the per-warp partials once (`block_sum`).  LayerNorm uses the
two-pass variance Σ(x - mean)² rather than E[x²] - mean², which cancels catastrophically for rows
with a large mean.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, thread_idx

from . import _validate as V
from ._args import result, stdlib_function
from ._rows import in_row, load_chunks, load_col4, load_row4, row_config, row_head, store_row4
from ._warp import block_sum


@pyptx.kernel
def rmsnorm_kernel(out: f32[:, :], x: f32[:, :], weight: f32[:], eps: f32,
                   BLOCK: pyptx.constexpr, VEC: pyptx.constexpr, CHUNKS: pyptx.constexpr):
    """out[r, j] = x[r, j] / sqrt(mean_j(x[r]²) + eps) * weight[j]; one block per row, the row
    in registers when CHUNKS > 0 (≤ BLOCK·CHUNKS chunks of 4)."""
    red = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    h = row_head(row, n, VEC)
    if CHUNKS > 0:
        vals = pyptx.local.array(4 * CHUNKS, f32)
        load_chunks(vals, x, row, tid, n, h, 0.0, BLOCK, VEC, CHUNKS)
        ss = f32(0.0)
        for i in pyptx.static_range(4 * CHUNKS):
            ss += vals[i] * vals[i]
        inv = 1.0 / pyptx.math.sqrt(block_sum(ss, red, BLOCK // 32) / f32(n) + eps)
        for k in pyptx.static_range(CHUNKS):
            c = (tid + k * BLOCK) * 4 - h
            if c < n:
                w0, w1, w2, w3 = load_col4(weight, c, n, VEC)
                i = 4 * k
                store_row4(out, row, c, n, vals[i] * inv * w0, vals[i + 1] * inv * w1,
                           vals[i + 2] * inv * w2, vals[i + 3] * inv * w3, VEC)
    else:
        ss = f32(0.0)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, 0.0, VEC)
            ss += (a * a + b * b) + (d * d + e * e)
        inv = 1.0 / pyptx.math.sqrt(block_sum(ss, red, BLOCK // 32) / f32(n) + eps)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, 0.0, VEC)
            w0, w1, w2, w3 = load_col4(weight, c, n, VEC)
            store_row4(out, row, c, n, a * inv * w0, b * inv * w1, d * inv * w2, e * inv * w3,
                       VEC)


@pyptx.func
def _sq_dev(a: f32, mean: f32, col, n, VEC):
    """(a − mean)², or 0 when column col is outside the row (only possible with VEC = 1)."""
    d = a - mean
    if VEC == 4:
        return d * d
    return d * d if in_row(col, n) else f32(0.0)


@pyptx.kernel
def layernorm_kernel(out: f32[:, :], x: f32[:, :], gamma: f32[:], beta: f32[:], eps: f32,
                     BLOCK: pyptx.constexpr, VEC: pyptx.constexpr, CHUNKS: pyptx.constexpr):
    """out[r, j] = (x[r, j] - μ) / sqrt(σ² + eps) * gamma[j] + beta[j]; one block per row, the
    row in registers when CHUNKS > 0."""
    red_sum = pyptx.shared.array(32, f32)
    red_var = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    h = row_head(row, n, VEC)
    if CHUNKS > 0:
        vals = pyptx.local.array(4 * CHUNKS, f32)
        load_chunks(vals, x, row, tid, n, h, 0.0, BLOCK, VEC, CHUNKS)
        s = f32(0.0)
        for i in pyptx.static_range(4 * CHUNKS):
            s += vals[i]
        mean = block_sum(s, red_sum, BLOCK // 32) / f32(n)
        q = f32(0.0)
        for k in pyptx.static_range(CHUNKS):
            c = (tid + k * BLOCK) * 4 - h
            if c < n:
                for e in pyptx.static_range(4):
                    q += _sq_dev(vals[4 * k + e], mean, c + e, n, VEC)
        inv = 1.0 / pyptx.math.sqrt(block_sum(q, red_var, BLOCK // 32) / f32(n) + eps)
        for k in pyptx.static_range(CHUNKS):
            c = (tid + k * BLOCK) * 4 - h
            if c < n:
                g0, g1, g2, g3 = load_col4(gamma, c, n, VEC)
                b0, b1, b2, b3 = load_col4(beta, c, n, VEC)
                i = 4 * k
                store_row4(out, row, c, n, (vals[i] - mean) * inv * g0 + b0,
                           (vals[i + 1] - mean) * inv * g1 + b1,
                           (vals[i + 2] - mean) * inv * g2 + b2,
                           (vals[i + 3] - mean) * inv * g3 + b3, VEC)
    else:
        s = f32(0.0)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, 0.0, VEC)
            s += (a + b) + (d + e)
        mean = block_sum(s, red_sum, BLOCK // 32) / f32(n)
        q = f32(0.0)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, 0.0, VEC)
            q += (_sq_dev(a, mean, c, n, VEC) + _sq_dev(b, mean, c + 1, n, VEC)) + \
                (_sq_dev(d, mean, c + 2, n, VEC) + _sq_dev(e, mean, c + 3, n, VEC))
        inv = 1.0 / pyptx.math.sqrt(block_sum(q, red_var, BLOCK // 32) / f32(n) + eps)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, 0.0, VEC)
            g0, g1, g2, g3 = load_col4(gamma, c, n, VEC)
            b0, b1, b2, b3 = load_col4(beta, c, n, VEC)
            store_row4(out, row, c, n, (a - mean) * inv * g0 + b0, (b - mean) * inv * g1 + b1,
                       (d - mean) * inv * g2 + b2, (e - mean) * inv * g3 + b3, VEC)


def _rows(fn: str, x) -> tuple[np.ndarray, np.ndarray]:
    x = V.float32_array(fn, "x", x, (1, 2, 3, 4))
    if x.shape[-1] == 0:
        raise ValueError(f"{fn}: x must have a non-empty last axis, got shape {x.shape}")
    return x, x.reshape(-1, x.shape[-1])


@stdlib_function
def rmsnorm(x, weight, eps: float = 1e-6, *, out=None):
    """RMSNorm over the last axis: y = x / sqrt(mean(x²) + eps) * weight (float32).

    `x` is `[..., hidden]`, `weight` `[hidden]`; returns a new array of x's shape (or fills
    `out`).
    """
    x, rows = _rows("rmsnorm", x)
    weight = V.float32_array("rmsnorm", "weight", weight, (1,))
    V.same_shape("rmsnorm", "weight", weight, x.shape[-1:], "x's last axis")
    eps = V.float_scalar("rmsnorm", "eps", eps)
    res = result("rmsnorm", out, x.shape, np.float32, x)
    if rows.shape[0]:
        cfg = row_config(rows.shape[1])
        rmsnorm_kernel[rows.shape[0], cfg.block](res.reshape(rows.shape), rows, weight, eps,
                                                 *cfg)
    return res


@stdlib_function
def layernorm(x, gamma=None, beta=None, eps: float = 1e-5, *, out=None):
    """LayerNorm over the last axis: y = (x - μ) / sqrt(σ² + eps) * gamma + beta (float32).

    μ and σ² are the mean and (biased) variance of each row; `gamma` defaults to ones and `beta`
    to zeros (kept resident on the device for device inputs).  Returns a new array of x's shape
    (or fills `out`).
    """
    x, rows = _rows("layernorm", x)
    h = x.shape[-1]
    if gamma is None:
        gamma = V.constant_like(("layernorm.ones", h), lambda: np.ones(h, np.float32), x)
    if beta is None:
        beta = V.constant_like(("layernorm.zeros", h), lambda: np.zeros(h, np.float32), x)
    gamma = V.float32_array("layernorm", "gamma", gamma, (1,))
    beta = V.float32_array("layernorm", "beta", beta, (1,))
    V.same_shape("layernorm", "gamma", gamma, (h,), "x's last axis")
    V.same_shape("layernorm", "beta", beta, (h,), "x's last axis")
    eps = V.float_scalar("layernorm", "eps", eps)
    res = result("layernorm", out, x.shape, np.float32, x)
    if rows.shape[0]:
        cfg = row_config(h)
        layernorm_kernel[rows.shape[0], cfg.block](res.reshape(rows.shape), rows, gamma, beta,
                                                   eps, *cfg)
    return res
