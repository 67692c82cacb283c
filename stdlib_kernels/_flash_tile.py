"""The per-tile softmax step and the output store of the tensor-core FlashAttention kernels
(`flash_attention_tc_kernel`, head_dim <= 128, and `flash_attention_tc_wide_kernel`, head_dim
144..256): both hold a warp's 16 query rows as m16n8 S/O fragments, so the masking, the
online-softmax update and the re-packing of P into A fragments are the same code.

Fragment rows: lane holds rows g = lane >> 2 (row0) and g + 8 (row1), columns 2t, 2t + 1 of each
8-key n-tile (t = lane & 3); the four lanes of a group share a row, so row reductions are two
`shfl_xor` steps.
"""
from __future__ import annotations

import math

import pyptx
from pyptx import f32, i32, u16

#: softmax_tile's MASK: test the tile / it needs no mask / mask it
TEST, PLAIN, MASKED = 0, 1, 2
#: how far (base 2) a row maximum may grow before the bias of P and O moves with it
SLACK = 8.0

NEG_INF = -math.inf
#: below this |bias| (base 2) the fast exponent of `_probs` is off by at most 1/2
FAST = 2.0**24
F32_MAX = 3.4028234663852886e38


#: the query rows of a block of either kernel (4 warps x 16): softmax_tile's window test
BLOCK_ROWS = 64

LOG2E = 1.4426950408889634


@pyptx.func
def _masked(x: f32, col: i32, row: i32, sk: i32, shift: i32, causal: pyptx.constexpr,
            WINDOW: pyptx.constexpr = 0):
    """x, or -inf where key `col` is past the end or (causal) after query `row`'s last key, or
    (WINDOW) not after row's last key - WINDOW."""
    ok = col < sk
    if causal:
        ok = ok and col <= row + shift
    if WINDOW:
        ok = ok and col > row + shift - WINDOW
    return x if ok else NEG_INF


@pyptx.func
def _mask_tile(s, kv0: i32, row0: i32, t2: i32, sk: i32, shift: i32, NT: pyptx.constexpr,
               causal: pyptx.constexpr, WINDOW: pyptx.constexpr = 0):
    ns = ()
    for j in pyptx.static_range(NT):
        cc = kv0 + j * 8 + t2
        ns = ns + ((_masked(s[j][0], cc, row0, sk, shift, causal, WINDOW),
                    _masked(s[j][1], cc + 1, row0, sk, shift, causal, WINDOW),
                    _masked(s[j][2], cc, row0 + 8, sk, shift, causal, WINDOW),
                    _masked(s[j][3], cc + 1, row0 + 8, sk, shift, causal, WINDOW)),)
    return ns


@pyptx.func
def _softcap_tile(s, k: f32, NT: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """Raw scores -> C·tanh(s·k), C = SOFTCAP·log2 e, k = scale·log2 e / C: the capped logits
    SOFTCAP·tanh(s·scale / SOFTCAP), already scaled to base 2."""
    ns = ()
    for j in pyptx.static_range(NT):
        ns = ns + ((SOFTCAP * LOG2E * pyptx.math.tanh(s[j][0] * k),
                    SOFTCAP * LOG2E * pyptx.math.tanh(s[j][1] * k),
                    SOFTCAP * LOG2E * pyptx.math.tanh(s[j][2] * k),
                    SOFTCAP * LOG2E * pyptx.math.tanh(s[j][3] * k)),)
    return ns


@pyptx.func
def softmax_tile(s, kv0: i32, q0: i32, row0: i32, t2: i32, sk: i32, shift: i32, m0: f32,
                 m1: f32, l0: f32, l1: f32, c: f32, NT: pyptx.constexpr,
                 causal: pyptx.constexpr, bf: pyptx.constexpr, MASK: pyptx.constexpr = 0,
                 WINDOW: pyptx.constexpr = 0, SOFTCAP: pyptx.constexpr = 0.0):
    """One tile of raw scores `s` (NT n-tiles of 8 keys from key kv0; q0 is the block's first
    query, row0 this lane's first row, t2 its first column) -> (pf, a0, a1, m0, m1, l0, l1, need).

    * Keys past the end or (causal) after a row's last key are masked: MASK TEST tests whether
      the tile has any (block-uniform); PLAIN / MASKED: the caller knows it has none / some.
    * c = scale * log2(e) > 0 (the host makes it so), hence max(s) * c = max(s * c): the row
      maximum is taken on raw scores and scaled once.
    * m is the bias of the row's probabilities p = 2^(s c - m).  It moves only when the tile's
      maximum exceeds it by more than SLACK, so p <= 2^SLACK (exact in f16/bf16 P fragments, and
      O, l in f32 share the bias, so out = O / l is unchanged); a0/a1 (O's factors) are then 1
      and `need` (warp-uniform) is False when no row of the warp moved: the caller skips the
      rescale of O.  The test is `mx - m > SLACK`, not `mx > m + SLACK`: for |m| in [2^27,
      2^28) m + 8 is a tie that may round to m + 16, and p = 2^16 overflows f16.
    * Huge logits (|s c| ~ 1e10 from f16 entries of 3e4, or scale=1e10): the bias is f32, so
      p's exponent s c - m is only as exact as |m| allows.  The fast exponent (one FFMA, the
      product exact) is off by the rounding error of the bias, up to 1/2 ulp(m): harmless below
      FAST = 2^24 (<= 1/2), but at 1e10 it reached 2^9, so exp2 gave inf (out inf / NaN) or 0
      for the row's top key (l = 0).  A bias past FAST in any row of the warp (checked in the
      same vote as `need`; `need` is then True, and O's factors are 1 where nothing moved)
      takes `_probs`' CLAMP path, and the bias is clamped to the largest f32 (scores past f32's
      range: no inf - inf).  Cost on the usual tiles: two compares in the vote (+5 SASS
      instructions of 222 per tile at D = 128, layout included; bench_attention_sass).
    * pf: P re-packed as m16n8k16 A-fragment words, two per n-tile.
    * WINDOW (compile time, 0: off; with causal): row r also masks the keys <= r + shift -
      WINDOW (a sliding window); the TEST of a tile includes the block's first key row.
    * SOFTCAP (compile time, 0.0: off): the scores are capped first (`_softcap_tile`, in base-2
      units), then c = 1."""
    if SOFTCAP:
        s = _softcap_tile(s, c * (1.0 / (SOFTCAP * LOG2E)), NT, SOFTCAP)
        c = 1.0
    if MASK == TEST:
        edge = kv0 + NT * 8 > sk
        if causal:
            edge = edge or kv0 + NT * 8 - 1 > q0 + shift
        if WINDOW:
            edge = edge or kv0 <= q0 + BLOCK_ROWS - 1 + shift - WINDOW
        if edge:                    # block-uniform
            s = _mask_tile(s, kv0, row0, t2, sk, shift, NT, causal, WINDOW)
    elif MASK == MASKED:
        s = _mask_tile(s, kv0, row0, t2, sk, shift, NT, causal, WINDOW)
    mx0 = max(s[0][0], s[0][1])
    mx1 = max(s[0][2], s[0][3])
    for j in pyptx.static_range(1, NT):
        mx0 = max(mx0, max(s[j][0], s[j][1]))
        mx1 = max(mx1, max(s[j][2], s[j][3]))
    for i in pyptx.static_range(2):
        mx0 = max(mx0, pyptx.shfl_xor(mx0, 1 << i))
        mx1 = max(mx1, pyptx.shfl_xor(mx1, 1 << i))
    mx0 = mx0 * c
    mx1 = mx1 * c
    n0 = mx0 if mx0 - m0 > SLACK else m0
    n1 = mx1 if mx1 - m1 > SLACK else m1
    b0 = n0 if n0 != NEG_INF else 0.0
    b1 = n1 if n1 != NEG_INF else 0.0
    # one vote for both rare events: a row's bias moved, or a bias past FAST (huge logits)
    need = pyptx.vote_any((n0 != m0) | (n1 != m1) | (abs(b0) >= FAST) | (abs(b1) >= FAST))
    if need and pyptx.vote_any((abs(b0) >= FAST) | (abs(b1) >= FAST)):
        n0 = min(n0, F32_MAX)
        n1 = min(n1, F32_MAX)
        b0 = min(b0, F32_MAX)
        b1 = min(b1, F32_MAX)
        pf, a0, a1, l0, l1 = _probs(s, m0, m1, b0, b1, l0, l1, c, NT, bf, True)
    else:
        pf, a0, a1, l0, l1 = _probs(s, m0, m1, b0, b1, l0, l1, c, NT, bf, False)
    return pf, a0, a1, n0, n1, l0, l1, need


@pyptx.func
def _probs(s, m0: f32, m1: f32, b0: f32, b1: f32, l0: f32, l1: f32, c: f32,
           NT: pyptx.constexpr, bf: pyptx.constexpr, CLAMP: pyptx.constexpr):
    """p = 2^(s c - b) per score, O's factors a = 2^(m - b), l = l a + Σ p, P packed.

    Not CLAMP (|b| < FAST): one FFMA per score, s c - b with the product exact; the top score's
    exponent is off from the rounded product only by its rounding error, <= 1/2 below 2^24.
    CLAMP (some |b| >= FAST, or inf): the product is rounded first (no contraction: a `min`
    stands between) and clamped to the largest f32, exactly as the bias was, so the top score's
    exponent is 0 and none exceeds SLACK, however far the rounding error of a huge product
    reaches; an overflowed product (inf) meets a finite bias, not inf - inf."""
    a0 = pyptx.math.fast_exp2(m0 - b0)
    a1 = pyptx.math.fast_exp2(m1 - b1)
    l0 = l0 * a0
    l1 = l1 * a1
    pf = ()
    for j in pyptx.static_range(NT):
        if CLAMP:
            p0 = pyptx.math.fast_exp2(min(s[j][0] * c, F32_MAX) - b0)
            p1 = pyptx.math.fast_exp2(min(s[j][1] * c, F32_MAX) - b0)
            p2 = pyptx.math.fast_exp2(min(s[j][2] * c, F32_MAX) - b1)
            p3 = pyptx.math.fast_exp2(min(s[j][3] * c, F32_MAX) - b1)
        else:
            p0 = pyptx.math.fast_exp2(s[j][0] * c - b0)
            p1 = pyptx.math.fast_exp2(s[j][1] * c - b0)
            p2 = pyptx.math.fast_exp2(s[j][2] * c - b1)
            p3 = pyptx.math.fast_exp2(s[j][3] * c - b1)
        l0 = l0 + p0 + p1
        l1 = l1 + p2 + p3
        pf = pf + ((pyptx.pack2(p0, p1, pyptx.bf16 if bf else pyptx.f16),
                    pyptx.pack2(p2, p3, pyptx.bf16 if bf else pyptx.f16)),)
    return pf, a0, a1, l0, l1


@pyptx.func
def rescale(o, a0: f32, a1: f32, NJ: pyptx.constexpr):
    """O fragments (NJ n-tiles) times the rows' factors."""
    no = ()
    for j in pyptx.static_range(NJ):
        no = no + ((o[j][0] * a0, o[j][1] * a0, o[j][2] * a1, o[j][3] * a1),)
    return no


@pyptx.func
def _store_half(out: u16[:, :, :], head: i32, row: i32, col: i32, x: f32, bf: pyptx.constexpr):
    if row < out.shape[1]:
        out[head, row, col] = pyptx.bitcast(pyptx.bf16(x) if bf else pyptx.f16(x), u16)


@pyptx.func
def finish(out: u16[:, :, :], o, l0: f32, l1: f32, bh: i32, row0: i32, t2: i32,
           NJ: pyptx.constexpr, bf: pyptx.constexpr):
    """out rows row0, row0 + 8 = O / l (0 for a row that saw no key), as f16 or bf16 bits."""
    for i in pyptx.static_range(2):
        l0 = l0 + pyptx.shfl_xor(l0, 1 << i)
        l1 = l1 + pyptx.shfl_xor(l1, 1 << i)
    inv0 = 1.0 / l0 if l0 > 0.0 else 0.0
    inv1 = 1.0 / l1 if l1 > 0.0 else 0.0
    for j in pyptx.static_range(NJ):
        col = j * 8 + t2
        _store_half(out, bh, row0, col, o[j][0] * inv0, bf)
        _store_half(out, bh, row0, col + 1, o[j][1] * inv0, bf)
        _store_half(out, bh, row0 + 8, col, o[j][2] * inv1, bf)
        _store_half(out, bh, row0 + 8, col + 1, o[j][3] * inv1, bf)
