"""Decode-time attention over a head-first KV cache `[n_kv_heads, max_seq, head_dim]`.

Flash-decoding: the cached tokens are split across blocks, block (g, s) taking the query heads
of KV head g (grouped-query attention: head h reads KV head h // (n_heads / n_kv_heads)) over
tokens [s·chunk, (s+1)·chunk).  It walks its range in shared-memory tiles of 32 tokens, each K/V
row read once with 128-bit `vload`s (an unrolled staging loop with no branches) and shared by
all the group's heads (one warp per head).  In `attend_tile` 8 lanes share a q·k (4 tokens per
warp pass, 128-bit shared loads, 3 shuffle steps), one exp2 per token updates the online softmax
(running max m, denominator l, accumulator rescaled by 2^(m_old - m_new); q pre-scaled by
scale·log2 e), and each lane adds p·V to 4 contiguous output dimensions per 128-bit V read.
About 21 warp instructions per KV position and query head at head_dim 128 on sm_90
(benchmarks/bench_attention_sass.py).  The splits' unnormalised
partials (m_s, l_s, acc_s) are combined by `decode_merge_kernel`:
out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s, M = max_s m_s.  The split count is chosen so
that there are at least 264 blocks (2 x 132 SMs) once the cache has a tile per split.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, i32, thread_idx

from . import _validate as V
from ._args import result, stdlib_function
from ._warp import NEG_BIG, warp_max, warp_sum

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
#: flash-decoding: at least this many blocks (2 x the 132 SMs of an H100) when the cache is long
#: enough for every split to get a tile of tokens
TARGET_BLOCKS = 264
SMEM_LIMIT = 48 * 1024


#: lanes that share one q·k dot product (each holds 4·DPL of its dimensions): a warp scores 32/8
#: = 4 tokens per pass with 3 shuffle steps per pass instead of one token with 5
KQ_LANES = 8


@pyptx.func
def attend_tile(qs, ks, vs, ps, n, m, l, acc, DPL, TILE, n0=0, WINDOW=0, SOFTCAP=0.0):
    """One flash-decoding step of warp w (query head w of the block's group) over a tile of
    TILE token rows staged in shared memory (ks/vs rows 0..TILE-1, of which the first n are
    tokens, the rest any finite values, as are the columns past head_dim; qs[w] pre-scaled by
    scale·log2 e, zero past head_dim).  Returns the new (m, l, acc).

    Scores: lane (g, i) = (lane // 8, lane % 8) holds q dimensions 4(i + 8k) .. +3 (k < DPL)
    and in pass p dots them with token 4p + g's K row (128-bit shared loads that 8 lanes read
    as one contiguous 128-byte line), then the 8 lanes add their parts in 3 shuffle steps.
    Softmax (base 2): the running max m is the warp's; l is this lane group's sum (all 8 lanes
    of a group hold it; `tile_sum` adds the 4 groups once at the end); one exp2 per token.
    Values: the probabilities go through the warp's row ps[w] and every lane adds p_t·V[t] to its
    DPL output dimensions (`value_column`).

    Compile-time options (0: off, and then no code): WINDOW, rows below n0 are masked too (the
    tokens before a sliding window); SOFTCAP, scores s (base-2 units) -> C·tanh(s / C) with
    C = SOFTCAP·log2 e, i.e. Gemma 2's cap·tanh(x / cap) on the natural-log logits x."""
    lane = thread_idx.x & 31
    w = thread_idx.x >> 5
    g = lane >> 3
    i = lane & (KQ_LANES - 1)
    q = ()
    for k in pyptx.static_range(DPL):
        q = q + (pyptx.vload(qs, (w, 4 * (i + 8 * k)), 4),)
    scores = ()
    mt = NEG_BIG
    for p in pyptx.static_range(TILE // 4):
        s = 0.0
        for k in pyptx.static_range(DPL):
            kv = pyptx.vload(ks, (4 * p + g, 4 * (i + 8 * k)), 4)
            for x in pyptx.static_range(4):
                s += q[k][x] * kv[x]
        for b in pyptx.static_range(3):
            s += pyptx.shfl_xor(s, 4 >> b)
        if SOFTCAP:
            s = (SOFTCAP * LOG2E) * pyptx.math.tanh(s * (1.0 / (SOFTCAP * LOG2E)))
        if WINDOW:
            s = s if (4 * p + g < n) & (4 * p + g >= n0) else NEG_BIG
        else:
            s = s if 4 * p + g < n else NEG_BIG
        mt = max(mt, s)
        scores = scores + (s,)
    mt = max(mt, pyptx.shfl_xor(mt, 8))
    m_new = max(m, max(mt, pyptx.shfl_xor(mt, 16)))
    corr = pyptx.math.fast_exp2(m - m_new)
    l = l * corr
    for p in pyptx.static_range(TILE // 4):
        e = pyptx.math.fast_exp2(scores[p] - m_new)
        l += e
        if i == 0:
            ps[w, 4 * p + g] = e
    pyptx.syncwarp()
    VW = 4 if DPL % 4 == 0 else (2 if DPL % 2 == 0 else 1)      # as value_column
    na = ()
    for c in pyptx.static_range(DPL):
        na = na + (acc[c] * corr,)
    for j4 in pyptx.static_range(TILE // 4):
        pv = pyptx.vload(ps, (w, 4 * j4), 4)
        for jj in pyptx.static_range(4):
            acc2 = ()
            for c in pyptx.static_range(DPL // VW):
                v = pyptx.vload(vs, (4 * j4 + jj, VW * (lane + 32 * c)), VW)
                for x in pyptx.static_range(VW):
                    acc2 = acc2 + (na[c * VW + x] + pv[jj] * v[x],)
            na = acc2
    pyptx.syncwarp()                        # ps[w] is rewritten by the next tile
    return m_new, l, na


@pyptx.func
def stage_vectors(ks, vs, kc, vc, a, row, src, r, dst, VW=4):
    """ks[r, dst:dst+VW] = kc[a, row, src:src+VW] and likewise V: one 128-bit load each (VW = 4
    floats, or 8 halves of a float16 cache, converted to f32) and VW / 4 128-bit shared stores.
    The staging loops clamp row to the last token of the range and src to the last vector of
    head_dim instead of branching: every load stays in bounds and the copies are harmless, as
    attend_tile masks the scores of rows past n (so their p is 0 against finite V values) and
    multiplies K columns past head_dim by q's zeros."""
    kx = pyptx.vload(kc, (a, row, src), VW)
    for h in pyptx.static_range(VW // 4):
        pyptx.vstore(ks, (r, dst + 4 * h), (kx[4 * h], kx[4 * h + 1], kx[4 * h + 2],
                                            kx[4 * h + 3]))
    vx = pyptx.vload(vc, (a, row, src), VW)
    for h in pyptx.static_range(VW // 4):
        pyptx.vstore(vs, (r, dst + 4 * h), (vx[4 * h], vx[4 * h + 1], vx[4 * h + 2],
                                            vx[4 * h + 3]))


@pyptx.func
def tile_sum(l):
    """The softmax denominator of the warp from attend_tile's per-group partial sums."""
    l = l + pyptx.shfl_xor(l, 8)
    return l + pyptx.shfl_xor(l, 16)


@pyptx.func
def value_column(lane, c, DPL):
    """The output dimension of element c of a lane's accumulator tuple in attend_tile: V rows
    are read VW floats at a time (VW = 4, 2 or 1, the widest dividing DPL), lane l owning
    dimensions VW·(l + 32j) + x for x < VW, j < DPL / VW."""
    VW = 4 if DPL % 4 == 0 else (2 if DPL % 2 == 0 else 1)
    return VW * (lane + 32 * (c // VW)) + c % VW


@pyptx.func
def store_partials(part_ml, part_acc, row, split, m, l, acc, hd, DPL):
    """A split's unnormalised result for decode_merge_kernel: part_ml[row, split] = (m in
    natural-log units, l), part_acc[row, split, :] = acc (laid out as value_column says)."""
    lane = thread_idx.x & 31
    if lane == 0:
        part_ml[row, split, 0] = m * LN2
        part_ml[row, split, 1] = l
    for c in pyptx.static_range(DPL):
        d = value_column(lane, c, DPL)
        if d < hd:
            part_acc[row, split, d] = acc[c]


@pyptx.func
def merged_value(part_ml, part_acc, row, d):
    """Element d of row `row` combined over the splits: Σ e^(m_s-M) acc_s / Σ e^(m_s-M) l_s
    (0 when every split was empty)."""
    n_splits = part_ml.shape[1]
    mx = NEG_BIG
    for s in range(n_splits):
        mx = max(mx, part_ml[row, s, 0])
    den = 0.0
    num = 0.0
    for s in range(n_splits):
        w = pyptx.math.exp(part_ml[row, s, 0] - mx)
        den += part_ml[row, s, 1] * w
        num += part_acc[row, s, d] * w
    return num / den if den > 0.0 else 0.0


@pyptx.kernel
def kv_scatter_kernel(cache: f32[:, :, :], src: f32[:], pos: i32):
    """cache[h, pos, d] = src[h * head_dim + d]; one thread per element of src."""
    i = pyptx.grid(1)
    hd = cache.shape[2]
    if i < len(src):
        cache[i // hd, pos, i % hd] = src[i]


def decode_attention_kernel(out: f32[:, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :],
                            q: f32[:, :], k_cache: f32[:, :, :], v_cache: f32[:, :, :],
                            seq_len: i32, chunk: i32, scale_log2: f32,
                            DPL: pyptx.constexpr, TILE: pyptx.constexpr,
                            GROUP: pyptx.constexpr, VEC: pyptx.constexpr,
                            SPLIT: pyptx.constexpr, KV16: pyptx.constexpr,
                            WINDOW: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """Block (g, s): the GROUP query heads of KV head g (one warp each) over tokens
    [s·chunk, (s+1)·chunk) ∩ [0, seq_len), in shared-memory tiles of TILE tokens that all the
    group's warps read (each K/V row loaded once per block, 128-bit when VEC).  Each warp runs
    attend_tile on every tile (base 2: q is pre-scaled by scale·log2 e).

    SPLIT=False: out[head] = the normalised result.  SPLIT=True: part_ml[head, s] = (m, l) with m
    in natural-log units, part_acc[head, s] = the unnormalised accumulator (decode_merge_kernel).

    KV16: the caches are float16 (`kv_kernel` retypes them), read 8 halves per 128-bit load
    and converted to f32 in shared memory.  WINDOW > 0: only the last WINDOW tokens, [lo,
    seq_len) with lo = max(seq_len - WINDOW, 0); the splits cover [lo rounded down to a tile,
    seq_len) and attend_tile masks the rows before lo.  SOFTCAP > 0: attend_tile's logit cap.
    `decode_attention_kernel` is this kernel with KV16, WINDOW, SOFTCAP off (0).
    """
    width = DPL * 32
    ks = pyptx.shared.array((TILE, width), f32)
    vs = pyptx.shared.array((TILE, width), f32)
    qs = pyptx.shared.array((GROUP, width), f32)
    ps = pyptx.shared.array((GROUP, TILE), f32)
    hd = q.shape[1]
    kvh = block_idx.x
    split = block_idx.y
    tid = thread_idx.x
    lane = tid & 31
    nthreads = GROUP * 32
    head = kvh * GROUP + (tid >> 5)
    if WINDOW:
        lo = max(seq_len - WINDOW, 0)
        t0 = (lo & -TILE) + split * chunk
    else:
        lo = 0
        t0 = split * chunk
    t1 = min(seq_len, t0 + chunk)
    for e in range(tid, GROUP * width, nthreads):      # zero past head_dim
        h = e // width
        d = e - h * width
        qs[h, d] = q[kvh * GROUP + h, d] * scale_log2 if d < hd else 0.0
    VW = 4 + 4 * KV16                       # cache elements per 128-bit load (f32: 4, f16: 8)
    NV = DPL * 32 // VW                     # vectors per shared row
    RS = nthreads // NV                     # rows staged per step when NV divides the block
    vr = tid // NV
    vdst = (tid - vr * NV) * VW
    vsrc = min(vdst, hd - VW)               # see stage_vectors
    acc = (0.0,) * DPL
    m = NEG_BIG
    l = 0.0
    for tt in range(t0, t1, TILE):
        pyptx.syncthreads()                 # the previous tile is consumed (and q is stored)
        if VEC:                             # 128-bit loads and stores: hd % 4 == 0
            if nthreads % NV == 0:          # rows vr, vr + RS, ...: one column per thread
                for it in pyptx.static_range((TILE + RS - 1) // RS):
                    r = vr + it * RS
                    if TILE % RS == 0:
                        stage_vectors(ks, vs, k_cache, v_cache, kvh, min(tt + r, t1 - 1), vsrc,
                                      r, vdst, VW)
                    elif r < TILE:
                        stage_vectors(ks, vs, k_cache, v_cache, kvh, min(tt + r, t1 - 1), vsrc,
                                      r, vdst, VW)
            else:
                for it in pyptx.static_range((TILE * NV + nthreads - 1) // nthreads):
                    e = tid + it * nthreads
                    r = e // NV
                    c = (e - r * NV) * VW
                    if e < TILE * NV:
                        stage_vectors(ks, vs, k_cache, v_cache, kvh, min(tt + r, t1 - 1),
                                      min(c, hd - VW), r, c, VW)
        else:
            for e in range(tid, TILE * width, nthreads):
                r = e // width
                c = e - r * width
                kx = 0.0
                vx = 0.0
                if tt + r < t1:
                    if c < hd:
                        kx = f32(k_cache[kvh, tt + r, c])
                        vx = f32(v_cache[kvh, tt + r, c])
                ks[r, c] = kx
                vs[r, c] = vx
        pyptx.syncthreads()
        m, l, acc = attend_tile(qs, ks, vs, ps, min(TILE, t1 - tt), m, l, acc, DPL, TILE,
                                lo - tt, WINDOW, SOFTCAP)     # lo - tt: used with WINDOW only
    l = tile_sum(l)
    if SPLIT:
        store_partials(part_ml, part_acc, head, split, m, l, acc, hd, DPL)
    else:
        inv = 1.0 / l if l > 0.0 else 0.0
        for c in pyptx.static_range(DPL):
            d = value_column(lane, c, DPL)
            if d < hd:
                out[head, d] = acc[c] * inv


#: the kernel with every option off: float32 caches, no window, no softcap (its launch signature
#: and SASS are those of the kernel before the options existed)
decode_attention_kernel = pyptx.kernel(decode_attention_kernel).specialize(
    KV16=False, WINDOW=0, SOFTCAP=0.0)


@pyptx.kernel
def decode_merge_kernel(out: f32[:, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :]):
    """Log-sum-exp merge of the split partials; one thread per output element (head, d)."""
    i = pyptx.grid(1)
    hd = out.shape[1]
    if i < out.shape[0] * hd:
        out[i // hd, i % hd] = merged_value(part_ml, part_acc, i // hd, i % hd)


@pyptx.kernel
def zero_kernel(out: f32[:]):
    """out[:] = 0 (decode_attention's result for seq_len = 0 on the device)."""
    i = pyptx.grid(1)
    if i < len(out):
        out[i] = 0.0


def kv_array(fn: str, name: str, cache, ndims: tuple[int, ...], *, in_place: bool = False):
    """A KV cache (or page pool) argument: float32 or float16 (C-contiguous if written in place;
    a float16 device array 16-byte aligned, as V.float32_array makes a float32 one)."""
    if in_place and isinstance(cache, np.ndarray) and not cache.flags.c_contiguous:
        raise ValueError(f"{fn}: {name} must be C-contiguous (it is updated in place)")
    if in_place and isinstance(cache, np.ndarray) and not cache.flags.writeable:
        raise ValueError(f"{fn}: {name} must be writeable (it is updated in place)")
    if getattr(cache, "dtype", None) != np.float16:
        try:
            return V.float32_array(fn, name, cache, ndims)
        except TypeError as e:
            raise TypeError(str(e).replace("must be float32", "must be float32 or float16")
                            .replace("float32 array", "float32 or float16 array")) from None
    if cache.ndim not in ndims:
        want = " or ".join(f"{d}-d" for d in ndims)
        raise ValueError(f"{fn}: {name} must be {want}, got shape {tuple(cache.shape)}")
    if any(d > 2**31 - 1 for d in cache.shape):
        raise ValueError(f"{fn}: {name} has a dimension over 2**31-1 ({tuple(cache.shape)})")
    if V.is_device(cache):
        return V.aligned(cache)
    return cache if cache.flags.c_contiguous else np.ascontiguousarray(cache)


def same_kv_dtype(fn: str, k, v, kname: str, vname: str) -> bool:
    """True for float16 K/V; K and V must share their dtype."""
    if k.dtype != v.dtype:
        raise TypeError(f"{fn}: {vname} must have {kname}'s dtype {k.dtype}, got {v.dtype}")
    return k.dtype == np.float16


@functools.lru_cache(maxsize=None)
def kv_kernel(kernel, f16_params: tuple = (), **constexprs):
    """`kernel`'s body with the parameters named in `f16_params` retyped float16 `[:, :, :]`
    (the float16-cache instances: a signature= instead of the annotations, not a copy of the
    body) and `constexprs` fixed.  Cached: one Kernel object, so one compile, per combination."""
    k = kernel
    if f16_params:
        from pyptx.compiler import resolve_param_types
        types = resolve_param_types(kernel.py_func)
        for n in f16_params:
            types[n] = pyptx.f16[:, :, :]
        k = pyptx.Kernel(kernel.py_func, fma=kernel.fma, opt_level=kernel.opt_level,
                         constexprs=kernel.constexprs, signature=tuple(types.values()),
                         name=kernel.name + "_kv16")
    return k.specialize(**constexprs) if constexprs else k


def window_softcap(fn: str, window, softcap) -> tuple[int, float]:
    """window=None/int >= 1 and softcap=None/float > 0 -> the kernels' constexprs (0: off)."""
    window = 0 if window is None else V.int_scalar(fn, "window", window, 1, 2**31 - 1)
    softcap = 0.0 if softcap is None else V.float_scalar(fn, "softcap", softcap, positive=True)
    return window, softcap


@stdlib_function
def kv_scatter(src, cache, pos: int):
    """cache[h, pos, :] = src[h·head_dim : (h+1)·head_dim] for every KV head, in place.

    `cache` is `[n_kv_heads, max_seq, head_dim]` float32 or float16 (C-contiguous, updated in
    place and returned: the caller's own object, a torch tensor stays that tensor; a float16
    cache gets src rounded to nearest); `src` is float32 `[n_kv_heads * head_dim]` (or
    `[n_kv_heads, head_dim]`); 0 ≤ pos < max_seq.  No `out=`: the result is `cache` itself, so
    there is no separate result array to provide.
    """
    cache = kv_array("kv_scatter", "cache", cache, (3,), in_place=True)
    n_kv, max_seq, hd = cache.shape
    src = V.float32_array("kv_scatter", "src", src, (1, 2))
    if src.size != n_kv * hd or (src.ndim == 2 and src.shape != (n_kv, hd)):
        raise ValueError(f"kv_scatter: src must have {n_kv * hd} elements ([{n_kv}, {hd}] or "
                         f"flat, from cache), got shape {src.shape}")
    pos = V.int_scalar("kv_scatter", "pos", pos, 0, max(max_seq - 1, 0))
    if max_seq == 0:
        raise ValueError("kv_scatter: pos must be < max_seq = 0")
    if src.size:
        kern = (kv_kernel(kv_scatter_kernel, ("cache",)) if cache.dtype == np.float16
                else kv_scatter_kernel)
        kern[V.ceil_div(src.size, 256), 256](cache, src.reshape(-1), pos)
    return cache


@stdlib_function
def decode_attention(q, k_cache, v_cache, seq_len: int, num_splits: int | None = None,
                     window: int | None = None, softcap: float | None = None, *, out=None):
    """Single-token attention: out_h = Σ_t softmax_t(q_h·k_{g(h),t} / sqrt(head_dim)) v_{g(h),t}.

    `q` is float32 `[n_heads, head_dim]` or flat; the caches are `[n_kv_heads, max_seq,
    head_dim]`, both float32 or both float16 (read as halves, 8 per 128-bit load when head_dim
    % 8 == 0; the math is f32), with n_heads a multiple of n_kv_heads (g(h) = h // (n_heads /
    n_kv_heads)); only tokens t < seq_len are used (seq_len = 0 gives zeros).  `window` (sliding
    window, Mistral): only the last `window` tokens, t >= seq_len - window.  `softcap` (Gemma 2):
    each logit x = q·k / sqrt(head_dim) becomes softcap·tanh(x / softcap) before the softmax.
    Each distinct window / softcap value compiles its own kernel instance (they are
    compile-time constants, as a model's are).  `num_splits` (default: from the tokens
    attended) > 1 uses the flash-decoding split-K path.  Returns float32 in q's shape (or fills
    `out`).
    """
    fn = "decode_attention"
    k_cache = kv_array(fn, "k_cache", k_cache, (3,))
    v_cache = kv_array(fn, "v_cache", v_cache, (3,))
    kv16 = same_kv_dtype(fn, k_cache, v_cache, "k_cache", "v_cache")
    V.same_shape(fn, "v_cache", v_cache, k_cache.shape, "k_cache")
    window, softcap = window_softcap(fn, window, softcap)
    n_kv, max_seq, hd = k_cache.shape
    q_in = V.float32_array(fn, "q", q, (1, 2))
    if hd == 0 or n_kv == 0 or q_in.size % hd or (q_in.ndim == 2 and q_in.shape[1] != hd):
        raise ValueError(f"{fn}: q must be [n_heads, {hd}] or flat with a multiple of {hd} "
                         f"elements (head_dim from k_cache), got shape {q_in.shape}")
    n_heads = q_in.size // hd
    if n_heads == 0 or n_heads % n_kv:
        raise ValueError(f"{fn}: q's head count {n_heads} must be a positive multiple of "
                         f"k_cache's {n_kv} KV heads")
    seq_len = V.int_scalar(fn, "seq_len", seq_len, 0, max_seq)
    res = result(fn, out, q_in.shape, np.float32, q_in)
    out2 = res.reshape(n_heads, hd)
    if seq_len == 0:
        if V.is_device(res):
            zero_kernel[V.ceil_div(res.size, 256), 256](res.reshape(-1))
        else:
            res.fill(0.0)
        return res
    group = n_heads // n_kv
    dpl = V.ceil_div(hd, 32)
    tile = _tile(dpl, group)
    if tile is None:
        raise ValueError(f"{fn}: {group} query heads per KV head with head_dim {hd} do not fit "
                         f"the kernel's shared memory (at most 32 heads per group)")
    # the tokens the splits cover: [lo rounded down to a tile, seq_len) (the kernel's t0)
    span = seq_len - (max(seq_len - window, 0) // tile * tile if window else 0)
    if num_splits is None:
        num_splits = _auto_splits(span, n_kv, tile)
    num_splits = V.int_scalar(fn, "num_splits", num_splits, 1, 65535)
    chunk = V.ceil_div(V.ceil_div(span, num_splits), tile) * tile
    num_splits = V.ceil_div(span, chunk)             # no empty trailing splits
    scale_log2 = np.float32(LOG2E / math.sqrt(hd))
    split = num_splits > 1
    part_ml = V.empty((n_heads, num_splits, 2) if split else (1, 1, 2), np.float32, q_in)
    part_acc = V.empty((n_heads, num_splits, hd) if split else (1, 1, 1), np.float32, q_in)
    kern = decode_attention_kernel
    if kv16 or window or softcap:
        kern = kv_kernel(kern, ("k_cache", "v_cache") if kv16 else (), KV16=kv16,
                         WINDOW=window, SOFTCAP=softcap)
    kern[(n_kv, num_splits), 32 * group](
        out2, part_ml, part_acc, q_in.reshape(n_heads, hd), k_cache, v_cache, seq_len, chunk,
        scale_log2, dpl, tile, group, hd % (8 if kv16 else 4) == 0, split)
    if split:
        decode_merge_kernel[V.ceil_div(n_heads * hd, 128), 128](out2, part_ml, part_acc)
    return res


def _tile(dpl: int, group: int) -> int | None:
    """Tokens per shared-memory tile: 32 (one per lane) unless K, V, q and p would not fit."""
    if group > 32:
        return None
    width = 32 * dpl
    for tile in (32, 16, 8):
        if 4 * (2 * tile * width + group * width + group * tile) <= SMEM_LIMIT:
            return tile
    return None


def _auto_splits(seq_len: int, n_kv: int, tile: int) -> int:
    """Enough splits for TARGET_BLOCKS blocks (n_kv per split), each at least one tile long."""
    want = V.ceil_div(TARGET_BLOCKS, n_kv)
    chunk = max(tile, seq_len // want // tile * tile)
    return V.ceil_div(seq_len, chunk)
