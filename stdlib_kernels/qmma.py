"""Quantised GEMM for prefill on int8 tensor cores (llama.cpp's MMQ): out = x @ dequant(w).T.

The activations are quantised per 32 by `qgemv.act_q8_kernel`, exactly as for the dp4a GEMV:
x ≈ x̃ = xd·(hi + lo/254), hi and lo int8, plus xs = Σ(hi + lo/254) per 16 (units of xd).  The
weights are decoded to int8 once per tile in shared memory: Q4_K's 4-bit quants as 0..15, Q6_K's
6-bit quants as q − 32 (−32..31), Q8_0's as they are.  `mma_sync(atype="s8")` (m16n8k32) then
multiplies a 16 (weight rows) × 32 (k) int8 tile by an 8 (activation rows) × 32 tile of hi and
of lo, both exact in int32, and the per-block scales are applied in f32 once per 32 k, as
llama.cpp's `mul_mat_q` does (its `vec_dot_*_q8_1_mma`):

    Q4_K (per sub-block of 32):  acc += xd · ((d·sc/254)·(254·Ih + Il) − (dmin·m)·xs32)
    Q6_K (per 16: m16n8k16 IMMAs, two per 32 k):  acc += xd · Σ_h (d·sc_h/254)·I_h
    Q8_0 (per block of 32):      acc += xd · (d/254)·(254·Ih + Il)

254·Ih + Il is an exact int32 (|Ih| ≤ 32·128·127) and, for Q4_K and Q6_K, exact in f32 (< 2^24);
xd multiplies last, so nothing overflows before the scales meet where the float product does
not (the dp4a path's rule).  The hi + lo split (two IMMAs per product instead of llama.cpp's one
on q8_1) keeps the dp4a GEMV's error bound: a single int8 plane rounds each activation to xd/2
instead of xd/508, 8-9× over that bound at k = 4096 (docs/decisions.md, "int8 tensor cores and
int8 tensor-core prefill").

Tiling: a block of 128 threads (4 warps, 2 × 2) owns BN = 64 weight rows × BM = 64 activation
rows and walks k in tiles of KT = 128 (half a Q4_K/Q6_K super-block, four Q8_0 blocks).  Per tile
every thread decodes 64 weights of one row into shared memory (registers → st.shared), the
activation planes arrive with 16-byte `cp_async` (zero-filled past m and k), and each warp
computes 32 × 32 outputs: per 32 k two `ldmatrix.x4` for A, four for hi/lo B, 16 m16n8k32
IMMAs (Q6_K: 32 m16n8k16, the same work).  Shared rows are 144 bytes (16 bytes of padding),
so the 8 row addresses of an ldmatrix phase fall in 8 different 16-byte bank groups.

IEEE semantics as the other paths: an output that is not finite (an inf or NaN in its activation
row makes its block's xd NaN) is recomputed by its thread as Σ x·w in f32 from x and the weights
dequantised as gguf-py does (`qgemv.*_weight`).
"""
from __future__ import annotations

import pyptx
from pyptx import block_idx, f16, f32, i8, i32, thread_idx, u8, u16, u32

from ._qblock import half_hi, half_lo, pair16, q4k_scale_min_pair
from .qgemv import q4k_weight, q6k_weight, q8_0_weight

#: activation rows / weight rows of a block's output tile, k per shared tile, threads per block
BM = 64
BN = 64
KT = 128
THREADS = 128
#: u32 words per shared row: KT bytes + 16 bytes of padding (ldmatrix rows conflict-free)
ROW = KT // 4 + 4
#: FMT values (as qtiled)
Q4_K, Q6_K, Q8_0 = 0, 1, 2
#: the residual plane's scale (qgemv.RES_SCALE): x̃ = xd·(hi + lo/RES)
RES = 254


@pyptx.func
def load_q4k(sw, sa, so, wq, gj: i32, jr: i32, s: i32, nb: i32, k0: i32):
    """Row gj's weights k0..k0+127 (half kh of a Q4_K super-block): thread half s decodes chunk
    c = 2kh + s of qs (32 bytes: low nibbles = sub-block 2c, high nibbles = 2c + 1) into
    sw[jr, 16s .. 16s + 15] and the two sub-blocks' d·sc/254 and dmin·m into sa/so[2s + e, jr]."""
    wb = (gj * nb + (k0 >> 8)) * 36
    c = ((k0 >> 7) & 1) * 2 + s
    h, s1, s2, s3 = pyptx.vload(wq, wb, 4)
    sc0, sc1, m0, m1 = q4k_scale_min_pair(s1, s2, s3, c)
    d = half_lo(h)
    dm = half_hi(h)
    sa[2 * s, jr] = d * sc0 * (1.0 / RES)
    sa[2 * s + 1, jr] = d * sc1 * (1.0 / RES)
    so[2 * s, jr] = dm * m0
    so[2 * s + 1, jr] = dm * m1
    for half in pyptx.static_range(2):
        q = pyptx.vload(wq, wb + 4 + 8 * c + 4 * half, 4)
        for i in pyptx.static_range(4):
            sw[jr, 16 * s + 4 * half + i] = q[i] & 0x0F0F0F0F
            sw[jr, 16 * s + 8 + 4 * half + i] = (q[i] >> 4) & 0x0F0F0F0F


@pyptx.func
def signed6(q: u32):
    """Four 6-bit quants (bytes 0..63) as the int8 bytes q − 32: v = q ^ 32 is q − 32 in 6-bit
    two's complement (bit 5 the sign), which sign-extends by copying bit 5 into bits 6 and 7."""
    v = q ^ 0x20202020
    s = v & 0x20202020
    return v | (s << 1) | (s << 2)


@pyptx.func
def load_q6k(sw, sa, wh, gj: i32, jr: i32, s: i32, nb: i32, k0: i32):
    """Row gj's weights k0..k0+127 (half h of a Q6_K super-block, u16 words: blocks are 2-byte
    aligned): thread half s decodes l = 16s .. 16s + 15 of the four runs u (weights 128h + 32u + l)
    into sw[jr, 8u + 4s + i] as q − 32, and d·sc/254 of 16-group 2u + s into sa[2u + s, jr]."""
    wb = (gj * nb + (k0 >> 8)) * 105
    h = (k0 >> 7) & 1
    d = f32(pyptx.bitcast(wh[wb + 104], f16)) * (1.0 / RES)
    for u in pyptx.static_range(4):
        scw = u32(wh[wb + 96 + 4 * h + u]) >> (8 * s)
        sa[2 * u + s, jr] = d * f32(pyptx.bitcast(u8(scw & 0xFF), i8))
    for i in pyptx.static_range(4):
        ql0 = pair16(wh, wb + 32 * h + 8 * s + 2 * i)
        ql1 = pair16(wh, wb + 32 * h + 16 + 8 * s + 2 * i)
        qh = pair16(wh, wb + 64 + 16 * h + 8 * s + 2 * i)
        for u in pyptx.static_range(4):
            ql = ql1 if u & 1 else ql0
            q6 = ((ql >> (4 * (u >> 1))) & 0x0F0F0F0F) | (((qh >> (2 * u)) & 0x03030303) << 4)
            sw[jr, 8 * u + 4 * s + i] = signed6(q6)


@pyptx.func
def load_q8_0(sw, sa, wh, gj: i32, jr: i32, s: i32, k: i32, k0: i32):
    """Row gj's Q8_0 blocks 2s, 2s + 1 of the tile (k0/32 + ...) into sw[jr, 8·blk ..] and d/254
    into sa[blk, jr]; blocks past k are zeros."""
    nbk = k >> 5
    for e in pyptx.static_range(2):
        blk = 2 * s + e
        bb = (k0 >> 5) + blk
        if bb < nbk:
            wb = (gj * nbk + bb) * 17
            sa[blk, jr] = f32(pyptx.bitcast(wh[wb], f16)) * (1.0 / RES)
            for i in pyptx.static_range(8):
                sw[jr, 8 * blk + i] = pair16(wh, wb + 1 + 2 * i)
        else:
            sa[blk, jr] = 0.0
            for i in pyptx.static_range(8):
                sw[jr, 8 * blk + i] = 0


@pyptx.func
def load_acts(sh, sl, sxd, sxs, xh, xl, xd, xs, m: i32, k: i32, m0: i32, k0: i32, tid: i32):
    """Activation rows m0..m0+63, k0..k0+127: the hi and lo planes by 16-byte cp_async (zero-fill
    past m and k: k is a multiple of 32, so a chunk is wholly in or out), xd and the sums of x̃ per
    32 (xs pairs) into sxd/sxs[sub, row] (0 past the edges)."""
    kb = k >> 5
    for i in pyptx.static_range(4):
        c = tid + THREADS * i
        r = c >> 3
        col = k0 + 16 * (c & 7)
        gr = m0 + r
        ok = gr < m and col < k
        src = gr * k + col if ok else 0
        nbytes = 16 if ok else 0
        pyptx.cp_async(sh, (r, 4 * (c & 7)), xh, src, 16, nbytes)
        pyptx.cp_async(sl, (r, 4 * (c & 7)), xl, src, 16, nbytes)
    for i in pyptx.static_range(2):
        e = tid + THREADS * i
        r = e & 63
        b = e >> 6
        gr = m0 + r
        blk = (k0 >> 5) + b
        dv = 0.0
        sv = 0.0
        if gr < m and blk < kb:
            g = gr * kb + blk
            dv = xd[g]
            sv = xs[2 * g] + xs[2 * g + 1]
        sxd[b, r] = dv
        sxs[b, r] = sv


@pyptx.func
def exact_dot(x, w, gr: i32, gj: i32, k: i32, FMT):
    """Σ_p x[gr·k + p]·W[gj, p] in f32 with W as gguf-py dequantises it (the non-finite
    fallback: the float product's infinities and NaNs)."""
    acc = 0.0
    p = 0
    while p < k:
        if FMT == Q4_K:
            wp = q4k_weight(w, gj, k, p)
        elif FMT == Q6_K:
            wp = q6k_weight(w, gj, k, p)
        else:
            wp = q8_0_weight(w, gj, k, p)
        acc += x[gr * k + p] * wp
        p += 1
    return acc


@pyptx.kernel
def qmma_kernel(out: f32[:], xh: i8[:], xl: i8[:], xd: f32[:], xs: f32[:], x: f32[:],
                w: u8[:], m: i32, n: i32, k: i32, FMT: pyptx.constexpr):
    """out[r·n + j] = Σ_p x̃[r, p]·W[j, p] for r < m, j < n (x̃ from act_q8_kernel: xh, xl, xd,
    xs; x only for the non-finite fallback); w is n rows of FMT blocks.  Grid (⌈n/64⌉, ⌈m/64⌉),
    128 threads."""
    sw = pyptx.shared.array((BN, ROW), u32)
    sh = pyptx.shared.array((BM, ROW), u32)
    sl = pyptx.shared.array((BM, ROW), u32)
    sa = pyptx.shared.array((KT // 16, BN), f32)      # d·sc/254 per 16-group (Q6_K) or per 32
    so = pyptx.shared.array((KT // 32, BN), f32)      # Q4_K: dmin·m per sub-block
    sxd = pyptx.shared.array((KT // 32, BM), f32)
    sxs = pyptx.shared.array((KT // 32, BM), f32)
    wq = w.view(u32)
    wh = w.view(u16)
    tid = thread_idx.x
    lane = tid & 31
    warp = tid >> 5
    wy = (warp >> 1) * 32               # the warp's weight rows (A) in the tile
    wx = (warp & 1) * 32                # and activation rows (B)
    g = lane >> 2
    t = lane & 3
    n0 = block_idx.x * BN
    m0 = block_idx.y * BM
    jr = tid >> 1                       # the weight row this thread decodes
    s = tid & 1
    gj = n0 + jr
    nb = k >> 8
    ar = wy + (lane & 15)               # ldmatrix row addresses (A) ...
    ac = (lane >> 4) * 4
    br = wx + ((lane >> 4) << 3) + (lane & 7)     # ... and (B: two 8-row tiles per x4)
    bc = ((lane >> 3) & 1) * 4
    z = (0.0, 0.0, 0.0, 0.0)             # c{i}{j}: A tile i (16 weight rows), B tile j (8 rows)
    c00 = z
    c01 = z
    c02 = z
    c03 = z
    c10 = z
    c11 = z
    c12 = z
    c13 = z
    zero = (0, 0, 0, 0)
    for k0 in range(0, k, KT):
        load_acts(sh, sl, sxd, sxs, xh, xl, xd, xs, m, k, m0, k0, tid)
        if gj < n:
            if FMT == Q4_K:
                load_q4k(sw, sa, so, wq, gj, jr, s, nb, k0)
            if FMT == Q6_K:
                load_q6k(sw, sa, wh, gj, jr, s, nb, k0)
            if FMT == Q8_0:
                load_q8_0(sw, sa, wh, gj, jr, s, k, k0)
        else:
            for i in pyptx.static_range(16):
                sw[jr, 16 * s + i] = 0
            for i in pyptx.static_range(KT // 32):
                sa[2 * i + s, jr] = 0.0
            so[2 * s, jr] = 0.0
            so[2 * s + 1, jr] = 0.0
        pyptx.cp_async_wait(0)
        pyptx.syncthreads()
        for kk in pyptx.static_range(KT // 32):
            fa0 = pyptx.ldmatrix(sw, (ar, 8 * kk + ac), count=4)
            fa1 = pyptx.ldmatrix(sw, (ar + 16, 8 * kk + ac), count=4)
            xv = _act_scales(sxd, sxs, kk, wx + 2 * t, FMT)
            w0 = _weight_scales(sa, so, kk, wy + g, FMT)
            w1 = _weight_scales(sa, so, kk, wy + 16 + g, FMT)
            bh = pyptx.ldmatrix(sh, (br, 8 * kk + bc), count=4)
            bl = pyptx.ldmatrix(sl, (br, 8 * kk + bc), count=4)
            c00 = _tile(c00, fa0, bh, bl, 0, zero, w0, xv, 0, FMT)
            c01 = _tile(c01, fa0, bh, bl, 1, zero, w0, xv, 1, FMT)
            c10 = _tile(c10, fa1, bh, bl, 0, zero, w1, xv, 0, FMT)
            c11 = _tile(c11, fa1, bh, bl, 1, zero, w1, xv, 1, FMT)
            bh = pyptx.ldmatrix(sh, (br + 16, 8 * kk + bc), count=4)
            bl = pyptx.ldmatrix(sl, (br + 16, 8 * kk + bc), count=4)
            c02 = _tile(c02, fa0, bh, bl, 0, zero, w0, xv, 2, FMT)
            c03 = _tile(c03, fa0, bh, bl, 1, zero, w0, xv, 3, FMT)
            c12 = _tile(c12, fa1, bh, bl, 0, zero, w1, xv, 2, FMT)
            c13 = _tile(c13, fa1, bh, bl, 1, zero, w1, xv, 3, FMT)
        pyptx.syncthreads()
    # out[r·n + j]: row r = m0 + wx + 8j + 2t + (e & 1), column j = n0 + wy + 16i + g + 8(e >> 1)
    redo = u32(0)
    r0 = m0 + wx + 2 * t
    j0 = n0 + wy + g
    redo = _store(out, c00, r0, j0, m, n, redo, 0)
    redo = _store(out, c01, r0 + 8, j0, m, n, redo, 1)
    redo = _store(out, c02, r0 + 16, j0, m, n, redo, 2)
    redo = _store(out, c03, r0 + 24, j0, m, n, redo, 3)
    redo = _store(out, c10, r0, j0 + 16, m, n, redo, 4)
    redo = _store(out, c11, r0 + 8, j0 + 16, m, n, redo, 5)
    redo = _store(out, c12, r0 + 16, j0 + 16, m, n, redo, 6)
    redo = _store(out, c13, r0 + 24, j0 + 16, m, n, redo, 7)
    if redo != 0:
        q = 0
        while q < 32:
            if (redo >> q) & 1 != 0:
                tj = q >> 2
                e = q & 3
                gr = r0 + 8 * (tj & 3) + (e & 1)
                col = j0 + 16 * (tj >> 2) + 8 * (e >> 1)
                out[gr * n + col] = exact_dot(x, w, gr, col, k, FMT)
            q += 1


@pyptx.func
def _store(out, c, r: i32, j: i32, m: i32, n: i32, redo: u32, tile):
    """Store fragment c (rows r, r + 1 of out, columns j, j + 8) where inside [m, n]; returns
    redo with bit 4·tile + e set for each stored value that is not finite."""
    for e in pyptx.static_range(4):
        gr = r + (e & 1)
        col = j + 8 * (e >> 1)
        v = c[e]
        if gr < m and col < n:
            out[gr * n + col] = v
            if not (v - v == 0.0):
                redo = redo | (u32(1) << (4 * tile + e))
    return redo


@pyptx.func
def _act_scales(sxd, sxs, kk, r: i32, FMT):
    """(xd, Σx̃) of activation rows r, r + 1, r + 8, ..., r + 25 (the lane's 8) for sub-step kk;
    the sums only for Q4_K (0 otherwise: dead code)."""
    xd8 = (sxd[kk, r], sxd[kk, r + 1], sxd[kk, r + 8], sxd[kk, r + 9], sxd[kk, r + 16],
           sxd[kk, r + 17], sxd[kk, r + 24], sxd[kk, r + 25])
    xs8 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if FMT == Q4_K:
        xs8 = (sxs[kk, r], sxs[kk, r + 1], sxs[kk, r + 8], sxs[kk, r + 9], sxs[kk, r + 16],
               sxs[kk, r + 17], sxs[kk, r + 24], sxs[kk, r + 25])
    return xd8, xs8


@pyptx.func
def _weight_scales(sa, so, kk, j: i32, FMT):
    """Scales of weight rows j and j + 8 for sub-step kk: (s0 of j, s0 of j + 8, s1 of j,
    s1 of j + 8): Q6_K's two 16-groups; Q4_K's d·sc/254 and dmin·m; Q8_0's d/254 (s1 unused)."""
    if FMT == Q6_K:
        return sa[2 * kk, j], sa[2 * kk, j + 8], sa[2 * kk + 1, j], sa[2 * kk + 1, j + 8]
    if FMT == Q4_K:
        return sa[kk, j], sa[kk, j + 8], so[kk, j], so[kk, j + 8]
    return sa[kk, j], sa[kk, j + 8], 0.0, 0.0


@pyptx.func
def _tile(c, a, bh, bl, jj, zero, ws, xv, j, FMT):
    """c + the 16 × 8 tile's 32-k step: A fragment a, B tile jj (0, 1) of the x4 fragments bh /
    bl (hi and lo planes); ws from _weight_scales (rows g, g + 8), xv from _act_scales (column
    pair j).  Register e is weight row g + 8(e >> 1), activation row 2t + (e & 1)."""
    fh = (bh[2 * jj], bh[2 * jj + 1])
    fl = (bl[2 * jj], bl[2 * jj + 1])
    if FMT == Q6_K:     # one scale per 16: m16n8k16 on k 0..15 (a[0], a[1], b[0]) and 16..31
        d0 = (pyptx.mma_sync((a[0], a[1]), (fh[0],), zero, atype="s8"),
              pyptx.mma_sync((a[0], a[1]), (fl[0],), zero, atype="s8"))
        d1 = (pyptx.mma_sync((a[2], a[3]), (fh[1],), zero, atype="s8"),
              pyptx.mma_sync((a[2], a[3]), (fl[1],), zero, atype="s8"))
    else:
        d0 = (pyptx.mma_sync(a, fh, zero, atype="s8"), pyptx.mma_sync(a, fl, zero, atype="s8"))
        d1 = d0
    return (_acc1(c[0], d0, d1, 0, ws, xv, j, FMT), _acc1(c[1], d0, d1, 1, ws, xv, j, FMT),
            _acc1(c[2], d0, d1, 2, ws, xv, j, FMT), _acc1(c[3], d0, d1, 3, ws, xv, j, FMT))


@pyptx.func
def _acc1(c: f32, d0, d1, e, ws, xv, j, FMT):
    """One accumulator register e: c + xd·(scaled integer sums), xd applied last (module
    docstring).  d0/d1: (hi, lo) IMMA results (Q6_K: of the two 16-groups)."""
    xd8, xs8 = xv
    col = 2 * j + (e & 1)
    r = e >> 1
    v = ws[r] * f32(d0[0][e] * RES + d0[1][e])
    if FMT == Q6_K:
        v = v + ws[2 + r] * f32(d1[0][e] * RES + d1[1][e])
    if FMT == Q4_K:
        v = v - ws[2 + r] * xs8[col]
    return c + xd8[col] * v
