"""The two data-movement kernels of a prefill: the cache's pages → head-major K/V (and f16 →
f32), and a swap of the first two axes (token-major q → head-major for `flash_attention`, and
its output back).  `flash_attention` takes contiguous `[heads, seq, head_dim]` float32 (or
f16/bf16) arrays, while the matmuls produce token-major rows and the KV cache is paged.

A thread per output element: these move n·heads·head_dim floats once per layer, a small share of
a prefill next to the matmuls (and contiguous in the output, so the stores coalesce).
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import f32

from .. import _validate as V

THREADS = 256


@pyptx.kernel
def gather_heads_kernel(out: f32[:, :, :], pages, PS: pyptx.constexpr):
    """out[g, t, e] = pages[t // PS, g, t % PS, e] for the first L = out.shape[1] tokens of a
    sequence whose pages are 0, 1, ... in order (f16 or f32 pages; f32 out)."""
    i = pyptx.grid(1)
    n_kv = out.shape[0]
    L = out.shape[1]
    d = out.shape[2]
    if i < n_kv * L * d:
        e = i % d
        t = (i // d) % L
        g = i // (d * L)
        out[g, t, e] = f32(pages[t // PS, g, t % PS, e])


@pyptx.kernel
def swap01_kernel(out: f32[:, :, :], x: f32[:, :, :]):
    """out[b, a, e] = x[a, b, e]."""
    i = pyptx.grid(1)
    A = x.shape[0]
    B = x.shape[1]
    d = x.shape[2]
    if i < A * B * d:
        e = i % d
        b = (i // d) % B
        a = i // (d * B)
        out[b, a, e] = x[a, b, e]


def gather_heads(pages, length: int):
    """Head-major float32 `[n_kv_heads, length, head_dim]` K or V of the sequence's first
    `length` tokens (pages `[num_pages, n_kv_heads, page_size, head_dim]`, f16 or f32)."""
    _, n_kv, ps, d = pages.shape
    out = V.empty((n_kv, length, d), np.float32, pages)
    n = n_kv * length * d
    if n:
        gather_heads_kernel[V.ceil_div(n, THREADS), THREADS](out, pages, ps)
    return out


def swap01(x):
    """`x` `[A, B, d]` float32 → `[B, A, d]` (a new array)."""
    A, B, d = x.shape
    out = V.empty((B, A, d), np.float32, x)
    n = A * B * d
    if n:
        swap01_kernel[V.ceil_div(n, THREADS), THREADS](out, x)
    return out
