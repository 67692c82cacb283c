"""FlashAttention: out = softmax(q kᵀ · scale [+ causal mask]) v, never forming the seq × seq
matrix.  q is `[heads, seq_q, d]` or `[batch, heads, seq_q, d]`; k, v have `heads / group`
heads (grouped-query attention: query head h reads KV head h // group).  With `causal`, query i
sees keys j <= i + seq_k - seq_q (the mask is aligned to the end, as for a KV cache); a query that
sees no key gives 0.

Tensor-core path (float16 / bfloat16), head_dim a multiple of 16 up to 128: a block of 4 warps
owns 64 query rows, 16 per warp.  The Q tile is staged through shared memory once and kept in
registers as m16n8k16 A fragments (`ldmatrix`).  K/V tiles of 32 keys are double-buffered in
shared memory with zero-fill `cp_async` (the next tile is in flight while this one is used; rows
past the end land as zeros); per tile each warp computes S = Q Kᵀ (K fragments by `ldmatrix`),
the mask and online-softmax step of `_flash_tile` in f32 with `exp2` and the scale folded into
log2(e), then O += P V where P is re-packed from the S accumulators straight into A fragments
(no shared memory round trip) and V is read with `ldmatrix.trans`.  Causal tiles entirely above
the diagonal of the block are never loaded; the tiles that need no mask run in one loop, the
ones crossing the diagonal or the end of the keys in a second, masking one.  head_dim 144..256:
`flash_attention_wide.py`.

Hopper path (head_dim 64 / 128, float16 / bfloat16): `flash_attention_wgmma.py` (TMA K/V ring,
wgmma), chosen by `variant` (see `flash_attention`).

float32 path (SIMT): one warp per query row, lane l owning dimensions l, l+32, ...; K/V tiles of
32 keys in shared memory are shared by the block's 8 warps; per key a warp all-reduce of q·k and
an online-softmax update.  head_dim up to 256.
"""
from __future__ import annotations

import math

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u16

from . import _validate as V
from ._args import result, stdlib_function
from .gemm_tc import _FROM_BITS, same_place
from ._flash_tile import F32_MAX, MASKED, NEG_INF, PLAIN, finish, rescale, softmax_tile
from .flash_attention_wide import (WIDE_MAX_D, WIDE_THREADS, WQ,
                                   flash_attention_tc_wide_kernel, passes as wide_passes)
from ._warp import NEG_BIG, warp_sum
from .attention import kv_kernel, window_softcap
from .flash_attention_wgmma import flash_attention_wgmma_arrays

LOG2E = 1.4426950408889634

# ---- tensor-core kernel ----------------------------------------------------------------------

BQ = 64                 # query rows per block (16 per warp)
BKV = 32                # keys per K/V tile
PAD = 8                 # halves of padding per shared row (rows stay 16-byte aligned)
TC_THREADS = 128
TC_MAX_D = 128


@pyptx.func
def _load_rows(buf: u16[:, :, :], slot0: i32, src: u16[:, :], row0: i32,
               nrows: pyptx.constexpr, D: pyptx.constexpr, tid: i32):
    """Rows [row0, row0 + nrows) of src (one head) -> buf slots slot0, slot0 + 1, ... (BKV
    rows each), 16 bytes per cp_async.  A row past the end of src is zero-filled (cp.async's
    src-size 0: nothing is read): its scores are masked (K), its probabilities meet zeros (V)
    and its outputs are not stored (Q)."""
    seq = src.shape[0]
    cpr = D // 8                # 16-byte chunks per row; shifts when a power of two
    sh = 1 if cpr == 2 else (2 if cpr == 4 else (3 if cpr == 8 else (4 if cpr == 16 else 0)))
    total = nrows * cpr
    for i in pyptx.static_range((total + TC_THREADS - 1) // TC_THREADS):
        c = tid + TC_THREADS * i
        if total % TC_THREADS == 0 or c < total:       # a constant True for D = 64, 128
            r = c >> sh if sh else c // cpr
            col = ((c & (cpr - 1)) if sh else c % cpr) * 8
            slot = slot0 + (r >> 5)             # BKV = 32 rows per slot
            rr = r & (BKV - 1)
            pyptx.cp_async(buf, (slot, rr, col), src, (row0 + r, col), 16,
                           16 if row0 + r < seq else 0)


@pyptx.func
def _tc_step(buf: u16[:, :, :], kh: u16[:, :], vh: u16[:, :], t: i32, ntiles: i32, qf, st,
             q0: i32, row0: i32, sk: i32, shift: i32, c: f32, tid: i32, lane: i32,
             D: pyptx.constexpr, causal: pyptx.constexpr, bf: pyptx.constexpr,
             MASK: pyptx.constexpr, t_first: i32 = 0, WINDOW: pyptx.constexpr = 0,
             SOFTCAP: pyptx.constexpr = 0.0):
    """Key tile t: issue tile t+1's copies, S = Q Kᵀ, the softmax step (MASK: PLAIN/MASKED), O =
    O a + P V.  st = (o, m0, m1, l0, l1) in and out.  Two loops call it, so the tiles that need
    no mask run a body without the mask's test, selects and register copies.  WINDOW: the
    first tile is t_first (stage parity counted from it); WINDOW / SOFTCAP go to softmax_tile."""
    o, m0, m1, l0, l1 = st
    t2 = (lane & 3) * 2
    l16 = lane & 15
    l8 = lane & 7
    hi16 = (lane >> 4) * 8              # +8 for lanes 16..31
    hi8 = ((lane >> 3) & 1) * 8         # +8 for lanes 8..15 and 24..31
    if WINDOW:
        kb = ((t - t_first) & 1) * 2
    else:
        kb = (t & 1) * 2
    if t + 1 < ntiles:
        _load_rows(buf, 2 - kb, kh, (t + 1) * BKV, BKV, D, tid)
        _load_rows(buf, 3 - kb, vh, (t + 1) * BKV, BKV, D, tid)
    pyptx.cp_async_wait(1)
    pyptx.syncthreads()
    # ---- S = Q Kᵀ: 16 rows x 32 keys per warp, 4 n-tiles of 8 keys ----
    s = ((0.0, 0.0, 0.0, 0.0),) * (BKV // 8)
    for ks in pyptx.static_range(D // 16):
        ns = ()
        for jp in pyptx.static_range(BKV // 16):
            kf = pyptx.ldmatrix(buf, (kb, jp * 16 + hi16 + l8, ks * 16 + hi8), count=4)
            ns = ns + (pyptx.mma_sync(qf[ks], (kf[0], kf[1]), s[2 * jp],
                                      atype="bf16" if bf else "f16"),
                       pyptx.mma_sync(qf[ks], (kf[2], kf[3]), s[2 * jp + 1],
                                      atype="bf16" if bf else "f16"))
        s = ns
    # ---- mask, online softmax, P; O rescaled only when a row's bias moved ----
    pf, a0, a1, m0, m1, l0, l1, need = softmax_tile(s, t * BKV, q0, row0, t2, sk, shift, m0, m1,
                                                    l0, l1, c, BKV // 8, causal, bf, MASK,
                                                    WINDOW, SOFTCAP)
    if need:
        o = rescale(o, a0, a1, D // 8)
    # ---- O += P V (P's S-accumulator layout is the A-fragment layout) ----
    for kk in pyptx.static_range(BKV // 16):
        pa = (pf[2 * kk][0], pf[2 * kk][1], pf[2 * kk + 1][0], pf[2 * kk + 1][1])
        no = ()
        for jp in pyptx.static_range(D // 16):
            vf = pyptx.ldmatrix(buf, (kb + 1, kk * 16 + l16, jp * 16 + hi16), count=4,
                                trans=True)
            no = no + (pyptx.mma_sync(pa, (vf[0], vf[1]), o[2 * jp],
                                      atype="bf16" if bf else "f16"),
                       pyptx.mma_sync(pa, (vf[2], vf[3]), o[2 * jp + 1],
                                      atype="bf16" if bf else "f16"))
        o = no
    pyptx.syncthreads()                 # this stage is refilled two tiles later
    return o, m0, m1, l0, l1


def flash_attention_tc_kernel(out: u16[:, :, :], q: u16[:, :, :], k: u16[:, :, :],
                              v: u16[:, :, :], group: i32, scale_log2: f32, D: pyptx.constexpr,
                              causal: pyptx.constexpr, bf: pyptx.constexpr,
                              WINDOW: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """out[bh] = attention(q[bh], k[bh // group], v[bh // group]) for one 64-row query tile;
    the arrays hold f16 (bf False) or bf16 (bf True) bit patterns.  WINDOW (with causal): row
    r sees keys (r + shift - WINDOW, r + shift]; the tiles before the block's first row's window
    are never loaded, the ones crossing the window's edge for some row run masked.  SOFTCAP:
    the logit cap (softmax_tile).  `flash_attention_tc_kernel` is this with both off (0)."""
    # slots 0/1: K/V of stage 0, slots 2/3: K/V of stage 1 (first: the 64-row Q tile)
    buf = pyptx.shared.array((4, BKV, D + PAD), u16)
    sq = q.shape[1]
    sk = k.shape[1]
    tid = thread_idx.x
    lane = tid & 31             # shifts and masks: tid is never negative
    warp = tid >> 5
    bh = block_idx.y
    kvh = bh // group
    q0 = block_idx.x * BQ
    g = lane >> 2
    t2 = (lane & 3) * 2
    l16 = lane & 15
    hi16 = (lane >> 4) * 8              # +8 for lanes 16..31
    shift = sk - sq
    kv_end = sk
    if causal:
        kv_end = min(sk, q0 + BQ + shift)
    ntiles = (kv_end + BKV - 1) // BKV
    kh = k[kvh]
    vh = v[kvh]
    _load_rows(buf, 2, q[bh], q0, BQ, D, tid)
    if WINDOW:
        # the first tile holding a key of the block's first row's window; tiles before w_end
        # hold a key outside some row's window (masked)
        t_first = min(max(q0 + shift - WINDOW + 1, 0) // BKV, ntiles)
        w_end = max(q0 + BQ - 1 + shift - WINDOW + BKV, 0) // BKV
        if t_first < ntiles:
            _load_rows(buf, 0, kh, t_first * BKV, BKV, D, tid)
            _load_rows(buf, 1, vh, t_first * BKV, BKV, D, tid)
    elif ntiles > 0:
        _load_rows(buf, 0, kh, 0, BKV, D, tid)
        _load_rows(buf, 1, vh, 0, BKV, D, tid)
    pyptx.cp_async_wait(0)
    pyptx.syncthreads()
    qr = warp * 16 + l16
    qf = ()
    for ks in pyptx.static_range(D // 16):
        qf = qf + (pyptx.ldmatrix(buf, (2 + (qr >> 5), qr & 31, ks * 16 + hi16), count=4),)
    pyptx.syncthreads()                     # the Q slots are refilled by tile 1
    o = ((0.0, 0.0, 0.0, 0.0),) * (D // 8)
    m0 = NEG_INF
    m1 = NEG_INF
    l0 = 0.0
    l1 = 0.0
    row0 = q0 + warp * 16 + g
    # tiles [0, n_plain) need no mask (inside the keys, on or below every row's diagonal)
    n_plain = sk // BKV
    if causal:
        n_plain = min(n_plain, max((q0 + shift + 1) // BKV, 0))
    n_plain = min(n_plain, ntiles)
    st = (o, m0, m1, l0, l1)
    if WINDOW:
        for t in range(t_first, min(w_end, ntiles)):
            st = _tc_step(buf, kh, vh, t, ntiles, qf, st, q0, row0, sk, shift, scale_log2, tid,
                          lane, D, causal, bf, MASKED, t_first, WINDOW, SOFTCAP)
        for t in range(max(w_end, t_first), n_plain):
            st = _tc_step(buf, kh, vh, t, ntiles, qf, st, q0, row0, sk, shift, scale_log2, tid,
                          lane, D, causal, bf, PLAIN, t_first, WINDOW, SOFTCAP)
        for t in range(max(max(n_plain, w_end), t_first), ntiles):
            st = _tc_step(buf, kh, vh, t, ntiles, qf, st, q0, row0, sk, shift, scale_log2, tid,
                          lane, D, causal, bf, MASKED, t_first, WINDOW, SOFTCAP)
    else:
        for t in range(n_plain):
            st = _tc_step(buf, kh, vh, t, ntiles, qf, st, q0, row0, sk, shift, scale_log2, tid,
                          lane, D, causal, bf, PLAIN, 0, 0, SOFTCAP)
        for t in range(n_plain, ntiles):
            st = _tc_step(buf, kh, vh, t, ntiles, qf, st, q0, row0, sk, shift, scale_log2, tid,
                          lane, D, causal, bf, MASKED, 0, 0, SOFTCAP)
    o, m0, m1, l0, l1 = st
    finish(out, o, l0, l1, bh, row0, t2, D // 8, bf)


#: both options off: the kernel's launch signature and code before they existed
flash_attention_tc_kernel = pyptx.kernel(flash_attention_tc_kernel).specialize(WINDOW=0,
                                                                               SOFTCAP=0.0)


# ---- float32 SIMT kernel ----------------------------------------------------------------------

SIMT_WARPS = 8
SIMT_KT = 32


def flash_attention_f32_kernel(out: f32[:, :, :], q: f32[:, :, :], k: f32[:, :, :],
                               v: f32[:, :, :], group: i32, scale_log2: f32,
                               DPL: pyptx.constexpr, KT: pyptx.constexpr,
                               causal: pyptx.constexpr, VEC: pyptx.constexpr,
                               WINDOW: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """One warp per query row (8 rows per block), K/V tiles of KT keys shared in shared memory,
    loaded with 128-bit vloads when VEC (head_dim % 4 == 0).  WINDOW (with causal): row r sees
    keys (r + shift - WINDOW, r + shift], the tiles before the block's first row's window are
    skipped; SOFTCAP: scores s (base 2) -> C·tanh(s / C), C = SOFTCAP·log2 e.
    `flash_attention_f32_kernel` is this with both off (0)."""
    ks = pyptx.shared.array((KT, DPL * 32), f32)
    vs = pyptx.shared.array((KT, DPL * 32), f32)
    sq = q.shape[1]
    sk = k.shape[1]
    d = q.shape[2]
    tid = thread_idx.x
    lane = tid % 32
    bh = block_idx.y
    kvh = bh // group
    q0 = block_idx.x * SIMT_WARPS
    row = q0 + tid // 32
    live = row < sq
    qv = ()
    acc = ()
    for i in pyptx.static_range(DPL):
        dd = lane + 32 * i
        qv = qv + ((q[bh, row, dd] * scale_log2 if (live and dd < d) else 0.0),)
        acc = acc + (0.0,)
    m = NEG_BIG
    l = 0.0
    kv_end = sk
    if causal:
        kv_end = min(sk, q0 + SIMT_WARPS + sk - sq)
    last = row + sk - sq if causal else sk - 1
    width = DPL * 32
    nthreads = SIMT_WARPS * 32
    if VEC:                     # columns d..width-1 are never loaded: zero them once
        for e in range(tid, KT * width, nthreads):
            ks[e // width, e % width] = 0.0
            vs[e // width, e % width] = 0.0
    kv_start = 0
    if WINDOW:
        kv_start = max(q0 + sk - sq - WINDOW + 1, 0) // KT * KT
    for t0 in range(kv_start, kv_end, KT):
        pyptx.syncthreads()
        if VEC:
            q4 = d >> 2
            for e in range(tid, KT * q4, nthreads):
                r = e // q4
                c = (e - r * q4) * 4
                if t0 + r < sk:
                    kx = pyptx.vload(k, (kvh, t0 + r, c), 4)
                    vx = pyptx.vload(v, (kvh, t0 + r, c), 4)
                else:
                    kx = (0.0, 0.0, 0.0, 0.0)
                    vx = (0.0, 0.0, 0.0, 0.0)
                for x in pyptx.static_range(4):
                    ks[r, c + x] = kx[x]
                    vs[r, c + x] = vx[x]
        else:
            for e in range(tid, KT * width, nthreads):
                r = e // width
                c = e % width
                ok = t0 + r < sk and c < d
                ks[r, c] = k[kvh, t0 + r, c] if ok else 0.0
                vs[r, c] = v[kvh, t0 + r, c] if ok else 0.0
        pyptx.syncthreads()
        for j in range(min(KT, kv_end - t0)):
            ok = t0 + j <= last                      # warp-uniform: one row per warp
            if WINDOW:
                ok = ok and t0 + j > last - WINDOW
            if ok:
                s = 0.0
                for i in pyptx.static_range(DPL):
                    s += qv[i] * ks[j, lane + 32 * i]
                s = warp_sum(s)
                if SOFTCAP:
                    s = (SOFTCAP * LOG2E) * pyptx.math.tanh(s * (1.0 / (SOFTCAP * LOG2E)))
                m_new = max(m, s)
                corr = pyptx.math.fast_exp2(m - m_new)
                p = pyptx.math.fast_exp2(s - m_new)
                l = l * corr + p
                na = ()
                for i in pyptx.static_range(DPL):
                    na = na + (acc[i] * corr + p * vs[j, lane + 32 * i],)
                acc = na
                m = m_new
    inv = 1.0 / l if l > 0.0 else 0.0
    if live:
        for i in pyptx.static_range(DPL):
            dd = lane + 32 * i
            if dd < d:
                out[bh, row, dd] = acc[i] * inv


#: both options off: the kernel's launch signature and code before they existed
flash_attention_f32_kernel = pyptx.kernel(flash_attention_f32_kernel).specialize(WINDOW=0,
                                                                                 SOFTCAP=0.0)


# ---- negative scales on the device --------------------------------------------------------------

@pyptx.kernel
def flip_sign_kernel(out: u16[:], x: u16[:]):
    """out = -x for f16 / bf16 bit patterns (the sign bit flipped: exact, NaN stays NaN)."""
    i = pyptx.grid(1)
    if i < len(out):
        out[i] = x[i] ^ 0x8000


FLIP_THREADS = 256


# ---- host side ---------------------------------------------------------------------------------

def _arrays(q, k, v):
    """Validate q, k, v -> (kind, q3, k3, v3, out_shape, group); kind is 'f32', 'f16' or
    'bf16' and the 3-d arrays are [batch * heads, seq, d] (uint16 bits for the half types):
    numpy arrays, or DeviceArray views for DeviceArray inputs (all three must live in one
    place)."""
    fn = "flash_attention"
    arrs = {}
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not (isinstance(x, np.ndarray) or V.is_device(x)):
            raise TypeError(f"{fn}: {name} must be an array ({V.ARRAY_KINDS}), got "
                            f"{type(x).__name__}")
        if x.ndim not in (3, 4):
            raise ValueError(f"{fn}: {name} must be [heads, seq, head_dim] or [batch, heads, "
                             f"seq, head_dim], got shape {tuple(x.shape)}")
        arrs[name] = x
    kinds = {n: {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}.get(x.dtype.name)
             for n, x in arrs.items()}
    for n, kd in kinds.items():
        if kd is None:
            hint = _FROM_BITS if arrs[n].dtype == np.uint16 else ""
            raise TypeError(f"{fn}: {n} must be float32, float16 or bfloat16, got "
                            f"{arrs[n].dtype}{hint}")
    if len(set(kinds.values())) != 1:
        raise TypeError(f"{fn}: q, k and v must have one dtype, got {q.dtype}, {k.dtype}, "
                        f"{v.dtype}")
    same_place(fn, "k", k, q, "q")
    same_place(fn, "v", v, q, "q")
    if not q.ndim == k.ndim == v.ndim:
        raise ValueError(f"{fn}: q, k and v must have the same number of dimensions")
    V.same_shape(fn, "v", v, k.shape, "k")
    q4 = tuple(q.shape) if q.ndim == 4 else (1,) + tuple(q.shape)
    k4 = tuple(k.shape) if k.ndim == 4 else (1,) + tuple(k.shape)
    b, h, sq, d = q4
    bk, hk, sk, dk = k4
    if bk != b:
        raise ValueError(f"{fn}: k must have batch {b} (from q), got {bk}")
    if dk != d:
        raise ValueError(f"{fn}: k must have head_dim {d} (from q), got {dk}")
    if hk == 0 or h % hk:
        raise ValueError(f"{fn}: q's {h} heads must be a multiple of k's {hk} heads")
    for name, x in arrs.items():
        if any(s > 2**31 - 1 for s in x.shape):
            raise ValueError(f"{fn}: {name} has a dimension over 2**31-1 ({tuple(x.shape)})")
    kind = kinds["q"]

    def flat(x, heads, rows):
        x = (x if V.is_device(x) else np.ascontiguousarray(x)).reshape(b * heads, rows, d)
        return x.view(np.uint16) if kind != "f32" else x
    return kind, flat(q, h, sq), flat(k, hk, sk), flat(v, hk, sk), tuple(q.shape), h // hk


def _half_head_dim(d: int) -> None:
    if d % 16 or d > WIDE_MAX_D:
        raise ValueError(f"flash_attention: float16/bfloat16 head_dim must be a multiple of 16 "
                         f"up to {WIDE_MAX_D}, got {d} (float32 takes any head_dim up to 256)")


def _positive_scale(q3, scale_log2: np.float32):
    """The tensor-core kernels take the row maximum of raw scores, so they need a scale > 0:
    a negative scale is the same softmax with -q (exact: a sign-bit flip of the f16/bf16
    bits: on the host for numpy q, by `flip_sign_kernel` into a scratch array for a
    DeviceArray q), a zero scale a tiny positive one (2^(s * 1e-30) rounds to 1 for every
    score)."""
    if scale_log2 < 0:
        if V.is_device(q3):
            neg = V.empty(q3.shape, np.uint16, q3)
            n = q3.size
            if n:
                flip_sign_kernel[V.ceil_div(n, FLIP_THREADS), FLIP_THREADS](
                    neg.reshape(-1), q3.reshape(-1))
            return neg, np.float32(-scale_log2)
        return q3 ^ np.uint16(0x8000), np.float32(-scale_log2)
    return q3, max(scale_log2, np.float32(1e-30))


def _variant(kernel, window: int, softcap: float):
    """`kernel` (a default instance, both options off) with window / softcap on: one cached
    Kernel object per value pair (attention.kv_kernel)."""
    if not (window or softcap):
        return kernel
    return kv_kernel(kernel, WINDOW=window, SOFTCAP=softcap)


def flash_attention_arrays(kind: str, q3, k3, v3, group: int, causal: bool, scale: float,
                           out=None, window: int = 0, softcap: float = 0.0,
                           variant: str = "tensor_core"):
    """The kernel launch on validated [b*h, seq, d] arrays (uint16 bits for 'f16'/'bf16'; numpy
    or DeviceArrays).  `out`: the [b*h, seq_q, d] result to write (float32, or uint16 bits for
    the half kinds; it may be a view of the caller's float16/bfloat16 array); default a new
    array where q3 lives.  window (> 0, causal only) / softcap (> 0): 0 is off.  variant:
    'tensor_core' (the Hopper kernel when the launch runs on an sm_90 GPU, else mma.sync) or
    'wgmma' (the Hopper kernel, also on the CPU executor); either way head_dims other than 64 /
    128 and arrays a tensor map cannot describe take the mma.sync kernels."""
    bh, sq, d = q3.shape
    sk = k3.shape[1]
    # past f32's range: the largest f32 (inf would make 0 * inf = NaN scores; with it every
    # scaled score past the range is clamped, see _flash_tile)
    scale_log2 = np.float32(np.clip(scale * LOG2E, -F32_MAX, F32_MAX))
    if kind == "f32":
        if out is None:
            out = V.empty((bh, sq, d), np.float32, q3)
        if bh and sq and d:
            dpl = V.ceil_div(d, 32)
            kt = SIMT_KT if dpl <= 4 else SIMT_KT // 2
            _variant(flash_attention_f32_kernel, window, softcap)[
                (V.ceil_div(sq, SIMT_WARPS), bh), SIMT_WARPS * 32](
                out, q3, k3, v3, group, scale_log2, dpl, kt, bool(causal), d % 4 == 0)
        return out
    _half_head_dim(d)
    if out is None:
        out = V.empty((bh, sq, d), np.uint16, q3)
    if bh and sq:
        q3, scale_log2 = _positive_scale(q3, scale_log2)
        if _wgmma_chosen(variant, q3, k3, v3):
            flash_attention_wgmma_arrays(kind, q3, k3, v3, group, bool(causal), scale_log2,
                                         out, window, softcap)
        elif d <= TC_MAX_D:
            _variant(flash_attention_tc_kernel, window, softcap)[
                (V.ceil_div(sq, BQ), bh), TC_THREADS](
                out, q3, k3, v3, group, scale_log2, d, bool(causal), kind == "bf16")
        else:
            for c0, dv in wide_passes(d):
                _variant(flash_attention_tc_wide_kernel, window, softcap)[
                    (V.ceil_div(sq, WQ), bh), WIDE_THREADS](
                    out, q3, k3, v3, group, scale_log2, d, c0, dv, bool(causal),
                    kind == "bf16")
    return out


VARIANTS = ("tensor_core", "wgmma")


def _wgmma_runs_here(kind: str) -> None:
    """variant='wgmma' needs float16/bfloat16 inputs and a launch on an sm_90 GPU or the CPU
    executor."""
    from .gemm_wgmma import hopper_launch, launch_arch
    if kind == "f32":
        raise TypeError("flash_attention: variant='wgmma' needs float16 or bfloat16 q, k, v "
                        "(float32 runs on the SIMT kernel: use variant='tensor_core')")
    arch = launch_arch()
    if arch is not None and not hopper_launch():
        raise ValueError(f"flash_attention: variant='wgmma' runs on compute capability 9.0 "
                         f"GPUs (sm_90a) and on the CPU executor, not on this GPU ({arch}); "
                         f"use variant='tensor_core'")


def _wgmma_chosen(variant: str, q3, k3, v3) -> bool:
    """The Hopper kernel for these half arrays?  'tensor_core' picks it where gemm picks its
    Hopper kernel (`gemm_wgmma.hopper_launch`: a launch on an sm_90 GPU); 'wgmma' asks for it
    (the CPU executor included).  head_dims other than 64 / 128 and arrays a tensor map cannot
    describe stay on mma.sync."""
    from .gemm_wgmma import hopper_launch
    from .flash_attention_wgmma import usable
    if variant == "tensor_core" and not hopper_launch():
        return False
    return usable(q3, k3, v3)


@stdlib_function
def flash_attention(q, k, v, causal: bool = False, scale: float | None = None,
                    window: int | None = None, softcap: float | None = None,
                    variant: str = "tensor_core", *, out=None):
    """softmax(q kᵀ · scale [+ causal mask]) v per head, in q's dtype.

    q: `[heads, seq_q, d]` or `[batch, heads, seq_q, d]`, float32, float16 or bfloat16 (an
    ml_dtypes array); k, v: the same layout with `heads / group` heads and seq_k rows.  `scale`
    defaults to 1/sqrt(d).  causal: query i sees keys j <= i + seq_k - seq_q.  float16/bfloat16
    run on tensor cores (f32 accumulation and softmax; head_dim a multiple of 16 up to 256).
    `window` (sliding window, Mistral; needs causal=True): query i, at position p = i + seq_k -
    seq_q, sees the keys j in (p - window, p]; key tiles wholly before a block's window are
    skipped, not loaded.  `softcap` (Gemma 2): each logit x = q·k·scale becomes
    softcap·tanh(x / softcap) before the softmax.  Each distinct window / softcap value
    compiles its own kernel instance (compile-time constants, as a model's are).
    The result has q's shape and dtype and lives where q does (or is `out`).

    `variant` (float16/bfloat16): `"tensor_core"` runs the Hopper kernel (TMA + wgmma,
    flash_attention_wgmma.py) when the launch runs on an sm_90 GPU and the mma.sync kernel
    elsewhere (older GPUs, the CPU executor); `"wgmma"` asks for the Hopper kernel wherever it
    runs (an sm_90 GPU or the CPU executor).  Both keep head_dims other than 64 and 128 on
    mma.sync.
    """
    kind, q3, k3, v3, shape, group = _arrays(q, k, v)
    variant = V.choice("flash_attention", "variant", variant, VARIANTS)
    if variant == "wgmma":
        _wgmma_runs_here(kind)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"flash_attention: causal must be a bool, got {type(causal).__name__}")
    d = shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d) if d else 1.0
    scale = V.float_scalar("flash_attention", "scale", scale)
    window, softcap = window_softcap("flash_attention", window, softcap)
    if window and not causal:
        raise ValueError("flash_attention: window needs causal=True (a sliding window bounds "
                         "the causal mask from below)")
    if d > 256:
        raise ValueError(f"flash_attention: head_dim must be at most 256, got {d}")
    if kind != "f32":
        _half_head_dim(d)      # before the result is allocated
    res = result("flash_attention", out, shape, q.dtype, q)
    dst = res.reshape(q3.shape)
    flash_attention_arrays(kind, q3, k3, v3, group, bool(causal), scale,
                           dst if kind == "f32" else dst.view(np.uint16), window, softcap,
                           variant)
    return res
