"""FlashAttention on tensor cores for head_dim 144..256 (multiples of 16), f16 / bf16.

Why a second kernel: at head_dim 256 a warp's O accumulator is 128 f32 registers per lane, so the
Q fragments (64 more) cannot stay in registers as in `flash_attention_tc_kernel`, and shared
memory (48 KiB) cannot hold a double-buffered pair of 32-key K/V tiles next to a 64-row Q tile
either.  So here:

* the block's 64 query rows (4 warps x 16) stay in shared memory and each warp re-reads its Q
  fragments with `ldmatrix` for every K tile (16 more LDSM per 16 keys at D = 256);
* K and V tiles are 16 keys, one buffer each, pipelined against each other instead of double
  buffered: K(t+1) is copied while the softmax and P V of tile t run, V(t+1) while S = Q K(t+1)ᵀ
  runs (cp_async groups: [Q, K0] [V0] [K1] [V1] ...);
* at D = 256 shared rows are not padded (64 + 16 + 16 rows x 512 bytes = exactly 48 KiB): the
  16-byte chunks of row r are stored XOR-swizzled (chunk ^ (r & 7)), so the 8 rows of an
  `ldmatrix` phase still hit 8 different bank groups.  Below 256, rows are padded by 8 halves
  (as in the other kernel), which fits.

Scores, masking and the online softmax are `_flash_tile.softmax_tile`, shared with the other
kernel; rows past the end of q, k, v are zero-filled by `cp_async`'s src_bytes.
"""
from __future__ import annotations

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u16

from ._flash_tile import NEG_INF, TEST, finish, rescale, softmax_tile

WQ = 64                 # query rows per block (16 per warp)
WKV = 16                # keys per K / V tile
WIDE_THREADS = 128
WIDE_MAX_D = 256


@pyptx.func
def _col(row: i32, col: i32, SWZ: pyptx.constexpr):
    """The stored column of (row, col) (col a multiple of 8): chunks XOR-swizzled by row & 7."""
    return col ^ ((row & 7) << 3) if SWZ else col


@pyptx.func
def _load(buf: u16[:, :], at: i32, src: u16[:, :], row0: i32, nrows: pyptx.constexpr,
          c0: pyptx.constexpr, W: pyptx.constexpr, tid: i32, SWZ: pyptx.constexpr):
    """src[row0:row0 + nrows, c0:c0 + W] -> buf rows at, at + 1, ... (at % 8 == 0), columns
    0..W-1, 16 bytes per zero-fill cp_async (rows past the end of src land as zeros, nothing is
    read for them)."""
    seq = src.shape[0]
    cpr = W // 8
    total = nrows * cpr
    for i in pyptx.static_range((total + WIDE_THREADS - 1) // WIDE_THREADS):
        c = tid + WIDE_THREADS * i
        if total % WIDE_THREADS == 0 or c < total:
            r = c // cpr
            col = (c - r * cpr) * 8
            pyptx.cp_async(buf, (at + r, _col(r, col, SWZ)), src, (row0 + r, c0 + col), 16,
                           16 if row0 + r < seq else 0)


def passes(d: int) -> tuple[tuple[int, int], ...]:
    """The (C0, DV) launches for head_dim d: O's columns [C0, C0 + DV) per launch.  Up to 192 one
    launch holds all of O (at most 96 f32 registers per lane); above, two launches split O's
    columns at 128 and each recomputes S = Q Kᵀ (1.5x the MMAs of one pass at d = 256) - one
    pass would need O's 128 registers plus the shared addresses, past 255 (spills)."""
    return ((0, d),) if d <= 192 else ((0, 128), (128, d - 128))


def flash_attention_tc_wide_kernel(out: u16[:, :, :], q: u16[:, :, :], k: u16[:, :, :],
                                   v: u16[:, :, :], group: i32, scale_log2: f32,
                                   D: pyptx.constexpr, C0: pyptx.constexpr,
                                   DV: pyptx.constexpr, causal: pyptx.constexpr,
                                   bf: pyptx.constexpr, WINDOW: pyptx.constexpr,
                                   SOFTCAP: pyptx.constexpr):
    """out[bh, :, C0:C0 + DV] = attention(q[bh], k[bh // group], v[bh // group])[:, C0:C0 + DV]
    for one 64-row query tile (f16 or bf16 bits); scale_log2 > 0.  WINDOW (with causal): the
    sliding window, tiles before the block's first row's window never loaded (softmax_tile
    masks the edge tiles); SOFTCAP: the logit cap.  `flash_attention_tc_wide_kernel` is this
    with both off (0)."""
    SWZ = D == 256              # unpadded, swizzled rows; else padded by 8 halves
    buf = pyptx.shared.array((WQ + 2 * WKV, D if D == 256 else D + 8), u16)   # Q, K, V rows
    KR = WQ
    VR = WQ + WKV
    sq = q.shape[1]
    sk = k.shape[1]
    tid = thread_idx.x
    lane = tid & 31
    warp = tid >> 5
    bh = block_idx.y
    kvh = bh // group
    kh = k[kvh]
    vh = v[kvh]
    q0 = block_idx.x * WQ
    t2 = (lane & 3) * 2
    l16 = lane & 15
    l8 = lane & 7
    hi16 = (lane >> 4) * 8
    hi8 = ((lane >> 3) & 1) * 8
    shift = sk - sq
    kv_end = sk
    if causal:
        kv_end = min(sk, q0 + WQ + shift)
    ntiles = (kv_end + WKV - 1) // WKV
    t_first = 0
    if WINDOW:              # the first tile holding a key of the block's first row's window
        t_first = min(max(q0 + shift - WINDOW + 1, 0) // WKV, ntiles)
    _load(buf, 0, q[bh], q0, WQ, 0, D, tid, SWZ)
    if t_first < ntiles:
        _load(buf, KR, kh, t_first * WKV, WKV, 0, D, tid, SWZ)
    pyptx.cp_async_wait(1)                          # group [Q, K0]
    if t_first < ntiles:
        _load(buf, VR, vh, t_first * WKV, WKV, C0, DV, tid, SWZ)
    qr = warp * 16 + l16                            # this lane's ldmatrix rows
    kr = KR + hi16 + l8
    vr = VR + l16
    # the stored column of logical column 64 g + 16 j + hi is 64 g + ((16 j + hi) ^ swizzle):
    # four per-lane bases, the rest constant offsets (qr, kr, vr all have row & 7 == lane & 7)
    cq = ()
    for j in pyptx.static_range(4):
        cq = cq + (_col(l8, 16 * j + hi16, SWZ),)
    o = ((0.0, 0.0, 0.0, 0.0),) * (DV // 8)
    m0 = NEG_INF
    m1 = NEG_INF
    l0 = 0.0
    l1 = 0.0
    row0 = q0 + warp * 16 + (lane >> 2)
    for t in range(t_first, ntiles):
        pyptx.cp_async_wait(1)                      # closes [V(t)]; K(t) has landed
        pyptx.syncthreads()
        # ---- S = Q K(t)ᵀ: 16 rows x 16 keys per warp ----
        s0 = (0.0, 0.0, 0.0, 0.0)
        s1 = (0.0, 0.0, 0.0, 0.0)
        for ks in range(D // 16):       # a run-time loop: 2 shared addresses, not 2 x D/16
            qa = pyptx.ldmatrix(buf, (qr, _col(qr, ks * 16 + hi16, SWZ)), count=4)
            kf = pyptx.ldmatrix(buf, (kr, _col(kr, ks * 16 + hi8, SWZ)), count=4)
            s0 = pyptx.mma_sync(qa, (kf[0], kf[1]), s0, atype="bf16" if bf else "f16")
            s1 = pyptx.mma_sync(qa, (kf[2], kf[3]), s1, atype="bf16" if bf else "f16")
        pyptx.syncthreads()                         # every warp is done with K(t)
        if t + 1 < ntiles:
            _load(buf, KR, kh, (t + 1) * WKV, WKV, 0, D, tid, SWZ)
        pf, a0, a1, m0, m1, l0, l1, need = softmax_tile((s0, s1), t * WKV, q0, row0, t2, sk,
                                                        shift, m0, m1, l0, l1, scale_log2, 2,
                                                        causal, bf, TEST, WINDOW, SOFTCAP)
        if need:
            o = rescale(o, a0, a1, DV // 8)
        pyptx.cp_async_wait(1)                      # closes [K(t+1)]; V(t) has landed
        pyptx.syncthreads()
        # ---- O += P V(t) ----
        pa = (pf[0][0], pf[0][1], pf[1][0], pf[1][1])
        no = ()
        for jp in pyptx.static_range(DV // 16):
            vf = pyptx.ldmatrix(buf, (vr, cq[jp & 3] + 64 * (jp >> 2)), count=4, trans=True)
            no = no + (pyptx.mma_sync(pa, (vf[0], vf[1]), o[2 * jp],
                                      atype="bf16" if bf else "f16"),
                       pyptx.mma_sync(pa, (vf[2], vf[3]), o[2 * jp + 1],
                                      atype="bf16" if bf else "f16"))
        o = no
        pyptx.syncthreads()                         # every warp is done with V(t)
        if t + 1 < ntiles:
            _load(buf, VR, vh, (t + 1) * WKV, WKV, C0, DV, tid, SWZ)
    pyptx.cp_async_wait(0)
    finish(out, o, l0, l1, bh, row0, C0 + t2, DV // 8, bf)


#: both options off: the kernel's launch signature and code before they existed
flash_attention_tc_wide_kernel = pyptx.kernel(flash_attention_tc_wide_kernel).specialize(
    WINDOW=0, SOFTCAP=0.0)
