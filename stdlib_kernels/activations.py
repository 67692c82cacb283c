"""SwiGLU, elementwise and fused with the gate/up projections.

swiglu(g, u) = silu(g) · u = g · sigmoid(g) · u, computed as g / (1 + e^(-g)) · u: for very
negative g, e^(-g) overflows to +inf and the quotient is (−)0, the correct limit, with no NaN.

The fused kernel computes out[r, j] = swiglu(x[r]·w_gate[j], x[r]·w_up[j]) in one pass over the
weights (the decode-time MLP up-projection): one warp per output column, both dot products in the
same loop (coalesced 128-bit weight loads along k for every k: a row that does not start 16-byte
aligned gets a partial first and last chunk, `_rows.py`), warp-shuffle sums, and no [m, ff]
gate/up intermediates in memory.  The elementwise kernel reads 4 elements per thread with
128-bit loads and finishes the last n % 4 with scalar ones.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, thread_idx

from . import _validate as V
from ._args import result, stdlib_function
from ._rows import load4_masked, row_head
from ._warp import warp_sum

#: columns (warps) per block of the fused kernel
FUSED_WARPS = 8


@pyptx.func
def silu_mul(g: f32, u: f32):
    """g · sigmoid(g) · u."""
    return g / (1.0 + pyptx.math.exp(-g)) * u


@pyptx.kernel
def swiglu_kernel(out: f32[:], gate: f32[:], up: f32[:]):
    """out[i] = gate[i] · sigmoid(gate[i]) · up[i]; thread t handles elements 4t .. 4t+3 with
    128-bit accesses, the thread at the end the last n % 4 one at a time."""
    j = pyptx.grid(1) * 4
    n = len(out)
    if j + 4 <= n:
        g0, g1, g2, g3 = pyptx.vload(gate, j, 4)
        u0, u1, u2, u3 = pyptx.vload(up, j, 4)
        pyptx.vstore(out, j, (silu_mul(g0, u0), silu_mul(g1, u1), silu_mul(g2, u2),
                              silu_mul(g3, u3)))
    else:
        for i in range(j, n):
            out[i] = silu_mul(gate[i], up[i])


@pyptx.kernel
def gate_up_swiglu_kernel(out: f32[:, :], x: f32[:, :], w_gate: f32[:, :], w_up: f32[:, :],
                          VEC: pyptx.constexpr):
    """out[r, j] = swiglu(Σ_p x[r,p] w_gate[j,p], Σ_p x[r,p] w_up[j,p]); a warp per (r, j),
    lane l reading the 4-column chunks l, l+32, ... of the weight rows with 128-bit loads.
    VEC = 4 (k a multiple of 4): every row starts 16-byte aligned, x's chunks too.  VEC = 1:
    the chunks lie on the weight rows' 16-byte grid (`_rows`: a partial first and last chunk),
    and x's row, aligned differently, is read one element at a time (it is k floats per block,
    cached; the weights are the traffic)."""
    j = block_idx.x * (block_dim.x // 32) + thread_idx.x // 32
    lane = thread_idx.x % 32
    r = block_idx.y
    k = x.shape[1]
    if j < w_gate.shape[0]:
        g = 0.0
        u = 0.0
        for p in range(lane * 4 - row_head(j, k, VEC), k, 128):
            if VEC == 4 or (p >= 0 and p + 4 <= k):
                if VEC == 4:
                    x0, x1, x2, x3 = pyptx.vload(x, (r, p), 4)
                else:
                    x0, x1, x2, x3 = x[r, p], x[r, p + 1], x[r, p + 2], x[r, p + 3]
                a0, a1, a2, a3 = pyptx.vload(w_gate, (j, p), 4)
                b0, b1, b2, b3 = pyptx.vload(w_up, (j, p), 4)
            else:                               # a weight row's partial first or last chunk
                x0, x1, x2, x3 = load4_masked(x, r, p, 0, k, 0.0)
                a0, a1, a2, a3 = load4_masked(w_gate, j, p, 0, k, 0.0)
                b0, b1, b2, b3 = load4_masked(w_up, j, p, 0, k, 0.0)
            g += x0 * a0 + x1 * a1 + x2 * a2 + x3 * a3
            u += x0 * b0 + x1 * b1 + x2 * b2 + x3 * b3
        g = warp_sum(g)
        u = warp_sum(u)
        if lane == 0:
            out[r, j] = silu_mul(g, u)


@stdlib_function
def swiglu(gate, up, *, out=None):
    """out = gate · sigmoid(gate) · up = gate / (1 + exp(-gate)) · up, elementwise (float32).

    `gate` and `up` have the same shape (any); returns a new array of that shape (or fills
    `out`).
    """
    gate = V.float32_array("swiglu", "gate", gate, tuple(range(0, 7)))
    up = V.float32_array("swiglu", "up", up, tuple(range(0, 7)))
    V.same_shape("swiglu", "up", up, gate.shape, "gate")
    n = gate.size
    if n >= 2**31:
        raise ValueError("swiglu: gate has more than 2**31-1 elements")
    out = result("swiglu", out, gate.shape, np.float32, gate)
    if n:
        swiglu_kernel[V.ceil_div(n, 4 * 256), 256](out.reshape(-1), gate.reshape(-1),
                                                   up.reshape(-1))
    return out


@stdlib_function
def gate_up_swiglu(x, w_gate, w_up, *, out=None):
    """Fused MLP gate/up + SwiGLU: out = swiglu(x @ w_gate.T, x @ w_up.T), one weight pass.

    `x` is `[m, k]` or `[k]`; `w_gate`, `w_up` are `[ff, k]` (nn.Linear layout).  Returns
    `[m, ff]` (or `[ff]` for a 1-d x), or fills `out`.
    """
    fn = "gate_up_swiglu"
    x_in = V.float32_array(fn, "x", x, (1, 2))
    x2 = x_in.reshape(1, -1) if x_in.ndim == 1 else x_in
    w_gate = V.float32_array(fn, "w_gate", w_gate, (2,))
    w_up = V.float32_array(fn, "w_up", w_up, (2,))
    if w_gate.shape[1] != x2.shape[1]:
        raise ValueError(f"{fn}: w_gate must be [ff, {x2.shape[1]}] (k from x), "
                         f"got {w_gate.shape}")
    V.same_shape(fn, "w_up", w_up, w_gate.shape, "w_gate")
    m, ff = x2.shape[0], w_gate.shape[0]
    res = result(fn, out, (ff,) if x_in.ndim == 1 else (m, ff), np.float32, x_in)
    if m and ff:
        warps = min(FUSED_WARPS, ff)
        gate_up_swiglu_kernel[(V.ceil_div(ff, warps), m), 32 * warps](
            res.reshape(m, ff), x2, w_gate, w_up, 4 if x2.shape[1] % 4 == 0 else 1)
    return res
