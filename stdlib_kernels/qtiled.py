"""Quantised GEMM for prefill (m > 8 activation rows): out = x @ dequant(w).T, tiled.

A block of 256 threads owns a 64 (activation rows) × 64 (weight rows) tile of the output and
walks k in steps of 32 (one Q8_0 block, one Q4_K sub-block, two Q6_K scale groups).  Each step
stages x[64 × 32] transposed in shared memory and dequantises w[64 × 32] once into shared memory
(each thread decodes 8 consecutive weights of one row straight from the packed bytes), then every
thread accumulates a 4×4 register block (rows ty + 16i, columns tx + 16j) with the float GEMM's
helpers.  Both tiles have a row stride of 65 words, so the transposing stores spread over the
banks.  One kernel serves all three formats: `FMT` (constexpr) picks the decoder at compile time.
"""
from __future__ import annotations

import pyptx
from pyptx import block_idx, f16, f32, i8, i32, thread_idx, u8, u16, u32

from ._qblock import half_hi, half_lo, pair16, q4k_scale_min_pair
from .gemm import _fma4

TILE = 64
TILE_K = 32
STRIDE = 65
THREADS = 256
#: FMT values
Q4_K, Q6_K, Q8_0 = 0, 1, 2


@pyptx.func
def deq8_q4k(wq, row: i32, nb: i32, kk: i32, dst, col: i32):
    """Weights kk..kk+7 (kk a multiple of 8) of Q4_K row `row` into dst[kk % 32 + e, col]."""
    wb = (row * nb + (kk >> 8)) * 36
    j = (kk >> 5) & 7
    hi = j & 1
    h = wq[wb]
    sc0, sc1, m0, m1 = q4k_scale_min_pair(wq[wb + 1], wq[wb + 2], wq[wb + 3], j >> 1)
    a = half_lo(h) * (sc1 if hi == 1 else sc0)
    o = half_hi(h) * (m1 if hi == 1 else m0)
    qw = wb + 4 + 8 * (j >> 1) + ((kk & 31) >> 2)
    base = kk & 31
    for half in pyptx.static_range(2):
        v = wq[qw + half] >> (4 * hi)
        for e in pyptx.static_range(4):
            dst[base + 4 * half + e, col] = a * f32((v >> (8 * e)) & 15) - o


@pyptx.func
def deq8_q6k(wh, row: i32, nb: i32, kk: i32, dst, col: i32):
    """Weights kk..kk+7 of Q6_K row `row` (u16 words) into dst[kk % 32 + e, col]."""
    wb = (row * nb + (kk >> 8)) * 105
    pos = kk & 255
    h = pos >> 7
    u = (pos >> 5) & 3
    l = pos & 31
    scw = u32(wh[wb + 96 + 4 * h + u]) >> (8 * (l >> 4))
    a = f32(pyptx.bitcast(wh[wb + 104], f16)) * f32(pyptx.bitcast(u8(scw & 0xFF), i8))
    ql = wb + 32 * h + 16 * (u & 1) + (l >> 1)
    qh = wb + 64 + 16 * h + (l >> 1)
    base = kk & 31
    for half in pyptx.static_range(2):
        lo = pair16(wh, ql + 2 * half) >> (4 * (u >> 1))
        hb = pair16(wh, qh + 2 * half) >> (2 * u)
        for e in pyptx.static_range(4):
            q = ((lo >> (8 * e)) & 15) | (((hb >> (8 * e)) & 3) << 4)
            dst[base + 4 * half + e, col] = a * f32(i32(q) - 32)


@pyptx.func
def deq8_q8_0(wh, row: i32, nb: i32, kk: i32, dst, col: i32):
    """Weights kk..kk+7 of Q8_0 row `row` (u16 words) into dst[kk % 32 + e, col]."""
    wb = (row * nb + (kk >> 5)) * 17
    d = f32(pyptx.bitcast(wh[wb], f16))
    q = wb + 1 + ((kk & 31) >> 1)
    base = kk & 31
    for half in pyptx.static_range(2):
        v = pair16(wh, q + 2 * half)
        for e in pyptx.static_range(4):
            dst[base + 4 * half + e, col] = d * f32(pyptx.bitcast(u8((v >> (8 * e)) & 0xFF), i8))


@pyptx.kernel
def qmatmul_tiled_kernel(out: f32[:, :], x: f32[:], w: u8[:], m: i32, n: i32, k: i32,
                         FMT: pyptx.constexpr):
    """out[r, j] = Σ_p x[r·k + p] · dequant(w)[j, p]; a 64×64 tile per 256-thread block."""
    xt = pyptx.shared.array((TILE_K, STRIDE), f32)
    wt = pyptx.shared.array((TILE_K, STRIDE), f32)
    wq = w.view(u32)
    wh = w.view(u16)
    tid = thread_idx.x
    tx = tid & 15
    ty = tid >> 4
    m0 = block_idx.y * TILE
    n0 = block_idx.x * TILE
    nb = k >> 8
    if FMT == Q8_0:
        nb = k >> 5
    jr = tid >> 2                       # weight row of the tile this thread decodes
    kp = (tid & 3) * 8
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
        for i in pyptx.static_range(8):
            idx = tid + THREADS * i
            ar = idx >> 5
            ak = idx & 31
            gr = m0 + ar
            xt[ak, ar] = x[gr * k + k0 + ak] if gr < m else 0.0
        if n0 + jr < n:
            if FMT == Q4_K:
                deq8_q4k(wq, n0 + jr, nb, k0 + kp, wt, jr)
            if FMT == Q6_K:
                deq8_q6k(wh, n0 + jr, nb, k0 + kp, wt, jr)
            if FMT == Q8_0:
                deq8_q8_0(wh, n0 + jr, nb, k0 + kp, wt, jr)
        else:
            for e in pyptx.static_range(8):
                wt[kp + e, jr] = 0.0
        pyptx.syncthreads()
        for kk in pyptx.static_range(TILE_K):
            x0 = xt[kk, ty]
            x1 = xt[kk, ty + 16]
            x2 = xt[kk, ty + 32]
            x3 = xt[kk, ty + 48]
            y0 = wt[kk, tx]
            y1 = wt[kk, tx + 16]
            y2 = wt[kk, tx + 32]
            y3 = wt[kk, tx + 48]
            c00, c01, c02, c03 = _fma4(c00, c01, c02, c03, x0, y0, y1, y2, y3)
            c10, c11, c12, c13 = _fma4(c10, c11, c12, c13, x1, y0, y1, y2, y3)
            c20, c21, c22, c23 = _fma4(c20, c21, c22, c23, x2, y0, y1, y2, y3)
            c30, c31, c32, c33 = _fma4(c30, c31, c32, c33, x3, y0, y1, y2, y3)
        pyptx.syncthreads()
    _store_row(out, m0 + ty, n0 + tx, m, n, c00, c01, c02, c03)
    _store_row(out, m0 + ty + 16, n0 + tx, m, n, c10, c11, c12, c13)
    _store_row(out, m0 + ty + 32, n0 + tx, m, n, c20, c21, c22, c23)
    _store_row(out, m0 + ty + 48, n0 + tx, m, n, c30, c31, c32, c33)


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
