"""Quantised GEMV kernels (decode, m ≤ 8 activation rows): out[r, j] = x[r] · dequant(w[j]).

One warp per weight row streams the row's blocks; the weights stay packed in global memory and
are decoded in registers.  The `M` activation rows of a launch (a constexpr, ≤ 8) share every
weight load.  Arrays are passed flat (1-d) and read with 128-bit `pyptx.vload`s wherever the
layout is 16-byte aligned (Q4_K blocks, activations); lane sums end in a `shfl_xor` reduction.
Two families:

* f32 (`*_gemv_kernel`): weights become floats with the mantissa trick of `_qblock` (no
  conversion instruction), products accumulate in f32; `xs` holds Σx per 16 activations
  (`act_sums_kernel`), which both removes the trick's offset and applies the Q4_K minimum.
* dp4a (`*_dp4a_kernel`): the activations are quantised per 32 to int8 (scale `xd`) plus an int8
  residual plane (`act_q8_kernel`: x ≈ x̃ = xd·(hi + lo/254), |x − x̃| ≤ xd/508, ~1/254 of
  llama.cpp's q8_1); weights are masked to bytes and multiplied four at a time with `dp4a`.  The
  integer dot products are scaled in an order that cannot overflow where the float product does
  not: the weight scale and `xd` multiply sums of at most 2^19 in units of xd, and the offsets
  (Q4_K minimums, the Q6_K 32) go through sums of x̃ in units of xd (`xs`), never through Σx.

IEEE semantics (`write_rows`): an output whose fast sum is not finite (an inf or NaN in its
activation row, a scale overflowing in the mantissa trick) is recomputed by its warp from x and
the weights dequantised as gguf-py does, Σ x·w in f32: ±inf, and NaN only where the float product
has one (inf·0, inf − inf, a NaN).  The check is one compare per output after the block loop; the
hot loop is unchanged.  `act_q8_kernel` makes `xd` NaN for a block holding an inf or NaN, so a
dp4a sum touching one is never finite.

Lane → weight maps (one warp iteration covers 4 Q4_K blocks, 8 Q6_K blocks or 32 Q8_0 blocks):
* Q4_K: 8 lanes per block; lane t reads qs bytes 16t..16t+15 (4 words): low nibbles are weights
  64c + 16(t&1) + 0..15 of sub-block 2c, high nibbles the same + 32 (sub-block 2c+1), c = t >> 1.
* Q6_K (u16 words: blocks are 210 bytes, 2-byte aligned): 4 lanes per block; lane t covers
  l = 16(t&1) + 0..15 of half h = t >> 1: 64 weights 128h + 32u + l (u = 0..3), each 16-run one
  int8 scale.
* Q8_0 (u16 words, 34-byte blocks): one lane per block of 32.
"""
from __future__ import annotations

import pyptx
from pyptx import block_dim, block_idx, f16, f32, i8, i32, thread_idx, u8, u16, u32

from ._qblock import fields_dot4, half_hi, half_lo, one_bits, pair16, q4k_scale_min_pair
from ._warp import warp_sum

#: weight rows (warps) per block of the GEMV kernels
GEMV_WARPS = 4
#: most activation rows one GEMV launch computes (register accumulators)
GEMV_MAX_M = 8
#: residual plane scale: x ≈ d·(hi + lo / RES_SCALE)
RES_SCALE = 254.0


# ------------------------------------------------------------------------- activation preparation
@pyptx.kernel
def act_sums_kernel(xs: f32[:], x: f32[:]):
    """xs[g] = Σ x[16g .. 16g+15]; one thread per group of 16 (four 128-bit loads)."""
    g = pyptx.grid(1)
    if g < len(xs):
        s = 0.0
        for j in pyptx.static_range(4):
            v0, v1, v2, v3 = pyptx.vload(x, g * 16 + 4 * j, 4)
            s += (v0 + v1) + (v2 + v3)
        xs[g] = s


@pyptx.func
def pack4(a: f32, b: f32, c: f32, d: f32):
    """Four integral floats in -128..127 as the bytes of one u32 (a lowest)."""
    return (u32(i32(a)) & 0xFF) | ((u32(i32(b)) & 0xFF) << 8) | ((u32(i32(c)) & 0xFF) << 16) \
        | (u32(i32(d)) << 24)


#: blocks with max|x| below this are scaled up by TINY_SCALE first, so 127/max|x| stays finite
TINY = 2.0 ** -64
TINY_SCALE = 2.0 ** 64


@pyptx.kernel
def act_q8_kernel(xh: i8[:], xl: i8[:], xd: f32[:], xs: f32[:], x: f32[:]):
    """Per 32 activations: d = max|x|/127, hi = round(x/d), lo = round((x/d − hi)·254) (so
    x̃ = d·(hi + lo/254)), and per 16 the sum xs = Σ(hi + lo/254) of x̃ in units of d (bounded by
    16·128: no overflow for any finite x, unlike Σx).  One thread per group of 32, 128-bit loads
    and stores.

    x/d is x·(127/max|x|): 127/max|x| overflows for max|x| < 127/FLT_MAX ≈ 3.7e-37, so tiny blocks
    are scaled by 2^64 first (exactly).  An inf or NaN in the group makes its x/d NaN, hence its
    xs and d NaN: every dp4a sum using the block is then non-finite and `write_rows` recomputes
    it in floats."""
    g = pyptx.grid(1)
    if g < len(xd):
        o = g * 32
        v = pyptx.local.array(32, f32)
        amax = 0.0
        for j in pyptx.static_range(8):
            v0, v1, v2, v3 = pyptx.vload(x, o + 4 * j, 4)
            v[4 * j] = v0
            v[4 * j + 1] = v1
            v[4 * j + 2] = v2
            v[4 * j + 3] = v3
            amax = max(amax, max(max(abs(v0), abs(v1)), max(abs(v2), abs(v3))))
        sc = TINY_SCALE if amax < TINY else 1.0
        inv = 127.0 / (amax * sc) if amax > 0.0 else 0.0
        hq = xh.view(u32)
        lq = xl.view(u32)
        hw = pyptx.local.array(4, u32)
        lw = pyptx.local.array(4, u32)
        sums = pyptx.local.array(2, f32)
        for j in pyptx.static_range(2):
            sh = 0.0
            sl = 0.0
            for i in pyptx.static_range(4):
                e = 16 * j + 4 * i
                y0 = v[e] * sc * inv
                y1 = v[e + 1] * sc * inv
                y2 = v[e + 2] * sc * inv
                y3 = v[e + 3] * sc * inv
                h0 = pyptx.math.floor(y0 + 0.5)
                h1 = pyptx.math.floor(y1 + 0.5)
                h2 = pyptx.math.floor(y2 + 0.5)
                h3 = pyptx.math.floor(y3 + 0.5)
                l0 = pyptx.math.floor((y0 - h0) * RES_SCALE + 0.5)
                l1 = pyptx.math.floor((y1 - h1) * RES_SCALE + 0.5)
                l2 = pyptx.math.floor((y2 - h2) * RES_SCALE + 0.5)
                l3 = pyptx.math.floor((y3 - h3) * RES_SCALE + 0.5)
                hw[i] = pack4(h0, h1, h2, h3)
                lw[i] = pack4(l0, l1, l2, l3)
                sh += (h0 + h1) + (h2 + h3)
                sl += (l0 + l1) + (l2 + l3)
            pyptx.vstore(hq, 8 * g + 4 * j, (hw[0], hw[1], hw[2], hw[3]))
            pyptx.vstore(lq, 8 * g + 4 * j, (lw[0], lw[1], lw[2], lw[3]))
            sums[j] = sh + sl * (1.0 / RES_SCALE)
        xs[2 * g] = sums[0]
        xs[2 * g + 1] = sums[1]
        xd[g] = amax / 127.0 + (sums[0] + sums[1]) * 0.0


# ---------------------------------------------------------------------------------- shared parts
@pyptx.func
def zero(acc, M):
    """acc[0..M) = 0 (a local array indexed only with static_range: registers)."""
    for r in pyptx.static_range(M):
        acc[r] = 0.0


@pyptx.func
def write_rows(out, acc, M, n: i32, row: i32, lane: i32, k: i32, weight, w, x):
    """out[r·n + row] = Σ_lanes acc[r] for r < M, stored by lane 0; a sum that is not finite is
    recomputed as Σ_p x[r·k + p]·weight(w, row, k, p) in f32 (see the module docstring: the fast
    sums cannot carry inf the way the float product does, and may overflow in their scaling).
    warp_sum leaves the same value in every lane, so the whole warp takes the same branch.

    One loop over p serves every row to redo (each weight decoded once): a loop nested deeper
    than the block loop would make ptxas favour it with registers and rematerialise values in
    the hot loop instead (+14 % instructions there for Q4_K when it was a loop per row)."""
    redo = 0
    for r in pyptx.static_range(M):
        v = warp_sum(acc[r])
        if lane == 0:
            out[r * n + row] = v
        if not (v - v == 0.0):
            redo = redo | (1 << r)
    if redo != 0:
        ex = pyptx.local.array(M, f32)
        zero(ex, M)
        p = lane
        while p < k:
            wp = weight(w, row, k, p)
            e = p                       # r·k + p by additions (no r·k shared with the hot loop)
            for r in pyptx.static_range(M):
                if (redo >> r) & 1 != 0:
                    ex[r] += x[e] * wp
                e += k
            p += 32
        for r in pyptx.static_range(M):
            if (redo >> r) & 1 != 0:
                v = warp_sum(ex[r])
                if lane == 0:
                    out[r * n + row] = v


@pyptx.func
def warp_row():
    """(lane, weight row) of this thread: one warp per weight row."""
    return thread_idx.x & 31, block_idx.x * (block_dim.x >> 5) + (thread_idx.x >> 5)


@pyptx.func
def gemv(out, n: i32, k: i32, M, rows, wv, dot, acts, weight, w, x):
    """The GEMV kernels' body: out[r·n + row] = x[r] · W[row] for r < M, a warp per weight row.

    `rows(acc, M, wv, row, lane, k, one, dot, acts)` walks one format's blocks of the row (`wv`:
    the weights as words) and adds the lane's share into acc[r]; `dot` (the f32 or dp4a product
    of one block share) reads the activations through the tuple of arrays `acts`; `one` is
    one_bits(n) for the f32 products (unused by dp4a: dead code).  `weight(w, row, k, p)` (one
    dequantised weight from the bytes `w`) and the float activations `x` serve the non-finite
    fallback of `write_rows`.  Compile-time arguments, so each kernel inlines to the same code as
    written out by hand."""
    lane, row = warp_row()
    if row < n:
        one = one_bits(n)
        acc = pyptx.local.array(M, f32)
        zero(acc, M)
        rows(acc, M, wv, row, lane, k, one, dot, acts)
        write_rows(out, acc, M, n, row, lane, k, weight, w, x)


@pyptx.func
def q6k_load(wh, wb: i32, hh: i32, sel: i32, lw, lh, sc):
    """One lane's share of the Q6_K block at u16 word wb: ql words for l = 16·sel + 0..15 of
    half hh (lw[0..3] from ql[l..], lw[4..7] from ql[32 + l..]), the matching qh words (lh) and
    d·scale of the four 16-runs (sc)."""
    qw = wb + 32 * hh + 8 * sel
    for i in pyptx.static_range(4):
        lw[i] = pair16(wh, qw + 2 * i)
        lw[4 + i] = pair16(wh, qw + 16 + 2 * i)
        lh[i] = pair16(wh, wb + 64 + 16 * hh + 8 * sel + 2 * i)
    d = f32(pyptx.bitcast(wh[wb + 104], f16))
    for u in pyptx.static_range(4):
        s2 = u32(wh[wb + 96 + 4 * hh + u]) >> (8 * sel)
        sc[u] = d * f32(pyptx.bitcast(u8(s2 & 0xFF), i8))


# ---------------------------------------------------------- one weight, as gguf-py dequantises it
@pyptx.func
def half_at(w, i: i32):
    """The fp16 at byte i (even: every GGUF fp16 field is 2-byte aligned) of the bytes w, as f32."""
    return f32(pyptx.bitcast(u16(u32(w[i]) | (u32(w[i + 1]) << 8)), f16))


@pyptx.func
def q4k_weight(w, row: i32, k: i32, p: i32):
    """Weight p of Q4_K row `row`: (d·sc)·q − dmin·m in f32, gguf-py's order (the fallback of
    `write_rows`; bytes read one at a time, it runs only for non-finite sums)."""
    o = (row * (k >> 8) + (p >> 8)) * 144
    i = p & 255
    j = i >> 5
    e0 = u32(w[o + j])                  # top bits of sc_j (j ≥ 4)
    e1 = u32(w[o + 4 + j])              # sc_j (j < 4) / top bits of m_j (j ≥ 4)
    e2 = u32(w[o + 8 + j])              # m_j (j < 4) / low bits of sc_j, m_j (j ≥ 4)
    sc = e1 & 63 if j < 4 else (e2 & 15) | ((e0 >> 6) << 4)
    mn = e2 & 63 if j < 4 else (e2 >> 4) | ((e1 >> 6) << 4)
    q = (u32(w[o + 16 + 32 * (i >> 6) + (i & 31)]) >> (4 * (j & 1))) & 15
    return (half_at(w, o) * f32(sc)) * f32(q) - half_at(w, o + 2) * f32(mn)


@pyptx.func
def q6k_weight(w, row: i32, k: i32, p: i32):
    """Weight p of Q6_K row `row`: (d·scale)·(q − 32) in f32, as gguf-py."""
    o = (row * (k >> 8) + (p >> 8)) * 210
    i = p & 255
    h = i >> 7
    u = (i >> 5) & 3
    l = i & 31
    lo = (u32(w[o + 64 * h + 32 * (u & 1) + l]) >> (4 * (u >> 1))) & 15
    hi = (u32(w[o + 128 + 32 * h + l]) >> (2 * u)) & 3
    sc = f32(pyptx.bitcast(w[o + 192 + 8 * h + 2 * u + (l >> 4)], i8))
    return (half_at(w, o + 208) * sc) * f32(i32(lo | (hi << 4)) - 32)


@pyptx.func
def q8_0_weight(w, row: i32, k: i32, p: i32):
    """Weight p of Q8_0 row `row`: d·q in f32."""
    o = (row * (k >> 5) + (p >> 5)) * 34
    return half_at(w, o) * f32(pyptx.bitcast(w[o + 2 + (p & 31)], i8))


# ------------------------------------------------------------------------------------------ Q4_K
@pyptx.func
def swiglu_f32(g: f32, u: f32):
    """g·sigmoid(g)·u with `fast_exp` (ex2.approx, a few ulp): pyptx.math.exp goes through f64,
    which has no place in an f32 kernel; the result is the correct limit ±0 for g ≪ 0."""
    return g / (1.0 + pyptx.math.fast_exp(-g)) * u


@pyptx.func
def q4k_coeffs(wq, wb: i32, c: i32):
    """(d·sc, d·sc, dmin·m, dmin·m) of sub-blocks 2c, 2c+1 of the Q4_K block at word wb."""
    h, s1, s2, s3 = pyptx.vload(wq, wb, 4)
    sc0, sc1, m0, m1 = q4k_scale_min_pair(s1, s2, s3, c)
    d = half_lo(h)
    dm = half_hi(h)
    return d * sc0, d * sc1, dm * m0, dm * m1


@pyptx.func
def q4k_word_f32(q: u32, x, p: i32, lo: f32, hi: f32, one: u32):
    """Low nibbles of q against x[p..p+3], high nibbles against x[p+32..p+35] (see _qblock)."""
    u0, u1, u2, u3 = pyptx.vload(x, p, 4)
    v0, v1, v2, v3 = pyptx.vload(x, p + 32, 4)
    return fields_dot4(q, 0, 4, u0, u1, u2, u3, lo, one), \
        fields_dot4(q, 4, 4, v0, v1, v2, v3, hi, one)


@pyptx.func
def q4k_dot_f32(q0: u32, q1: u32, q2: u32, q3: u32, a0: f32, a1: f32, o0: f32, o1: f32,
                acts, p: i32, one: u32):
    """One lane's share of a Q4_K block · x[p..] (acts = (x, xs)): 16 low nibbles against
    x[p + 0..15], 16 high nibbles against x[p + 32..47], minimums through the sums of 16 in xs."""
    x, xs = acts
    lo, hi = q4k_word_f32(q0, x, p, 0.0, 0.0, one)
    lo, hi = q4k_word_f32(q1, x, p + 4, lo, hi, one)
    lo, hi = q4k_word_f32(q2, x, p + 8, lo, hi, one)
    lo, hi = q4k_word_f32(q3, x, p + 12, lo, hi, one)
    g = p >> 4
    # Σ(1 + q/16)x = Σx + Σqx/16, so Σ (a·q − o)x = 16a·lo − (16a + o)·Σx
    return (16.0 * a0) * lo + (16.0 * a1) * hi - (16.0 * a0 + o0) * xs[g] \
        - (16.0 * a1 + o1) * xs[g + 2]


@pyptx.func
def q4k_dot_dp4a(q0: u32, q1: u32, q2: u32, q3: u32, a0: f32, a1: f32, o0: f32, o1: f32,
                 acts, p: i32, one: u32):
    """q4k_dot_f32 with int8 activations (acts = (xh, xl, xd, xs) of act_q8_kernel, as i32
    words; xs in units of xd): four dp4a per weight word (nibble planes × hi/lo)."""
    xh, xl, xd, xs = acts
    w = p >> 2
    hl = pyptx.vload(xh, w, 4)          # activations of the low nibbles (x[p..p+15])
    ll = pyptx.vload(xl, w, 4)
    hh = pyptx.vload(xh, w + 8, 4)      # and of the high nibbles (x[p+32..p+47])
    lh = pyptx.vload(xl, w + 8, 4)
    h0 = 0
    l0 = 0
    h1 = 0
    l1 = 0
    for i in pyptx.static_range(4):
        q = (q0, q1, q2, q3)[i]
        lo = pyptx.bitcast(q & 0x0F0F0F0F, i32)
        hi = pyptx.bitcast((q >> 4) & 0x0F0F0F0F, i32)
        h0 = pyptx.dp4a(lo, hl[i], h0)
        l0 = pyptx.dp4a(lo, ll[i], l0)
        h1 = pyptx.dp4a(hi, hh[i], h1)
        l1 = pyptx.dp4a(hi, lh[i], l1)
    g = p >> 5
    s = p >> 4
    # Σ (a·q − o)·x̃ = xd·(a·Σq(hi + lo/254) − o·xs): every factor bounded, xd applied last
    return xd[g] * (a0 * (f32(h0) + f32(l0) * (1.0 / RES_SCALE)) - o0 * xs[s]) \
        + xd[g + 1] * (a1 * (f32(h1) + f32(l1) * (1.0 / RES_SCALE)) - o1 * xs[s + 2])


@pyptx.func
def q4k_lane(lane: i32):
    """The Q4_K lane map: (t, c, offset into x of the lane's first weight, first block)."""
    t = lane & 7
    c = t >> 1
    return t, c, 64 * c + 16 * (t & 1), lane >> 3


@pyptx.func
def q4k_rows(acc, M, wq, row: i32, lane: i32, k: i32, one: u32, dot, acts):
    """acc[r] += the lane's share of x[r] · W[row] over the row's Q4_K blocks (see `gemv`)."""
    nb = k >> 8
    t, c, xoff, b = q4k_lane(lane)
    while b < nb:
        wb = (row * nb + b) * 36
        a0, a1, o0, o1 = q4k_coeffs(wq, wb, c)
        qb = wb + 4 + 4 * t
        q0, q1, q2, q3 = pyptx.vload(wq, qb, 4)
        for r in pyptx.static_range(M):
            acc[r] += dot(q0, q1, q2, q3, a0, a1, o0, o1, acts, r * k + b * 256 + xoff, one)
        b += 4


@pyptx.kernel
def q4k_gemv_kernel(out: f32[:], x: f32[:], xs: f32[:], w: u8[:], n: i32, k: i32,
                    M: pyptx.constexpr):
    """out[r·n + j] = Σ_p x[r·k + p] · W[j, p] for r < M; w is n rows of k/256 Q4_K blocks."""
    gemv(out, n, k, M, q4k_rows, w.view(u32), q4k_dot_f32, (x, xs), q4k_weight, w, x)


@pyptx.kernel
def q4k_dp4a_kernel(out: f32[:], xh: i8[:], xl: i8[:], xd: f32[:], xs: f32[:], x: f32[:],
                    w: u8[:], n: i32, k: i32, M: pyptx.constexpr):
    """q4k_gemv_kernel on activations quantised by act_q8_kernel (x itself only for the
    non-finite fallback)."""
    gemv(out, n, k, M, q4k_rows, w.view(u32), q4k_dot_dp4a,
         (xh.view(i32), xl.view(i32), xd, xs), q4k_weight, w, x)


@pyptx.kernel
def q4k_gate_up_kernel(out: f32[:], x: f32[:], xs: f32[:], wg: u8[:], wu: u8[:], n: i32,
                       k: i32, M: pyptx.constexpr):
    """out[r·n + j] = swiglu(x[r]·Wg[j], x[r]·Wu[j]): both Q4_K rows in one pass over x."""
    gq = wg.view(u32)
    uq = wu.view(u32)
    lane, row = warp_row()
    if row < n:
        nb = k >> 8
        t, c, xoff, b = q4k_lane(lane)
        one = one_bits(n)
        acc_g = pyptx.local.array(M, f32)
        acc_u = pyptx.local.array(M, f32)
        zero(acc_g, M)
        zero(acc_u, M)
        while b < nb:
            wb = (row * nb + b) * 36
            qb = wb + 4 + 4 * t
            ga0, ga1, go0, go1 = q4k_coeffs(gq, wb, c)
            ua0, ua1, uo0, uo1 = q4k_coeffs(uq, wb, c)
            g0 = gq[qb]
            g1 = gq[qb + 1]
            g2 = gq[qb + 2]
            g3 = gq[qb + 3]
            u0 = uq[qb]
            u1 = uq[qb + 1]
            u2 = uq[qb + 2]
            u3 = uq[qb + 3]
            for r in pyptx.static_range(M):
                p = r * k + b * 256 + xoff
                acc_g[r] += q4k_dot_f32(g0, g1, g2, g3, ga0, ga1, go0, go1, (x, xs), p, one)
                acc_u[r] += q4k_dot_f32(u0, u1, u2, u3, ua0, ua1, uo0, uo1, (x, xs), p, one)
            b += 4
        redo = 0
        for r in pyptx.static_range(M):
            acc_g[r] = warp_sum(acc_g[r])
            acc_u[r] = warp_sum(acc_u[r])
            if not (acc_g[r] - acc_g[r] == 0.0 and acc_u[r] - acc_u[r] == 0.0):
                redo = redo | (1 << r)
        if redo != 0:
            exact_pair_sums(acc_g, acc_u, M, redo, wg, wu, x, row, lane, k)
        for r in pyptx.static_range(M):
            if lane == 0:
                out[r * n + row] = swiglu_f32(acc_g[r], acc_u[r])


@pyptx.func
def exact_pair_sums(acc_g, acc_u, M, redo: i32, wg, wu, x, row: i32, lane: i32, k: i32):
    """acc_g[r], acc_u[r] = Σ_p x[r·k + p]·Wg[row, p] (and Wu) in plain f32 for the rows r set
    in `redo`: the fused kernel's non-finite fallback, as `write_rows` is the GEMV kernels' (a
    gate or up sum that is ±inf, NaN or overflowed in the fast scaling is redone the way the
    float product does it, so swiglu sees what `q4k_matmul` would return: silu(+inf)·u = ±inf,
    silu(−inf) = −inf/(1 + inf) = NaN, as in torch's silu and ggml's)."""
    ex_g = pyptx.local.array(M, f32)
    ex_u = pyptx.local.array(M, f32)
    zero(ex_g, M)
    zero(ex_u, M)
    p = lane
    while p < k:
        gp = q4k_weight(wg, row, k, p)
        up = q4k_weight(wu, row, k, p)
        e = p
        for r in pyptx.static_range(M):
            if (redo >> r) & 1 != 0:
                ex_g[r] += x[e] * gp
                ex_u[r] += x[e] * up
            e += k
        p += 32
    for r in pyptx.static_range(M):
        if (redo >> r) & 1 != 0:
            acc_g[r] = warp_sum(ex_g[r])
            acc_u[r] = warp_sum(ex_u[r])


# ------------------------------------------------------------------------------------------ Q6_K
@pyptx.func
def q6k_bytes(ql: u32, qh: u32, u):
    """The four 6-bit values (as bytes 0..63) of run u (0..3, a literal) from the matching words
    of ql (ql[l..] for even u, ql[32 + l..] for odd u) and qh[l..]."""
    return ((ql >> (4 * (u >> 1))) & 0x0F0F0F0F) | (((qh >> (2 * u)) & 0x03030303) << 4)


@pyptx.func
def q6k_run_f32(lq, lh, u, acts, p: i32, one: u32, a: f32):
    """a·Σ (q − 32)·x over the 16 weights of run u (x[p + 32u ..], acts = (x, xs)), a = d·sc."""
    x, xs = acts
    dot = 0.0
    for i in pyptx.static_range(4):
        q6 = q6k_bytes(lq[4 * (u & 1) + i], lh[i], u)
        e = p + 32 * u + 4 * i
        a0, a1, a2, a3 = pyptx.vload(x, e, 4)
        dot = fields_dot4(q6, 0, 6, a0, a1, a2, a3, dot, one)
    # Σ(1 + q/64)x = Σx + Σqx/64
    return a * (64.0 * dot - 96.0 * xs[(p >> 4) + 2 * u])


@pyptx.func
def q6k_run_dp4a(lw, lh, u, acts, p: i32, one: u32, a: f32):
    """q6k_run_f32 against int8 activations (dp4a; acts as for q4k_dot_dp4a): (a·xd) times
    Σq(hi + lo/254) − 32·xs, both in units of xd and bounded, so nothing overflows before the
    scales meet."""
    hq, lq, xd, xs = acts
    ih = 0
    il = 0
    e = (p >> 2) + 8 * u
    h4 = pyptx.vload(hq, e, 4)
    l4 = pyptx.vload(lq, e, 4)
    for i in pyptx.static_range(4):
        q6 = pyptx.bitcast(q6k_bytes(lw[4 * (u & 1) + i], lh[i], u), i32)
        ih = pyptx.dp4a(q6, h4[i], ih)
        il = pyptx.dp4a(q6, l4[i], il)
    return (a * xd[(p >> 5) + u]) * (f32(ih) + f32(il) * (1.0 / RES_SCALE)
                                     - 32.0 * xs[(p >> 4) + 2 * u])


@pyptx.func
def q6k_rows(acc, M, wh, row: i32, lane: i32, k: i32, one: u32, run, acts):
    """acc[r] += the lane's share of x[r] · W[row] over the row's Q6_K blocks (see `gemv`;
    `run` is q6k_run_f32 or q6k_run_dp4a)."""
    nb = k >> 8
    t = lane & 3
    hh = t >> 1
    sel = t & 1
    lw = pyptx.local.array(8, u32)
    lh = pyptx.local.array(4, u32)
    sc = pyptx.local.array(4, f32)
    xoff = 128 * hh + 16 * sel
    b = lane >> 2
    while b < nb:
        wb = (row * nb + b) * 105
        q6k_load(wh, wb, hh, sel, lw, lh, sc)
        for r in pyptx.static_range(M):
            p = r * k + b * 256 + xoff
            tot = 0.0
            for u in pyptx.static_range(4):
                tot += run(lw, lh, u, acts, p, one, sc[u])
            acc[r] += tot
        b += 8


@pyptx.kernel
def q6k_gemv_kernel(out: f32[:], x: f32[:], xs: f32[:], w: u8[:], n: i32, k: i32,
                    M: pyptx.constexpr):
    """out[r·n + j] = x[r] · W[j] for Q6_K rows (210-byte blocks, read as u16 words)."""
    gemv(out, n, k, M, q6k_rows, w.view(u16), q6k_run_f32, (x, xs), q6k_weight, w, x)


@pyptx.kernel
def q6k_dp4a_kernel(out: f32[:], xh: i8[:], xl: i8[:], xd: f32[:], xs: f32[:], x: f32[:],
                    w: u8[:], n: i32, k: i32, M: pyptx.constexpr):
    """q6k_gemv_kernel on activations quantised by act_q8_kernel (x for the fallback)."""
    gemv(out, n, k, M, q6k_rows, w.view(u16), q6k_run_dp4a,
         (xh.view(i32), xl.view(i32), xd, xs), q6k_weight, w, x)


# ------------------------------------------------------------------------------------------ Q8_0
@pyptx.func
def q8_0_dot_f32(qv, acts, r, k: i32, b: i32, one: u32, d: f32):
    """x[r] · the Q8_0 block b of scale d (qv: the block's 32 int8 weights as 8 words,
    acts = (x, xs))."""
    x, xs = acts
    p = r * k + b * 32
    dot = 0.0
    for i in pyptx.static_range(8):
        e = p + 4 * i
        a0, a1, a2, a3 = pyptx.vload(x, e, 4)
        dot = fields_dot4(qv[i] ^ 0x80808080, 0, 8, a0, a1, a2, a3, dot, one)   # q → q + 128
    # Σ(1 + (q + 128)/256)x = Σx + Σqx/256 + Σx/2
    return d * (256.0 * dot - 384.0 * (xs[p >> 4] + xs[(p >> 4) + 1]))


@pyptx.func
def q8_0_dot_dp4a(qv, acts, r, k: i32, b: i32, one: u32, d: f32):
    """q8_0_dot_f32 against int8 activations (dp4a; acts = (xh, xl, xd) as for q4k_dot_dp4a:
    no minimums, no sums); d·xd first, so a huge xd never meets the integer sum alone."""
    hq, lq, xd = acts
    e = (r * k >> 2) + b * 8
    ih = 0
    il = 0
    for i in pyptx.static_range(8):
        q = pyptx.bitcast(qv[i], i32)
        h4 = pyptx.vload(hq, e + 4 * (i >> 2), 4)
        l4 = pyptx.vload(lq, e + 4 * (i >> 2), 4)
        ih = pyptx.dp4a(q, h4[i & 3], ih)
        il = pyptx.dp4a(q, l4[i & 3], il)
    return (d * xd[(r * k >> 5) + b]) * (f32(ih) + f32(il) * (1.0 / RES_SCALE))


@pyptx.func
def q8_0_rows(acc, M, wh, row: i32, lane: i32, k: i32, one: u32, dot, acts):
    """acc[r] += the lane's share of x[r] · W[row] over the row's Q8_0 blocks, a lane per block
    (see `gemv`)."""
    nb = k >> 5
    qv = pyptx.local.array(8, u32)
    b = lane
    while b < nb:
        wb = (row * nb + b) * 17
        d = f32(pyptx.bitcast(wh[wb], f16))
        for i in pyptx.static_range(8):
            qv[i] = pair16(wh, wb + 1 + 2 * i)
        for r in pyptx.static_range(M):
            acc[r] += dot(qv, acts, r, k, b, one, d)
        b += 32


@pyptx.kernel
def q8_0_gemv_kernel(out: f32[:], x: f32[:], xs: f32[:], w: u8[:], n: i32, k: i32,
                     M: pyptx.constexpr):
    """out[r·n + j] = x[r] · W[j] for Q8_0 rows (34-byte blocks, u16 words); a lane per block."""
    gemv(out, n, k, M, q8_0_rows, w.view(u16), q8_0_dot_f32, (x, xs), q8_0_weight, w, x)


@pyptx.kernel
def q8_0_dp4a_kernel(out: f32[:], xh: i8[:], xl: i8[:], xd: f32[:], x: f32[:], w: u8[:],
                     n: i32, k: i32, M: pyptx.constexpr):
    """q8_0_gemv_kernel on activations quantised by act_q8_kernel (no minimums: no sums; x for
    the fallback)."""
    gemv(out, n, k, M, q8_0_rows, w.view(u16), q8_0_dot_dp4a,
         (xh.view(i32), xl.view(i32), xd), q8_0_weight, w, x)
