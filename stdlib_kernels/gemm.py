"""float32 GEMM, C = A @ B: a naive kernel and a shared-memory tiled, register-blocked one.

Tiled: a block of 256 threads owns a 64×64 tile of C and walks K in steps of 16.  Each step stages
A[64×16] (transposed, so a thread's 4 rows of one k are adjacent) and B[16×64] in shared memory:
one 128-bit global load per thread and matrix when VEC = 4 (k and n multiples of 4, so every row
starts 16-byte aligned), else scalar loads; tiles past the matrix edges are zero-filled, so any
M, N, K work.  Each thread keeps a 4×4 block of C (rows 4·ty .. 4·ty+3, columns 4·tx .. 4·tx+3)
in 16 scalar registers (a tuple of four row tuples) and, for each of the 16 k of a step
(unrolled), reads its 4 A and 4 B values with two 128-bit shared loads and does 16 FMAs."""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx

from . import _validate as V
from ._args import result, stdlib_function

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
def _fma4x4(acc, xs, ys):
    """A 4×4 register block (a tuple of 4 row tuples) after the rank-1 update acc[i][j] +=
    xs[i] · ys[j] (the tiled float and quantised GEMMs' inner step, 16 FMAs)."""
    out = ()
    for i in pyptx.static_range(4):
        r = acc[i]
        out = out + (_fma4(r[0], r[1], r[2], r[3], xs[i], ys[0], ys[1], ys[2], ys[3]),)
    return out


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
    acc = ((0.0,) * 4,) * 4           # acc[i][j]: C[m0 + 4·ty + i, n0 + 4·tx + j]
    for k0 in range(0, k, TILE_K):
        p0, p1, p2, p3 = _load_quad(a, m0 + ar, k0 + aq, m, k, VEC)
        a_tile[aq, ar] = p0
        a_tile[aq + 1, ar] = p1
        a_tile[aq + 2, ar] = p2
        a_tile[aq + 3, ar] = p3
        pyptx.vstore(b_tile, (bk, bq), _load_quad(b, k0 + bk, n0 + bq, k, n, VEC))
        pyptx.syncthreads()
        for kk in pyptx.static_range(TILE_K):
            acc = _fma4x4(acc, pyptx.vload(a_tile, (kk, ty * 4), 4),
                          pyptx.vload(b_tile, (kk, tx * 4), 4))
        pyptx.syncthreads()
    r0 = m0 + ty * 4
    col0 = n0 + tx * 4
    for i in pyptx.static_range(4):
        _store_quad(c, r0 + i, col0, m, n, acc[i], VEC, 1)


@pyptx.func
def _store_quad(c: f32[:, :], row: i32, col0: i32, m: i32, n: i32, v, VEC, STEP):
    """c[row, col0 + STEP·j] = v[j] for j < 4, skipping what is outside C (one 128-bit store
    when VEC == 4, which needs STEP == 1)."""
    if row < m:
        if VEC == 4:
            if col0 < n:
                pyptx.vstore(c, (row, col0), v)
        else:
            for j in pyptx.static_range(4):
                if col0 + STEP * j < n:
                    c[row, col0 + STEP * j] = v[j]


def tiled_vec(k: int, n: int) -> int:
    """128-bit global accesses (4) when every row of A and B starts 16-byte aligned, else 1."""
    return 4 if k % 4 == 0 and n % 4 == 0 else 1


@stdlib_function
def gemm(a, b, variant: str = "tiled", *, out=None):
    """C = A @ B in float32: c[i, j] = Σ_k a[i, k] · b[k, j] (float32 accumulation).

    `a` is `[m, k]`, `b` `[k, n]`, any sizes.  `variant` is `"naive"` (one thread per output) or
    `"tiled"` (shared-memory tiles, 4×4 register blocking).  `"tensor_core"` takes float16 (or
    bfloat16) `a`, `b` and multiplies on tensor cores with float32 accumulation: on an sm_90 GPU
    (Hopper) with the TMA + wgmma kernel (gemm_wgmma.py), elsewhere (older GPUs, the CPU
    executor) with mma.sync (gemm_tc.py).  `"wgmma"` asks for the Hopper kernel wherever the
    launch runs (the CPU executor runs its sm_90a PTX).
    The result is a new float32 `[m, n]` array where the inputs live (or `out`).
    """
    variant = V.choice("gemm", "variant", variant, VARIANTS + ("tensor_core", "wgmma"))
    if variant == "tensor_core":
        from .gemm_wgmma import hopper_launch
        variant = "wgmma" if hopper_launch() else variant
    if variant == "wgmma":
        from .gemm_wgmma import gemm_wgmma
        return gemm_wgmma(a, b, out)
    if variant == "tensor_core":
        from .gemm_tc import gemm_tensor_core
        return gemm_tensor_core(a, b, out)
    a = V.float32_array("gemm", "a", a, (2,))
    b = V.float32_array("gemm", "b", b, (2,))
    if V.is_device(a) != V.is_device(b):
        from .gemm_tc import same_place
        same_place("gemm", "b", b, a, "a")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm: b must have {a.shape[1]} rows (a's columns), got shape "
                         f"{tuple(b.shape)}")
    m, n = a.shape[0], b.shape[1]
    c = result("gemm", out, (m, n), np.float32, a)
    if m == 0 or n == 0:
        return c
    if variant == "naive":
        grid = (V.ceil_div(n, NAIVE_BLOCK), V.ceil_div(m, NAIVE_BLOCK))
        gemm_naive_kernel[grid, (NAIVE_BLOCK, NAIVE_BLOCK)](c, a, b)
    else:
        grid = (V.ceil_div(n, TILE_N), V.ceil_div(m, TILE_M))
        gemm_tiled_kernel[grid, TILED_THREADS](c, a, b, tiled_vec(a.shape[1], n))
    return c
