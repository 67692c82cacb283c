"""float32 GEMM, C = A @ B: a naive kernel and a shared-memory tiled, register-blocked one.

Tiled: a block of 256 threads owns a 64×64 tile of C and walks K in steps of 16.  Each step stages
A[64×16] (transposed, padded against bank conflicts) and B[16×64] in shared memory with coalesced
loads, zero-filling past the matrix edges, so any M, N, K work.  Each thread keeps a 4×4 block of
C in 16 scalar registers (rows ty + 16·i, columns tx + 16·j: conflict-free shared reads and
coalesced stores) and does 16 FMAs per 8 shared loads.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx

from . import _validate as V

#: tile geometry of the tiled kernel (the 4×4 register block below is written out for these)
TILE_M = 64
TILE_N = 64
TILE_K = 16
#: row stride of the transposed A tile in shared memory: 64 + 1 so column writes hit 16 banks
A_TILE_STRIDE = 65
TILED_THREADS = 256
NAIVE_BLOCK = 16

VARIANTS = ("naive", "tiled")


@pyptx.kernel
def gemm_naive_kernel(c: f32[:, :], a: f32[:, :], b: f32[:, :]):
    """One thread per element of C: c[i, j] = Σ_k a[i, k] b[k, j]."""
    col, row = pyptx.grid(2)
    m = a.shape[0]
    k = a.shape[1]
    n = b.shape[1]
    if row < m and col < n:
        acc = 0.0
        for p in range(k):
            acc += a[row, p] * b[p, col]
        c[row, col] = acc


@pyptx.func
def _fma4(c0: f32, c1: f32, c2: f32, c3: f32, x: f32, y0: f32, y1: f32, y2: f32, y3: f32):
    """One row of the 4×4 outer-product update: c_j += x · y_j."""
    return c0 + x * y0, c1 + x * y1, c2 + x * y2, c3 + x * y3


@pyptx.kernel
def gemm_tiled_kernel(c: f32[:, :], a: f32[:, :], b: f32[:, :]):
    """64×64 tile of C per 256-thread block, 4×4 outputs per thread, K in steps of 16."""
    a_tile = pyptx.shared.array((TILE_K, A_TILE_STRIDE), f32)
    b_tile = pyptx.shared.array((TILE_K, TILE_N), f32)
    m = a.shape[0]
    k = a.shape[1]
    n = b.shape[1]
    tid = thread_idx.x
    tx = tid % 16
    ty = tid // 16
    m0 = block_idx.y * TILE_M
    n0 = block_idx.x * TILE_N
    c00 = 0.0
    c01 = 0.0
    c02 = 0.0
    c03 = 0.0
    c10 = 0.0
    c11 = 0.0
    c12 = 0.0
    c13 = 0.0
    c20 = 0.0
    c21 = 0.0
    c22 = 0.0
    c23 = 0.0
    c30 = 0.0
    c31 = 0.0
    c32 = 0.0
    c33 = 0.0
    for k0 in range(0, k, TILE_K):
        for i in pyptx.static_range(4):
            idx = tid + TILED_THREADS * i
            ar = idx // TILE_K
            ak = idx % TILE_K
            gr = m0 + ar
            gk = k0 + ak
            a_tile[ak, ar] = a[gr, gk] if (gr < m and gk < k) else 0.0
            bk = idx // TILE_N
            bc = idx % TILE_N
            gk2 = k0 + bk
            gc = n0 + bc
            b_tile[bk, bc] = b[gk2, gc] if (gk2 < k and gc < n) else 0.0
        pyptx.syncthreads()
        for kk in pyptx.static_range(TILE_K):
            x0 = a_tile[kk, ty]
            x1 = a_tile[kk, ty + 16]
            x2 = a_tile[kk, ty + 32]
            x3 = a_tile[kk, ty + 48]
            y0 = b_tile[kk, tx]
            y1 = b_tile[kk, tx + 16]
            y2 = b_tile[kk, tx + 32]
            y3 = b_tile[kk, tx + 48]
            c00, c01, c02, c03 = _fma4(c00, c01, c02, c03, x0, y0, y1, y2, y3)
            c10, c11, c12, c13 = _fma4(c10, c11, c12, c13, x1, y0, y1, y2, y3)
            c20, c21, c22, c23 = _fma4(c20, c21, c22, c23, x2, y0, y1, y2, y3)
            c30, c31, c32, c33 = _fma4(c30, c31, c32, c33, x3, y0, y1, y2, y3)
        pyptx.syncthreads()
    r0 = m0 + ty
    col0 = n0 + tx
    _store_row(c, r0, col0, m, n, c00, c01, c02, c03)
    _store_row(c, r0 + 16, col0, m, n, c10, c11, c12, c13)
    _store_row(c, r0 + 32, col0, m, n, c20, c21, c22, c23)
    _store_row(c, r0 + 48, col0, m, n, c30, c31, c32, c33)


@pyptx.func
def _store_row(c: f32[:, :], row: i32, col0: i32, m: i32, n: i32,
               v0: f32, v1: f32, v2: f32, v3: f32):
    """Store one row of a thread's 4×4 block (columns col0 + 16·j), skipping what is outside C."""
    if row < m:
        if col0 < n:
            c[row, col0] = v0
        if col0 + 16 < n:
            c[row, col0 + 16] = v1
        if col0 + 32 < n:
            c[row, col0 + 32] = v2
        if col0 + 48 < n:
            c[row, col0 + 48] = v3


def gemm(a: np.ndarray, b: np.ndarray, variant: str = "tiled") -> np.ndarray:
    """C = A @ B in float32: c[i, j] = Σ_k a[i, k] · b[k, j] (float32 accumulation).

    `a` is `[m, k]`, `b` `[k, n]`, any sizes.  `variant` is `"naive"` (one thread per output) or
    `"tiled"` (shared-memory tiles, 4×4 register blocking).  `"tensor_core"` takes float16 (or
    bfloat16) `a`, `b` and multiplies on tensor cores with float32 accumulation (gemm_tc.py).
    """
    if variant == "tensor_core":
        from .gemm_tc import gemm_tensor_core
        return gemm_tensor_core(a, b)
    variant = V.choice("gemm", "variant", variant, VARIANTS)
    a = V.float32_array("gemm", "a", a, (2,))
    b = V.float32_array("gemm", "b", b, (2,))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm: b must have {a.shape[1]} rows (a's columns), got shape {b.shape}")
    m, n = a.shape[0], b.shape[1]
    c = np.empty((m, n), np.float32)
    if m == 0 or n == 0:
        return c
    if variant == "naive":
        grid = (V.ceil_div(n, NAIVE_BLOCK), V.ceil_div(m, NAIVE_BLOCK))
        gemm_naive_kernel[grid, (NAIVE_BLOCK, NAIVE_BLOCK)](c, a, b)
    else:
        grid = (V.ceil_div(n, TILE_N), V.ceil_div(m, TILE_M))
        gemm_tiled_kernel[grid, TILED_THREADS](c, a, b)
    return c
