"""Rotary position embedding (RoPE), NeoX (rotate-half) and GPT-J (interleaved) layouts.

Pair i (i < head_dim/2) of a head at position p rotates by θ_i = p · theta^(-2i/head_dim):
(a, b) → (a·cos θ_i − b·sin θ_i, b·cos θ_i + a·sin θ_i).  NeoX pairs element i with i + head_dim/2,
GPT-J pairs 2i with 2i+1.  The inverse frequencies theta^(-2i/head_dim) are computed once on the
host in float64 and rounded to float32 (what HF/llama.cpp do), the angle p·inv_freq in float32,
and sin/cos with pyptx.math's accurate functions.  One thread per pair.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import f32, i32

from . import _validate as V

LAYOUTS = ("neox", "gptj")


@pyptx.kernel
def rope_kernel(out: f32[:, :, :], x: f32[:, :, :], positions: i32[:], inv_freq: f32[:],
                NEOX: pyptx.constexpr):
    """out[s, h] = x[s, h] with every pair rotated by positions[s] · inv_freq[pair]."""
    i = pyptx.grid(1)
    n_heads = x.shape[1]
    half = x.shape[2] // 2
    if i < x.shape[0] * n_heads * half:
        p = i % half
        sh = i // half
        h = sh % n_heads
        s = sh // n_heads
        angle = f32(positions[s]) * inv_freq[p]
        c = pyptx.math.cos(angle)
        sn = pyptx.math.sin(angle)
        ia = p
        ib = p + half
        if not NEOX:
            ia = 2 * p
            ib = 2 * p + 1
        a = x[s, h, ia]
        b = x[s, h, ib]
        out[s, h, ia] = a * c - b * sn
        out[s, h, ib] = b * c + a * sn


def inv_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """theta^(-2i/head_dim) for i < head_dim/2, computed in float64, returned as float32."""
    return (float(theta) ** (-2.0 * np.arange(head_dim // 2, dtype=np.float64) / head_dim)
            ).astype(np.float32)


def rope(x: np.ndarray, positions: np.ndarray, theta: float = 10000.0,
         layout: str = "neox") -> np.ndarray:
    """Rotary embedding: pair i of each head at position p rotates by p · theta^(-2i/head_dim).

    `x` is `[seq, n_heads, head_dim]` or `[seq, head_dim]` float32 (head_dim even), `positions`
    an integer `[seq]` array; `layout="neox"` pairs i with i + head_dim/2 (rotate-half),
    `"gptj"` pairs 2i with 2i+1 (interleaved).  Returns a new array of x's shape.
    """
    fn = "rope"
    layout = V.choice(fn, "layout", layout, LAYOUTS)
    x_in = V.float32_array(fn, "x", x, (2, 3))
    x3 = x_in if x_in.ndim == 3 else x_in.reshape(x_in.shape[0], 1, x_in.shape[1])
    seq, n_heads, hd = x3.shape
    if hd % 2:
        raise ValueError(f"{fn}: x's head_dim (last axis) must be even, got {hd}")
    positions = V.int_array(fn, "positions", positions, 1)
    if positions.shape[0] != seq:
        raise ValueError(f"{fn}: positions must have {seq} entries (x's first axis), "
                         f"got {positions.shape[0]}")
    theta = V.float_scalar(fn, "theta", theta, positive=True)
    pairs = seq * n_heads * (hd // 2)
    if pairs >= 2**31:
        raise ValueError(f"{fn}: x is too large ({pairs} pairs; at most 2**31-1)")
    out = np.empty_like(x3)
    if pairs:
        rope_kernel[V.ceil_div(pairs, 256), 256](out, x3, positions, inv_frequencies(hd, theta),
                                                 layout == "neox")
    return out.reshape(x_in.shape)
