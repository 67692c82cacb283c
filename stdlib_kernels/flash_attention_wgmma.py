"""Hopper FlashAttention (sm_90a): forward attention for float16 / bfloat16 q, k, v with head_dim
64 or 128 on TMA, mbarriers and warpgroup MMA, in FlashAttention-3's structure.

A block of NWG·128 + 32 threads (+ 128 with REGS: a producer warpgroup re-sized by setmaxnreg)
owns NWG·64 query rows of one head:

* warp 4·NWG is the producer: one lane (`elect_one`) loads the block's Q tile once (TMA, one
  mbarrier), then streams the K and V tiles of BKV keys into a ring of STAGES shared-memory
  stages, each guarded by a "full" mbarrier (arrive.expect_tx of the stage's bytes, completed by
  the copies) and an "empty" one (an arrival of every consumer thread once its warpgroup's MMAs
  have read the stage);
* warpgroup w (warps 4w .. 4w+3) owns query rows 64w .. 64w+63 of the block.  Per key tile:
  S = Q Kᵀ by `wgmma m64n{BKV}k16` with Q and K both read from shared memory through matrix
  descriptors (K-major: Q is [rows, d], K is [keys, d]); the mask and online-softmax step in f32
  on the S accumulators (the wgmma D fragment of a warp is, n-tile by n-tile, the m16n8 C
  fragment of the mma.sync kernel: a row's values live in a quad of lanes, so a row maximum is
  two `shfl_xor` steps); P packed to f16/bf16 A fragments in registers (the wgmma register-A
  layout is the m16n8k16 A layout); O = O·a + P V by `wgmma m64n{D}k16` with A from registers
  and V through a descriptor (V is [keys, d]: MN-major for B, `trans_b`).  Finally O / l is
  stored as f16/bf16 (`_flash_tile.finish`).

FA3's intra-warpgroup overlap: a step issues tile t's S = Q Kᵀ, then the previous tile's
O = O·a + P V, waits for S only (`wgmma_wait(1)`) and runs tile t's softmax while the P V
wgmmas run, then waits for them and releases the previous tile's stage.  So the first tile of a
warpgroup is peeled (S and softmax only) and its last P V follows the loops; P, O's factors and
the stage of the pending P V travel in the loop state.  A warpgroup holds two stages at once.
(FA3's ping-pong of the two warpgroups' softmax and GEMMs by named barriers is not done.)

The softmax step is FA3's, not `_flash_tile.softmax_tile`'s: the bias of a row is its running
maximum of *raw* scores m, p = 2^((s - m)·c) (c = scale·log2 e), and O and l are rescaled by
2^((m_old - m)·c) every tile.  The exponent is exactly 0 at the top score however large the
logits are (no rounded bias m·c, so no huge-logit special path), and the step has no
data-dependent branch: mma.sync's version skips the rescale and takes a clamped path by warp
votes, and a warp-dependent branch before a warpgroup instruction lets the warps of a
warpgroup arrive at it one by one, which the CPU executor refuses (it runs a wgmma only when
all four warps reach it together; a GPU does not mind).  For the same reason the masks are
`min(s, ±inf)` of `&`-ed tests, not `x if ok else -inf` (a branch in the IR).

Every tile is 128-byte swizzled: a row of 64 halves is 128 bytes, so d = 128 is two boxes of
64 columns.  Q and K (K-major): 8-row groups 1024 bytes apart (SBO), a k16 slice is 32 bytes on
inside the swizzled row, the second 64-column box BKV·128 (K) or 64·128 (Q) bytes on.  V
(MN-major): the 64-column boxes are LBO = BKV·128 bytes apart, 8-key groups SBO = 1024 bytes,
a k16 slice of keys 2048 bytes on.

Causal (aligned to the end), a sliding window and grouped-query heads follow
`flash_attention.py`: the producer loads the tiles some row of the block needs; a warpgroup
computes the tiles its own rows need (unmasked ones in one loop, the ones crossing the
diagonal, the window's edge or the end of the keys in a masked one) and only releases the
others (it must still wait for them to land before it arrives, or its arrival would count
towards the stage's previous use).  TMA's out-of-bounds zeros cover ragged seq_q / seq_k: keys
past the end are masked, rows past the end are not stored.  softcap= applies to the scores as
in `_flash_tile`.

Shared memory (dynamic): Q (NWG·64·d halves), STAGES K tiles, STAGES V tiles (BKV·d halves
each), then 2·STAGES + 1 mbarriers; every tile starts at a multiple of 1024 bytes.  A GPU
launch uses two consumer warpgroups and 128-key tiles in 4 stages (d = 64) or 3 (d = 128);
the CPU executor grants 48 KiB a block, so its launches use a smaller configuration of the same
kernel (`config`).
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u16

from . import _validate as V
from ._flash_tile import F32_MAX, LOG2E, MASKED, NEG_INF, PLAIN, finish

INF = float("inf")

WG_ROWS = 64                     # query rows of a consumer warpgroup
SW = 64                          # halves per 128-byte swizzled row (one TMA box's width)
HEAD_DIMS = (64, 128)
PRODUCER_REGS = 24               # setmaxnreg.dec of a producer warpgroup (FA3's count)


def config(d: int, gpu: bool) -> tuple[int, int, int]:
    """(NWG consumer warpgroups, BKV keys per tile, STAGES) for head_dim d.  A warpgroup holds
    two stages at once (the previous tile's V while its next S reads K), so a ring of STAGES
    prefetches STAGES - 2 tiles ahead.  On a GPU: FA3's two warpgroups and 128-key tiles, in 4
    stages (d = 64: 144 KiB) or 3 (d = 128: 224 KiB, the consumers given 240 registers by
    setmaxnreg, `regs`).  On the CPU executor (48 KiB a block): two warpgroups and 32-key tiles
    (d = 64) or one warpgroup and 16-key tiles (d = 128), 2 stages (32 KiB), so that every
    stage and both parities run in small tests."""
    if gpu:
        return (2, 128, 4) if d == 64 else (2, 128, 3)
    return (2, 32, 2) if d == 64 else (1, 16, 2)


def regs(d: int, gpu: bool) -> int:
    """The consumers' setmaxnreg count (the kernel's REGS), 0 for none.  d = 128 on a GPU: the
    128-key tile needs 216 registers a thread, 8 under the 224 a 288-thread block allows; with
    a producer warpgroup at PRODUCER_REGS the consumers get 240 (128·24 + 256·240 <= 65536),
    FA3's split, and ptxas keeps that headroom whatever it schedules."""
    return 240 if gpu and d == 128 else 0


def shared_bytes(d: int, nwg: int, bkv: int, stages: int) -> int:
    """Dynamic shared memory of a launch: Q, the K and V rings, 2·stages + 1 mbarriers."""
    return 2 * (nwg * WG_ROWS * d + 2 * stages * bkv * d) + 8 * (2 * stages + 1)


def threads(nwg: int, regs: int = 0) -> int:
    """Block size: the consumer warpgroups and a producer warp, or (regs, setmaxnreg) a whole
    producer warpgroup, since setmaxnreg is a warpgroup instruction."""
    return nwg * 128 + (128 if regs else 32)


@pyptx.func
def _quads(acc, N: pyptx.constexpr):
    """A wgmma D tuple (N/2 f32) as N/8 m16n8 fragments (4 f32: rows g, g, g+8, g+8)."""
    q = ()
    for j in pyptx.static_range(N // 8):
        q = q + ((acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]),)
    return q


@pyptx.func
def _scaled(o, a0: f32, a1: f32, N: pyptx.constexpr):
    """O (a wgmma D tuple) times its rows' factors: a0 for row g, a1 for row g + 8."""
    no = ()
    for j in pyptx.static_range(N // 8):
        no = no + (o[4 * j] * a0, o[4 * j + 1] * a0, o[4 * j + 2] * a1, o[4 * j + 3] * a1)
    return no


@pyptx.func
def _softcap(sacc, k: f32, N: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """Raw scores -> C·tanh(s·k), C = SOFTCAP·log2 e, k = scale·log2 e / C: the capped logits
    SOFTCAP·tanh(s·scale / SOFTCAP) in base-2 units (as `_flash_tile`)."""
    ns = ()
    for i in pyptx.static_range(N // 2):
        ns = ns + (SOFTCAP * LOG2E * pyptx.math.tanh(sacc[i] * k),)
    return ns


@pyptx.func
def _mask(sacc, kv0: i32, row0: i32, t2: i32, sk: i32, shift: i32, N: pyptx.constexpr,
          causal: pyptx.constexpr, WINDOW: pyptx.constexpr):
    """-inf for keys past the end, (causal) after the row's last key, (WINDOW) not after its
    last key - WINDOW.  Per row a bound relative to the thread's first column, so each score
    is compared with a constant (8j + e): few live registers.  `&` of the tests and a `min`
    instead of `x if ok else -inf` (a branch in the IR): no branches (module docstring)."""
    ns = ()
    for h in pyptx.static_range(2):
        row = row0 + 8 * h
        base = kv0 + t2
        hi = sk - base                        # columns col - base < hi are keys
        if causal:
            hi = min(hi, row + shift + 1 - base)
        lo = 0
        if WINDOW:
            lo = row + shift - WINDOW - base  # and > lo
        for j in pyptx.static_range(N // 8):
            for e in pyptx.static_range(2):
                ok = 8 * j + e < hi
                if WINDOW:
                    ok = ok & (8 * j + e > lo)
                # x if ok else -inf, as min(x, ±inf)
                ns = ns + (min(sacc[4 * j + 2 * h + e], (f32(ok) - 0.5) * INF),)
    # back to the D order (register 4j + 2h + e)
    out = ()
    for j in pyptx.static_range(N // 8):
        out = out + (ns[2 * j], ns[2 * j + 1], ns[N // 4 + 2 * j], ns[N // 4 + 2 * j + 1])
    return out


@pyptx.func
def _row_max(sacc, m: f32, h: pyptx.constexpr, N: pyptx.constexpr):
    """max(m, the scores of row half h (0: row g, 1: row g + 8) of the tile), over the quad."""
    for j in pyptx.static_range(N // 8):
        m = max(m, max(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]))
    for i in pyptx.static_range(2):
        m = max(m, pyptx.shfl_xor(m, 1 << i))
    return m


@pyptx.func
def _online_softmax(sacc, m0: f32, m1: f32, l0: f32, l1: f32, c: f32, N: pyptx.constexpr,
                    bf: pyptx.constexpr):
    """The online-softmax step on the tile's (masked) raw scores: the rows' running maxima m
    (raw scores), p = 2^((s - m)·c) <= 1, O's factors a = 2^((m_old - m)·c) (0 while a row
    has seen no key: 0 · a), l = l·a + Σp -> (pf, a0, a1, m0, m1, l0, l1); pf: P packed as m16n8k16
    A-fragment words, two per 8-key n-tile.  No branches: every warp of the warpgroup runs the
    same instructions (module docstring)."""
    n0 = _row_max(sacc, m0, 0, N)
    n1 = _row_max(sacc, m1, 1, N)
    # -inf (a row that has seen no key) as the most negative f32: its p are 2^-inf = 0, its
    # a = 2^((-F32_MAX - n)·c) <= 1 meets O = l = 0; no -inf - -inf
    b0 = max(n0, -F32_MAX)
    b1 = max(n1, -F32_MAX)
    a0 = pyptx.math.fast_exp2((max(m0, -F32_MAX) - b0) * c)
    a1 = pyptx.math.fast_exp2((max(m1, -F32_MAX) - b1) * c)
    l0 = l0 * a0
    l1 = l1 * a1
    pf = ()
    for j in pyptx.static_range(N // 8):
        p0 = pyptx.math.fast_exp2((sacc[4 * j] - b0) * c)
        p1 = pyptx.math.fast_exp2((sacc[4 * j + 1] - b0) * c)
        p2 = pyptx.math.fast_exp2((sacc[4 * j + 2] - b1) * c)
        p3 = pyptx.math.fast_exp2((sacc[4 * j + 3] - b1) * c)
        l0 = l0 + p0 + p1
        l1 = l1 + p2 + p3
        pf = pf + ((pyptx.pack2(p0, p1, pyptx.bf16 if bf else pyptx.f16),
                    pyptx.pack2(p2, p3, pyptx.bf16 if bf else pyptx.f16)),)
    return pf, a0, a1, n0, n1, l0, l1


@pyptx.func
def _next(s: i32, ph: i32, STAGES: pyptx.constexpr):
    """The ring position after stage s of phase parity ph."""
    s += 1
    if s == STAGES:
        s = 0
        ph ^= 1
    return s, ph


@pyptx.func
def _release(bars, st, STAGES: pyptx.constexpr):
    """A tile this warpgroup's rows do not need: wait until it has landed (so the producer has
    seen the stage's previous use released), then release it."""
    o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp = st
    pyptx.mbarrier_wait(bars, s, ph)
    pyptx.mbarrier_arrive(bars, STAGES + s)
    s, ph = _next(s, ph, STAGES)
    return o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp


@pyptx.func
def _scores(bars, s: i32, ph: i32, q_desc, k_desc, D: pyptx.constexpr, BKV: pyptx.constexpr,
            bf: pyptx.constexpr):
    """Wait for stage s's tiles, issue S = Q Kᵀ (one wgmma group); its accumulators may be
    read after the wgmma_wait that retires the group."""
    pyptx.mbarrier_wait(bars, s, ph)
    off = pyptx.u64(pyptx.u32(s) * (BKV * D * 2 // 16))     # a stage's bytes >> 4
    pyptx.wgmma_fence()
    sacc = (0.0,) * (BKV // 2)
    for kk in pyptx.static_range(D // 16):
        # k16 slice kk: 32 bytes on in the swizzled row, the next 64-column box after 4
        sacc = pyptx.wgmma(q_desc + (kk // 4) * (WG_ROWS * 128 // 16) + 2 * (kk % 4),
                           k_desc + off + (kk // 4) * (BKV * 128 // 16) + 2 * (kk % 4),
                           sacc, atype="bf16" if bf else "f16", scale_d=kk > 0)
    pyptx.wgmma_commit()
    return sacc


@pyptx.func
def _pv(o, pf, a0: f32, a1: f32, sp: i32, v_desc, D: pyptx.constexpr, BKV: pyptx.constexpr,
        bf: pyptx.constexpr):
    """O = O·a + P V with V from stage sp (one wgmma group; P's registers and O stay busy
    until the wait that retires it)."""
    o = _scaled(o, a0, a1, D)
    off = pyptx.u64(pyptx.u32(sp) * (BKV * D * 2 // 16))
    pyptx.wgmma_fence()
    for kk in pyptx.static_range(BKV // 16):
        pa = (pf[2 * kk][0], pf[2 * kk][1], pf[2 * kk + 1][0], pf[2 * kk + 1][1])
        o = pyptx.wgmma(pa, v_desc + off + kk * (16 * 128 // 16), o,
                        atype="bf16" if bf else "f16", trans_b=True)
    pyptx.wgmma_commit()
    return o


@pyptx.func
def _softmax(sacc, t: i32, m0: f32, m1: f32, l0: f32, l1: f32, row0: i32, t2: i32, sk: i32,
             shift: i32, c: f32, BKV: pyptx.constexpr, causal: pyptx.constexpr,
             bf: pyptx.constexpr, MASK: pyptx.constexpr, WINDOW: pyptx.constexpr,
             SOFTCAP: pyptx.constexpr):
    if SOFTCAP:             # capped logits in base-2 units, then c = 1
        sacc = _softcap(sacc, c * (1.0 / (SOFTCAP * LOG2E)), BKV, SOFTCAP)
        c = 1.0
    if MASK == MASKED:
        sacc = _mask(sacc, t * BKV, row0, t2, sk, shift, BKV, causal, WINDOW)
    return _online_softmax(sacc, m0, m1, l0, l1, c, BKV, bf)


@pyptx.func
def _first(bars, st, t: i32, q_desc, k_desc, row0: i32, t2: i32, sk: i32, shift: i32, c: f32,
           D: pyptx.constexpr, BKV: pyptx.constexpr, STAGES: pyptx.constexpr,
           causal: pyptx.constexpr, bf: pyptx.constexpr, WINDOW: pyptx.constexpr,
           SOFTCAP: pyptx.constexpr):
    """The warpgroup's first tile t: S and its softmax step (masked: any tile may need it); its
    P V is issued by the next step (or `_last`)."""
    o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp = st
    sacc = _scores(bars, s, ph, q_desc, k_desc, D, BKV, bf)
    pyptx.wgmma_wait(0)
    pf, a0, a1, m0, m1, l0, l1 = _softmax(sacc, t, m0, m1, l0, l1, row0, t2, sk, shift, c, BKV,
                                          causal, bf, MASKED, WINDOW, SOFTCAP)
    sp = s
    s, ph = _next(s, ph, STAGES)
    return o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp


@pyptx.func
def _step(bars, st, t: i32, q_desc, k_desc, v_desc, row0: i32, t2: i32, sk: i32,
          shift: i32, c: f32, D: pyptx.constexpr, BKV: pyptx.constexpr,
          STAGES: pyptx.constexpr, causal: pyptx.constexpr, bf: pyptx.constexpr,
          MASK: pyptx.constexpr, WINDOW: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """Key tile t (ring stage s, parity ph), FA3's intra-warpgroup overlap: issue S_t = Q K_tᵀ,
    then O = O·a + P V for the previous tile (stage sp), wait for S_t only (the P V group keeps
    the tensor cores busy) and run tile t's softmax step on it, then wait for P V and release
    the previous tile's stage.  st = (o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp): P, O's factors
    and the stage of the tile whose P V is still to do."""
    o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp = st
    sacc = _scores(bars, s, ph, q_desc, k_desc, D, BKV, bf)
    o = _pv(o, pf, a0, a1, sp, v_desc, D, BKV, bf)
    pyptx.wgmma_wait(1)                         # S_t has landed; P V may still run
    pf, a0, a1, m0, m1, l0, l1 = _softmax(sacc, t, m0, m1, l0, l1, row0, t2, sk, shift, c, BKV,
                                          causal, bf, MASK, WINDOW, SOFTCAP)
    pyptx.wgmma_wait(0)
    pyptx.mbarrier_arrive(bars, STAGES + sp)
    sp = s
    s, ph = _next(s, ph, STAGES)
    return o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp


@pyptx.func
def _last(bars, st, v_desc, D: pyptx.constexpr, BKV: pyptx.constexpr,
          STAGES: pyptx.constexpr, bf: pyptx.constexpr):
    """The last tile's P V, and its stage released."""
    o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp = st
    o = _pv(o, pf, a0, a1, sp, v_desc, D, BKV, bf)
    pyptx.wgmma_wait(0)
    pyptx.mbarrier_arrive(bars, STAGES + sp)
    return o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp


def flash_attention_wgmma_kernel(out: u16[:, :, :], qmap: pyptx.tensormap,
                                 kmap: pyptx.tensormap, vmap: pyptx.tensormap, sq: i32, sk: i32,
                                 group: i32, scale_log2: f32, D: pyptx.constexpr,
                                 NWG: pyptx.constexpr, BKV: pyptx.constexpr,
                                 STAGES: pyptx.constexpr, causal: pyptx.constexpr,
                                 bf: pyptx.constexpr, WINDOW: pyptx.constexpr,
                                 SOFTCAP: pyptx.constexpr, REGS: pyptx.constexpr):
    """out[bh] = attention(q[bh], k[bh // group], v[bh // group]) for NWG·64 query rows, from
    the tensor maps of q [b·h, sq, D] (box 1 x 64 x 64) and k, v [b·hk, sk, D] (box 1 x BKV x
    64), all 128-byte swizzled; f16 (bf False) or bf16 bits; scale_log2 = scale·log2(e) > 0.
    WINDOW / SOFTCAP: 0 is off (`flash_attention_wgmma_kernel` is this with both off).
    REGS: 0, or the consumers' register count: the producer is then a whole warpgroup that
    gives registers back (setmaxnreg 24) and the consumers take REGS (`threads`)."""
    if REGS:
        pyptx.launch_bounds(NWG * 128 + 128, 1)
    ring = pyptx.shared.dynamic(u16)
    QH = NWG * WG_ROWS * D                   # halves of the Q tile
    KV = BKV * D                             # halves of one K (or V) stage
    k_base = QH
    v_base = QH + STAGES * KV
    bars = pyptx.shared.dynamic(pyptx.u64)[(QH + 2 * STAGES * KV) // 4:]  # full, empty, q
    tid = thread_idx.x
    warp = tid >> 5
    bh = block_idx.y
    kvh = bh // group
    q0 = block_idx.x * (NWG * WG_ROWS)
    shift = sk - sq
    # the block's key tiles: [t_lo, nt) (causal: up to its last row's last key; window: from
    # its first row's first key)
    kv_end = sk
    if causal:
        kv_end = max(min(sk, q0 + NWG * WG_ROWS + shift), 0)
    nt = (kv_end + BKV - 1) // BKV
    t_lo = 0
    if WINDOW:
        t_lo = min(max(q0 + shift - WINDOW + 1, 0) // BKV, nt)
    if tid == 0:
        for i in pyptx.static_range(STAGES):
            pyptx.mbarrier_init(bars, i, 1)
            pyptx.mbarrier_init(bars, STAGES + i, NWG * 128)
        pyptx.mbarrier_init(bars, 2 * STAGES, 1)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if warp >= NWG * 4:
        if REGS:
            pyptx.setmaxnreg(PRODUCER_REGS, inc=False)
    if warp == NWG * 4:
        if pyptx.elect_one():            # one lane, which ptxas sees is one: no loop
            pyptx.mbarrier_arrive_expect_tx(bars, 2 * STAGES, QH * 2)
            for w in pyptx.static_range(NWG):
                for cb in pyptx.static_range(D // SW):
                    pyptx.tma_load(ring, (w * (D // SW) + cb) * (WG_ROWS * SW), qmap,
                                   (bh, q0 + w * WG_ROWS, cb * SW), bars, 2 * STAGES)
            s = 0
            ph = 0
            for t in range(t_lo, nt):
                if t - t_lo >= STAGES:            # the consumers released the stage's last use
                    pyptx.mbarrier_wait(bars, STAGES + s, ph ^ 1)
                pyptx.mbarrier_arrive_expect_tx(bars, s, KV * 4)
                for cb in pyptx.static_range(D // SW):
                    pyptx.tma_load(ring, k_base + s * KV + cb * (BKV * SW), kmap,
                                   (kvh, t * BKV, cb * SW), bars, s)
                    pyptx.tma_load(ring, v_base + s * KV + cb * (BKV * SW), vmap,
                                   (kvh, t * BKV, cb * SW), bars, s)
                s += 1
                if s == STAGES:
                    s = 0
                    ph ^= 1
    elif warp < NWG * 4:
        if REGS:
            pyptx.setmaxnreg(REGS, inc=True)
        wg = pyptx.shfl_idx(warp >> 2, 0)    # warp-uniform: descriptors stay in uniform regs
        lane = tid & 31
        t2 = (lane & 3) * 2
        qw = q0 + wg * WG_ROWS                   # this warpgroup's first row
        row0 = qw + (warp & 3) * 16 + (lane >> 2)
        q_desc = pyptx.wgmma_desc(ring, wg * (WG_ROWS * D), swizzle=128, lbo=16, sbo=1024)
        k_desc = pyptx.wgmma_desc(ring, k_base, swizzle=128, lbo=16, sbo=1024)
        v_desc = pyptx.wgmma_desc(ring, v_base, swizzle=128, lbo=BKV * 128, sbo=1024)
        # this warpgroup's tiles: [t_first, nw) computed, the rest of [t_lo, nt) released;
        # [max(t_first, w_end), n_plain) need no mask (w_end: past every row's window edge)
        nw = nt
        if causal:
            nw = (max(min(sk, qw + WG_ROWS + shift), 0) + BKV - 1) // BKV
        t_first = t_lo
        w_end = t_lo
        if WINDOW:
            t_first = min(max(qw + shift - WINDOW + 1, 0) // BKV, nw)
            w_end = max(qw + WG_ROWS - 1 + shift - WINDOW + BKV, 0) // BKV
        n_plain = sk // BKV
        if causal:
            n_plain = min(n_plain, max((qw + shift + 1) // BKV, 0))
        n_plain = min(n_plain, nw)
        pf0 = (pyptx.u32(0), pyptx.u32(0))
        st = ((0.0,) * (D // 2), NEG_INF, NEG_INF, 0.0, 0.0, 0, 0, (pf0,) * (BKV // 8), 1.0, 1.0,
              0)
        pyptx.mbarrier_wait(bars, 2 * STAGES, 0)             # Q has landed
        for t in range(t_lo, t_first):
            st = _release(bars, st, STAGES)
        if t_first < nw:                                      # warpgroup-uniform
            st = _first(bars, st, t_first, q_desc, k_desc, row0, t2, sk, shift, scale_log2, D,
                        BKV, STAGES, causal, bf, WINDOW, SOFTCAP)
        t1 = t_first + 1
        if WINDOW:
            for t in range(t1, min(w_end, nw)):
                st = _step(bars, st, t, q_desc, k_desc, v_desc, row0, t2, sk, shift,
                           scale_log2, D, BKV, STAGES, causal, bf, MASKED, WINDOW, SOFTCAP)
            for t in range(max(w_end, t1), n_plain):
                st = _step(bars, st, t, q_desc, k_desc, v_desc, row0, t2, sk, shift,
                           scale_log2, D, BKV, STAGES, causal, bf, PLAIN, WINDOW, SOFTCAP)
            for t in range(max(max(n_plain, w_end), t1), nw):
                st = _step(bars, st, t, q_desc, k_desc, v_desc, row0, t2, sk, shift,
                           scale_log2, D, BKV, STAGES, causal, bf, MASKED, WINDOW, SOFTCAP)
        else:
            for t in range(t1, n_plain):
                st = _step(bars, st, t, q_desc, k_desc, v_desc, row0, t2, sk, shift,
                           scale_log2, D, BKV, STAGES, causal, bf, PLAIN, 0, SOFTCAP)
            for t in range(max(n_plain, t1), nw):
                st = _step(bars, st, t, q_desc, k_desc, v_desc, row0, t2, sk, shift,
                           scale_log2, D, BKV, STAGES, causal, bf, MASKED, 0, SOFTCAP)
        if t_first < nw:
            st = _last(bars, st, v_desc, D, BKV, STAGES, bf)
        for t in range(max(nw, t_first), nt):
            st = _release(bars, st, STAGES)
        o, m0, m1, l0, l1, s, ph, pf, a0, a1, sp = st
        finish(out, _quads(o, D), l0, l1, bh, row0, t2, D // 8, bf)


#: both options off: the kernel's launch signature and code before they existed
flash_attention_wgmma_kernel = pyptx.kernel(flash_attention_wgmma_kernel, arch="sm_90a"
                                            ).specialize(WINDOW=0, SOFTCAP=0.0, REGS=0)


def tma_ok(x) -> bool:
    """Can a tensor map describe this [b·h, seq, d] array of 16-bit elements?  C-contiguous
    with a 16-byte aligned start (rows of d = 64 or 128 halves are 16-byte multiples)."""
    if V.is_device(x):      # the CPU executor's DeviceArrays keep a host copy (same offsets)
        ptr = x.device_pointer if x._host is None else x._host.ctypes.data
    else:
        if not x.flags.c_contiguous:
            return False
        ptr = x.ctypes.data
    return ptr % 16 == 0


def usable(q3, k3, v3) -> bool:
    """Does the Hopper kernel take these validated arrays (head_dim 64 / 128, tensor maps)?"""
    return q3.shape[2] in HEAD_DIMS and all(tma_ok(x) for x in (q3, k3, v3))


def flash_attention_wgmma_arrays(kind: str, q3, k3, v3, group: int, causal: bool,
                                 scale_log2: np.float32, out, window: int = 0,
                                 softcap: float = 0.0, cfg: tuple[int, int, int] | None = None):
    """The launch on validated [b·h, seq, d] uint16 arrays (`usable`), scale_log2 > 0 (the
    caller's `_positive_scale`), into `out` ([b·h, seq_q, d] uint16).  cfg: (NWG, BKV, STAGES),
    default `config` for where the launch runs."""
    from .attention import kv_kernel
    from .gemm_wgmma import launch_arch
    bh, sq, d = q3.shape
    sk = k3.shape[1]
    gpu = launch_arch() is not None
    nwg, bkv, stages = config(d, gpu) if cfg is None else cfg
    nregs = regs(d, gpu) if cfg is None else 0
    if gpu:       # a tensor map for a GPU launch describes device memory: host inputs go there
        q3, k3, v3 = (x if V.is_device(x) else pyptx.to_device(x) for x in (q3, k3, v3))
    qmap = pyptx.TensorMap(q3, (1, WG_ROWS, SW), swizzle=128)
    kmap = pyptx.TensorMap(k3, (1, bkv, SW), swizzle=128)
    vmap = pyptx.TensorMap(v3, (1, bkv, SW), swizzle=128)
    kern = flash_attention_wgmma_kernel
    if window or softcap:
        kern = kv_kernel(kern, WINDOW=window, SOFTCAP=softcap)
    if nregs:
        kern = kv_kernel(kern, REGS=nregs)
    kern[(V.ceil_div(sq, nwg * WG_ROWS), bh), threads(nwg, nregs)](
        out, qmap, kmap, vmap, sq, sk, group, scale_log2, d, nwg, bkv, stages, bool(causal),
        kind == "bf16", shared_mem=shared_bytes(d, nwg, bkv, stages))
    return out
