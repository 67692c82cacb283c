"""float32 GEMM, C = A @ B: a naive kernel and a shared-memory tiled, register-blocked one.

Tiled: a block of 256 threads owns a 64×64 tile of C and walks K in steps of 16.  Each step stages
A[64×16] (transposed, so a thread's 4 rows of one k are adjacent) and B[16×64] in shared memory:
one 128-bit global load per thread and matrix when VEC = 4 (k and n multiples of 4, so every row
starts 16-byte aligned), else scalar loads; tiles past the matrix edges are zero-filled, so any
M, N, K work.  Each thread keeps a 4×4 block of C (rows 4·ty .. 4·ty+3, columns 4·tx .. 4·tx+3)
in 16 scalar registers and, for each of the 16 k of a step (unrolled), reads its 4 A and 4 B
values with two 128-bit shared loads and does 16 FMAs.
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
#: row stride of the transposed A tile in shared memory: a multiple of 4 (128-bit reads) that
#: is not a multiple of 32, so the transposing writes spread over banks
A_TILE_STRIDE = 68
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


@pyptx.func
def _load_quad(g, row: i32, col: i32, rows: i32, cols: i32, VEC):
    """g[row, col .. col+3], zero outside the matrix: one 128-bit load when VEC == 4 (then the
    quad is entirely inside or outside, cols being a multiple of 4)."""
    v0 = f32(0.0)
    v1 = f32(0.0)
    v2 = f32(0.0)
    v3 = f32(0.0)
    if row < rows:
        if VEC == 4:
            if col < cols:
                v0, v1, v2, v3 = pyptx.vload(g, (row, col), 4)
        else:
            if col < cols:
                v0 = g[row, col]
            if col + 1 < cols:
                v1 = g[row, col + 1]
            if col + 2 < cols:
                v2 = g[row, col + 2]
            if col + 3 < cols:
                v3 = g[row, col + 3]
    return v0, v1, v2, v3


@pyptx.kernel
def gemm_tiled_kernel(c: f32[:, :], a: f32[:, :], b: f32[:, :], VEC: pyptx.constexpr):
    """64×64 tile of C per 256-thread block, 4×4 outputs per thread, K in steps of 16; VEC = 4
    needs k and n to be multiples of 4 (128-bit global loads and stores), VEC = 1 takes any."""
    a_tile = pyptx.shared.array((TILE_K, A_TILE_STRIDE), f32)    # a_tile[kk, r] = A[m0+r, k0+kk]
    b_tile = pyptx.shared.array((TILE_K, TILE_N), f32)
    m = a.shape[0]
    k = a.shape[1]
    n = b.shape[1]
    tid = thread_idx.x
    tx = tid % 16
    ty = tid // 16
    m0 = block_idx.y * TILE_M
    n0 = block_idx.x * TILE_N
    ar = tid // 4                     # this thread stages A[m0 + ar, k0 + aq .. +3] ...
    aq = tid % 4 * 4
    bk = tid // 16                    # ... and B[k0 + bk, n0 + bq .. +3]
    bq = tid % 16 * 4
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
        p0, p1, p2, p3 = _load_quad(a, m0 + ar, k0 + aq, m, k, VEC)
        a_tile[aq, ar] = p0
        a_tile[aq + 1, ar] = p1
        a_tile[aq + 2, ar] = p2
        a_tile[aq + 3, ar] = p3
        pyptx.vstore(b_tile, (bk, bq), _load_quad(b, k0 + bk, n0 + bq, k, n, VEC))
        pyptx.syncthreads()
        for kk in pyptx.static_range(TILE_K):
            x0, x1, x2, x3 = pyptx.vload(a_tile, (kk, ty * 4), 4)
            y0, y1, y2, y3 = pyptx.vload(b_tile, (kk, tx * 4), 4)
            c00, c01, c02, c03 = _fma4(c00, c01, c02, c03, x0, y0, y1, y2, y3)
            c10, c11, c12, c13 = _fma4(c10, c11, c12, c13, x1, y0, y1, y2, y3)
            c20, c21, c22, c23 = _fma4(c20, c21, c22, c23, x2, y0, y1, y2, y3)
            c30, c31, c32, c33 = _fma4(c30, c31, c32, c33, x3, y0, y1, y2, y3)
        pyptx.syncthreads()
    r0 = m0 + ty * 4
    col0 = n0 + tx * 4
    _store_quad(c, r0, col0, m, n, c00, c01, c02, c03, VEC)
    _store_quad(c, r0 + 1, col0, m, n, c10, c11, c12, c13, VEC)
    _store_quad(c, r0 + 2, col0, m, n, c20, c21, c22, c23, VEC)
    _store_quad(c, r0 + 3, col0, m, n, c30, c31, c32, c33, VEC)


@pyptx.func
def _store_quad(c: f32[:, :], row: i32, col0: i32, m: i32, n: i32,
                v0: f32, v1: f32, v2: f32, v3: f32, VEC):
    """c[row, col0 .. col0+3] = v, skipping what is outside C (one 128-bit store when VEC == 4)."""
    if row < m:
        if VEC == 4:
            if col0 < n:
                pyptx.vstore(c, (row, col0), (v0, v1, v2, v3))
        else:
            if col0 < n:
                c[row, col0] = v0
            if col0 + 1 < n:
                c[row, col0 + 1] = v1
            if col0 + 2 < n:
                c[row, col0 + 2] = v2
            if col0 + 3 < n:
                c[row, col0 + 3] = v3


def tiled_vec(k: int, n: int) -> int:
    """128-bit global accesses (4) when every row of A and B starts 16-byte aligned, else 1."""
    return 4 if k % 4 == 0 and n % 4 == 0 else 1


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
        gemm_tiled_kernel[grid, TILED_THREADS](c, a, b, tiled_vec(a.shape[1], n))
    return c
