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
from .gemm import _fma4x4, _store_quad

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
    acc = ((0.0,) * 4,) * 4           # acc[i][j]: out[m0 + ty + 16i, n0 + tx + 16j]
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
            acc = _fma4x4(acc, _strided4(xt, kk, ty), _strided4(wt, kk, tx))
        pyptx.syncthreads()
    for i in pyptx.static_range(4):          # columns n0 + tx + 16j
        _store_quad(out, m0 + ty + 16 * i, n0 + tx, m, n, acc[i], 1, 16)


@pyptx.func
def _strided4(tile, kk: i32, j: i32):
    """tile[kk, j + 16·i] for i < 4: one thread's operands of a 4×4 block step."""
    return tile[kk, j], tile[kk, j + 16], tile[kk, j + 32], tile[kk, j + 48]
