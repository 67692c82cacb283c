"""The two data-movement kernels of a prefill: the cache's pages → head-major K/V (and f16 →
f32), and a swap of the first two axes (token-major q → head-major for `flash_attention`, and
its output back).  `flash_attention` takes contiguous `[heads, seq, head_dim]` float32 (or
f16/bf16) arrays, while the matmuls produce token-major rows and the KV cache is paged.

Each thread moves 16 bytes (one 128-bit load, one 128-bit store per 4 floats) on a 2-D grid:
grid.y is the row axis the kernel walks (a head of the cache, a token or head of the swap), so
a thread finds its (row, column) with no division by a runtime value, and head_dim / page_size
are compile-time constants (the model fixes them: `//` and `%` are shifts).  The per-element
kernels stay as the fallback for head_dim not a multiple of the vector and more than 65535 rows
on grid.y (docs/benchmarks.md, "Data movement", has the SASS before/after).
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx

from .. import _validate as V

THREADS = 256
#: grid.y's limit (the token/head axis rides on it)
_GRID_Y = 65535


@pyptx.kernel
def gather_heads_vec_kernel(out: f32[:], pages: f32[:], KV: i32, L: i32,
                            PS: pyptx.constexpr, D: pyptx.constexpr, VEC: pyptx.constexpr):
    """The flat `out` [KV, L, D] = pages [P, KV, PS, D] of tokens 0..L-1 (pages 0, 1, ... in
    order), head g = block_idx.y; a thread per VEC consecutive elements of a token's row: one
    16-byte load (4 f32 or 8 f16) and VEC/4 16-byte stores.  D, PS constexpr (the model fixes
    them), so `//` and `%` by them are shifts for powers of two; D % VEC == 0."""
    g = block_idx.y
    j = block_idx.x * THREADS + thread_idx.x          # (token, chunk) of head g
    if j < L * (D // VEC):
        t = j // (D // VEC)
        e = (j % (D // VEC)) * VEC
        src = (((t // PS) * KV + g) * PS + t % PS) * D + e
        dst = (g * L + t) * D + e
        v = pyptx.vload(pages, src, VEC)
        for k in pyptx.static_range(VEC // 4):
            pyptx.vstore(out, dst + 4 * k, (f32(v[4 * k]), f32(v[4 * k + 1]),
                                            f32(v[4 * k + 2]), f32(v[4 * k + 3])))


@pyptx.kernel
def gather_heads_kernel(out: f32[:, :, :], pages, PS: pyptx.constexpr):
    """out[g, t, e] = pages[t // PS, g, t % PS, e] for the first L = out.shape[1] tokens of a
    sequence whose pages are 0, 1, ... in order (f16 or f32 pages; f32 out).  The fallback: a
    thread per element (head_dim not a multiple of the vector, > 65535 KV heads)."""
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
def swap01_vec_kernel(out: f32[:], x: f32[:], A: i32, B: i32, D: pyptx.constexpr):
    """The flat `out` [B, A, D] = x [A, B, D] transposed on its first two axes: a = block_idx.y,
    a thread per 4 floats of one row x[a, b, :] (one 128-bit load and store; the reads of a
    block are consecutive, the writes D floats at a time).  D constexpr, D % 4 == 0."""
    a = block_idx.y
    j = block_idx.x * THREADS + thread_idx.x          # (b, chunk) of row a
    if j < B * (D // 4):
        b = j // (D // 4)
        e = (j % (D // 4)) * 4
        pyptx.vstore(out, (b * A + a) * D + e, pyptx.vload(x, (a * B + b) * D + e, 4))


@pyptx.kernel
def swap01_kernel(out: f32[:, :, :], x: f32[:, :, :]):
    """out[b, a, e] = x[a, b, e]: the fallback, a thread per element (d not a multiple of 4, or
    more than 65535 rows on the first axis)."""
    i = pyptx.grid(1)
    A = x.shape[0]
    B = x.shape[1]
    d = x.shape[2]
    if i < A * B * d:
        e = i % d
        b = (i // d) % B
        a = i // (d * B)
        out[b, a, e] = x[a, b, e]


def typed(kernel, suffix: str, signature: tuple):
    """`kernel` compiled for `signature` under the name kernel.name + suffix (one Kernel object
    per combination, so one compile): the float16-page instances, and the catalog's typed
    instances of the fallback gather_heads_kernel (whose pages are typed at the launch)."""
    k = _TYPED.get((kernel.name, suffix))
    if k is None:
        k = _TYPED[(kernel.name, suffix)] = pyptx.Kernel(
            kernel.py_func, fma=kernel.fma, opt_level=kernel.opt_level,
            constexprs=kernel.constexprs, signature=signature, name=kernel.name + suffix)
    return k


_TYPED: dict = {}


def gather_heads_f16_kernel():
    """gather_heads_vec_kernel reading float16 pages (8 halves = 16 bytes a thread)."""
    return typed(gather_heads_vec_kernel, "_f16",
                 (f32[:], pyptx.f16[:], i32, i32, pyptx.constexpr, pyptx.constexpr,
                  pyptx.constexpr))


def gather_vec(dtype) -> int:
    """Elements per 16-byte load of pages of `dtype`."""
    return 16 // np.dtype(dtype).itemsize


def gather_heads(pages, length: int):
    """Head-major float32 `[n_kv_heads, length, head_dim]` K or V of the sequence's first
    `length` tokens (pages `[num_pages, n_kv_heads, page_size, head_dim]`, f16 or f32)."""
    _, n_kv, ps, d = pages.shape
    out = V.empty((n_kv, length, d), np.float32, pages)
    n = n_kv * length * d
    if not n:
        return out
    vec = gather_vec(pages.dtype)
    if d % vec == 0 and n_kv <= _GRID_Y:
        k = gather_heads_vec_kernel if vec == 4 else gather_heads_f16_kernel()
        k[(V.ceil_div(length * (d // vec), THREADS), n_kv), THREADS](
            out.reshape(-1), pages.reshape(-1), n_kv, length, ps, d, vec)
    else:
        gather_heads_kernel[V.ceil_div(n, THREADS), THREADS](out, pages, ps)
    return out


def swap01(x):
    """`x` `[A, B, d]` float32 → `[B, A, d]` (a new array)."""
    A, B, d = x.shape
    out = V.empty((B, A, d), np.float32, x)
    n = A * B * d
    if not n:
        return out
    if d % 4 == 0 and A <= _GRID_Y:
        swap01_vec_kernel[(V.ceil_div(B * (d // 4), THREADS), A), THREADS](
            out.reshape(-1), x.reshape(-1), A, B, d)
    else:
        swap01_kernel[V.ceil_div(n, THREADS), THREADS](out, x)
    return out
