"""Rotary position embedding (RoPE), NeoX (rotate-half) and GPT-J (interleaved) layouts.

Pair i (i < head_dim/2) of a head at position p rotates by θ_i = p · theta^(-2i/head_dim):
(a, b) → (a·cos θ_i − b·sin θ_i, b·cos θ_i + a·sin θ_i).  NeoX pairs element i with i + head_dim/2,
GPT-J pairs 2i with 2i+1.  The inverse frequencies theta^(-2i/head_dim) are computed once on the
host in float64 and rounded to float32 (what HF/llama.cpp do), the angle p·inv_freq in float32,
and sin/cos with pyptx.math's accurate functions.

One block per position: its threads first compute the head_dim/2 cosines and sines of that
position once into (dynamic) shared memory, then rotate every head with 128-bit loads — NeoX
4 pairs per access (head_dim a multiple of 8), GPT-J 2 pairs (4 elements, head_dim a multiple of
4).  Other head_dims (VEC = 1) cut each head into 4-float chunks on the array's 16-byte grid
(`_rows`), so they too read and write 128-bit chunks, partial ones only at a head's two ends.
So each (position, pair) angle is computed once, not per head.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, i32, thread_idx

from . import _validate as V
from ._args import result, stdlib_function
from ._rows import load4_masked, load_col4_masked, row_head, store4_masked

LAYOUTS = ("neox", "gptj")
#: threads per block (one block per position)
ROPE_THREADS = 128


@pyptx.func
def _rot(a: f32, b: f32, c: f32, sn: f32):
    """(a, b) rotated by the angle whose cosine and sine are c, sn."""
    return a * c - b * sn, b * c + a * sn


@pyptx.kernel
def rope_kernel(out: f32[:, :, :], x: f32[:, :, :], positions: i32[:], inv_freq: f32[:],
                NEOX: pyptx.constexpr, VEC: pyptx.constexpr):
    """out[s, h] = x[s, h] with every pair rotated by positions[s] · inv_freq[pair]; block s
    handles position s; VEC pairs per access (NEOX: 4, GPT-J: 2), or VEC = 1 for any even
    head_dim: 128-bit chunks on the array's grid (`rope_chunks`).  Needs
    head_dim · 4 bytes of dynamic shared memory (the cos/sin table)."""
    tab = pyptx.shared.dynamic(f32)                  # cos θ_i at [i], sin θ_i at [half + i]
    s = block_idx.x
    tid = thread_idx.x
    n_heads = x.shape[1]
    half = x.shape[2] // 2
    pos = f32(positions[s])
    for i in range(tid, half, block_dim.x):
        angle = pos * inv_freq[i]
        tab[i] = pyptx.math.cos(angle)
        tab[half + i] = pyptx.math.sin(angle)
    pyptx.syncthreads()
    if VEC == 1:
        rope_chunks(out[s], x[s], tab, s, n_heads, half, NEOX)
        return
    groups = half // VEC
    for w in range(tid, n_heads * groups, block_dim.x):
        h = w // groups
        i = (w % groups) * VEC
        if NEOX:
            a0, a1, a2, a3 = pyptx.vload(x, (s, h, i), 4)
            b0, b1, b2, b3 = pyptx.vload(x, (s, h, i + half), 4)
            c0, c1, c2, c3 = pyptx.vload(tab, i, 4)
            s0, s1, s2, s3 = pyptx.vload(tab, half + i, 4)
            o0, p0 = _rot(a0, b0, c0, s0)
            o1, p1 = _rot(a1, b1, c1, s1)
            o2, p2 = _rot(a2, b2, c2, s2)
            o3, p3 = _rot(a3, b3, c3, s3)
            pyptx.vstore(out, (s, h, i), (o0, o1, o2, o3))
            pyptx.vstore(out, (s, h, i + half), (p0, p1, p2, p3))
        else:
            a0, b0, a1, b1 = pyptx.vload(x, (s, h, 2 * i), 4)
            c0, c1 = pyptx.vload(tab, i, 2)
            s0, s1 = pyptx.vload(tab, half + i, 2)
            o0, p0 = _rot(a0, b0, c0, s0)
            o1, p1 = _rot(a1, b1, c1, s1)
            pyptx.vstore(out, (s, h, 2 * i), (o0, p0, o1, p1))


@pyptx.func
def rope_chunks(out, x, tab, s, n_heads, half, NEOX):
    """VEC = 1 (head_dim not a multiple of 8 (NeoX) / 4 (GPT-J)): `x`, `out` are position s's
    [n_heads, head_dim] rows, read and written in 4-float chunks on the array's 16-byte grid
    (`_rows`: head h starts ((s·n_heads + h)·head_dim) mod 4 floats past it, so its first and
    last chunk may be partial).  NeoX chunks the first half of each head — 4 pairs, their
    partners head_dim/2 further on, a different grid, read and written one at a time; GPT-J
    chunks the whole head — 2 interleaved pairs per chunk (head_dim is even, so the row starts
    an even number of floats past the grid and chunks never split a pair)."""
    hd = 2 * half
    span = half if NEOX else hd
    per_head = (span + 6) // 4                 # chunks of a span that starts ≤ 3 floats late
    for w in range(pyptx.thread_idx.x, n_heads * per_head, pyptx.block_dim.x):
        h = w // per_head
        i = (w % per_head) * 4 - row_head(s * n_heads + h, hd, 1)
        if i < span:
            if i >= 0 and i + 4 <= span:       # the chunk lies inside the span: no masks
                rope_chunk(out, x, tab, h, i, half, NEOX, True)
            else:
                rope_chunk(out, x, tab, h, i, half, NEOX, False)


@pyptx.func
def rope_chunk(out, x, tab, h, i, half, NEOX, FULL):
    """Rotates chunk i (−3 ≤ i < span) of head h: FULL (all four columns inside the span) with
    one 128-bit load and store of x's chunk and unmasked partner/table reads, else masked."""
    if NEOX:
        if FULL:
            a0, a1, a2, a3 = pyptx.vload(x, (h, i), 4)
            b0, b1, b2, b3 = x[h, i + half], x[h, i + half + 1], x[h, i + half + 2], \
                x[h, i + half + 3]
            c0, c1, c2, c3 = tab[i], tab[i + 1], tab[i + 2], tab[i + 3]
            s0, s1, s2, s3 = tab[half + i], tab[half + i + 1], tab[half + i + 2], \
                tab[half + i + 3]
        else:
            a0, a1, a2, a3 = load4_masked(x, h, i, 0, half, 0.0)
            b0, b1, b2, b3 = load4_masked(x, h, i, half, half, 0.0)
            c0, c1, c2, c3 = load_col4_masked(tab, i, 0, half)
            s0, s1, s2, s3 = load_col4_masked(tab, i, half, half)
        o0, p0 = _rot(a0, b0, c0, s0)
        o1, p1 = _rot(a1, b1, c1, s1)
        o2, p2 = _rot(a2, b2, c2, s2)
        o3, p3 = _rot(a3, b3, c3, s3)
        if FULL:
            pyptx.vstore(out, (h, i), (o0, o1, o2, o3))
            out[h, i + half] = p0
            out[h, i + half + 1] = p1
            out[h, i + half + 2] = p2
            out[h, i + half + 3] = p3
        else:
            store4_masked(out, h, i, 0, half, o0, o1, o2, o3)
            store4_masked(out, h, i, half, half, p0, p1, p2, p3)
    else:
        q = i // 2                             # pairs q and q + 1 (q = −1: the head's head)
        if FULL:
            a0, b0, a1, b1 = pyptx.vload(x, (h, i), 4)
            c0, c1, s0, s1 = tab[q], tab[q + 1], tab[half + q], tab[half + q + 1]
        else:
            a0, b0, a1, b1 = load4_masked(x, h, i, 0, 2 * half, 0.0)
            c0, c1, s0, s1 = pair_table(tab, q, half)
        o0, p0 = _rot(a0, b0, c0, s0)
        o1, p1 = _rot(a1, b1, c1, s1)
        if FULL:
            pyptx.vstore(out, (h, i), (o0, p0, o1, p1))
        else:
            store4_masked(out, h, i, 0, 2 * half, o0, p0, o1, p1)


@pyptx.func
def pair_table(tab, q, half):
    """cos and sin of pairs q and q + 1 (0 for a pair outside [0, half))."""
    c0 = f32(0.0)
    c1 = f32(0.0)
    s0 = f32(0.0)
    s1 = f32(0.0)
    if q >= 0:
        c0 = tab[q]
        s0 = tab[half + q]
    if q + 1 < half:
        c1 = tab[q + 1]
        s1 = tab[half + q + 1]
    return c0, c1, s0, s1


def rope_vec(head_dim: int, neox: bool) -> int:
    """Pairs per access: NeoX 4 when head_dim % 8 == 0, GPT-J 2 when head_dim % 4 == 0, else 1
    (128-bit chunks on the array's grid, heads not 16-byte aligned)."""
    if neox:
        return 4 if head_dim % 8 == 0 else 1
    return 2 if head_dim % 4 == 0 else 1


def inv_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """theta^(-2i/head_dim) for i < head_dim/2, computed in float64, returned as float32."""
    return (float(theta) ** (-2.0 * np.arange(head_dim // 2, dtype=np.float64) / head_dim)
            ).astype(np.float32)


@stdlib_function
def rope(x, positions, theta: float = 10000.0, layout: str = "neox", *, out=None):
    """Rotary embedding: pair i of each head at position p rotates by p · theta^(-2i/head_dim).

    `x` is `[seq, n_heads, head_dim]` or `[seq, head_dim]` float32 (head_dim even), `positions`
    an integer `[seq]` array; `layout="neox"` pairs i with i + head_dim/2 (rotate-half),
    `"gptj"` pairs 2i with 2i+1 (interleaved).  Returns a new array of x's shape (or fills
    `out`).
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
    res = result(fn, out, x_in.shape, np.float32, x_in)
    if pairs:
        neox = layout == "neox"
        inv = V.constant_like(("rope.inv_frequencies", hd, theta),
                              lambda: inv_frequencies(hd, theta), x3)
        rope_kernel[seq, ROPE_THREADS](res.reshape(x3.shape), x3, positions, inv, neox,
                                       rope_vec(hd, neox), shared_mem=4 * hd)
    return res
