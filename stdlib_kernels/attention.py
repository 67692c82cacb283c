"""Decode-time attention over a head-first KV cache `[n_kv_heads, max_seq, head_dim]`.

`decode_attention_kernel`: one warp per query head.  Lane `l` owns dimensions l, l+32, ... of q
and of the output accumulator (DPL = ceil(head_dim / 32) registers each).  For every cached token
the warp computes the score q·k with a `shfl_xor` all-reduce, then updates the online softmax
(running max m, running denominator l, accumulator rescaled by e^(m_old - m_new)) — the scores
never touch memory.  Grouped-query attention maps query head h to KV head h // (n_heads / n_kv).

Flash-decoding (split-K): with SPLIT, block (·, s) handles tokens [s·chunk, (s+1)·chunk) and
writes its unnormalised partial (m_s, l_s, acc_s); `decode_merge_kernel` then combines the splits
with log-sum-exp weights: out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s, M = max_s m_s.
"""
from __future__ import annotations

import math

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, i32, thread_idx

from . import _validate as V
from ._warp import NEG_BIG, warp_sum

#: query heads handled by one block of the decode kernel (one warp each)
HEADS_PER_BLOCK = 4
#: a cache longer than this (in valid tokens) is split across blocks (flash-decoding)
SPLIT_THRESHOLD = 512
#: target tokens per split, and the most splits
SPLIT_CHUNK = 256
MAX_SPLITS = 64


@pyptx.kernel
def kv_scatter_kernel(cache: f32[:, :, :], src: f32[:], pos: i32):
    """cache[h, pos, d] = src[h * head_dim + d]; one thread per element of src."""
    i = pyptx.grid(1)
    hd = cache.shape[2]
    if i < len(src):
        cache[i // hd, pos, i % hd] = src[i]


@pyptx.kernel
def decode_attention_kernel(out: f32[:, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :],
                            q: f32[:, :], k_cache: f32[:, :, :], v_cache: f32[:, :, :],
                            seq_len: i32, chunk: i32, scale: f32,
                            DPL: pyptx.constexpr, SPLIT: pyptx.constexpr):
    """One warp per head; tokens [block_idx.y·chunk, +chunk) ∩ [0, seq_len).

    SPLIT=False: writes the normalised result to out[head].  SPLIT=True: writes the partial
    (m, l) to part_ml[head, split] and the unnormalised accumulator to part_acc[head, split].
    """
    head = block_idx.x * (block_dim.x // 32) + thread_idx.x // 32
    lane = thread_idx.x % 32
    n_heads = q.shape[0]
    hd = q.shape[1]
    if head < n_heads:
        kvh = head // (n_heads // k_cache.shape[0])
        split = block_idx.y
        t0 = split * chunk
        t1 = min(seq_len, t0 + chunk)
        qv = pyptx.local.array(DPL, f32)
        acc = pyptx.local.array(DPL, f32)
        for i in pyptx.static_range(DPL):
            d = lane + 32 * i
            qv[i] = q[head, d] * scale if d < hd else 0.0
            acc[i] = 0.0
        m = NEG_BIG
        l = 0.0
        for t in range(t0, t1):
            s = 0.0
            for i in pyptx.static_range(DPL):
                d = lane + 32 * i
                if d < hd:
                    s += qv[i] * k_cache[kvh, t, d]
            s = warp_sum(s)
            m_new = max(m, s)
            corr = pyptx.math.exp(m - m_new)
            p = pyptx.math.exp(s - m_new)
            l = l * corr + p
            for i in pyptx.static_range(DPL):
                d = lane + 32 * i
                if d < hd:
                    acc[i] = acc[i] * corr + p * v_cache[kvh, t, d]
            m = m_new
        if SPLIT:
            if lane == 0:
                part_ml[head, split, 0] = m
                part_ml[head, split, 1] = l
            for i in pyptx.static_range(DPL):
                d = lane + 32 * i
                if d < hd:
                    part_acc[head, split, d] = acc[i]
        else:
            inv = 1.0 / l if l > 0.0 else 0.0
            for i in pyptx.static_range(DPL):
                d = lane + 32 * i
                if d < hd:
                    out[head, d] = acc[i] * inv


@pyptx.kernel
def decode_merge_kernel(out: f32[:, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :]):
    """Log-sum-exp merge of the split partials; one thread per output element (head, d)."""
    i = pyptx.grid(1)
    n_heads = out.shape[0]
    hd = out.shape[1]
    n_splits = part_ml.shape[1]
    if i < n_heads * hd:
        h = i // hd
        d = i % hd
        mx = NEG_BIG
        for s in range(n_splits):
            mx = max(mx, part_ml[h, s, 0])
        den = 0.0
        num = 0.0
        for s in range(n_splits):
            w = pyptx.math.exp(part_ml[h, s, 0] - mx)
            den += part_ml[h, s, 1] * w
            num += part_acc[h, s, d] * w
        out[h, d] = num / den if den > 0.0 else 0.0


def _cache(fn: str, name: str, cache, *, in_place: bool = False) -> np.ndarray:
    """A `[n_kv_heads, max_seq, head_dim]` float32 cache (C-contiguous if written in place)."""
    if in_place and isinstance(cache, np.ndarray) and not cache.flags.c_contiguous:
        raise ValueError(f"{fn}: {name} must be C-contiguous (it is updated in place)")
    if in_place and isinstance(cache, np.ndarray) and not cache.flags.writeable:
        raise ValueError(f"{fn}: {name} must be writeable (it is updated in place)")
    return V.float32_array(fn, name, cache, (3,))


def kv_scatter(src: np.ndarray, cache: np.ndarray, pos: int) -> np.ndarray:
    """cache[h, pos, :] = src[h·head_dim : (h+1)·head_dim] for every KV head, in place.

    `cache` is `[n_kv_heads, max_seq, head_dim]` float32 (C-contiguous, updated in place and
    returned); `src` is `[n_kv_heads * head_dim]` (or `[n_kv_heads, head_dim]`); 0 ≤ pos < max_seq.
    """
    cache = _cache("kv_scatter", "cache", cache, in_place=True)
    n_kv, max_seq, hd = cache.shape
    src = V.float32_array("kv_scatter", "src", src, (1, 2))
    if src.size != n_kv * hd or (src.ndim == 2 and src.shape != (n_kv, hd)):
        raise ValueError(f"kv_scatter: src must have {n_kv * hd} elements ([{n_kv}, {hd}] or "
                         f"flat, from cache), got shape {src.shape}")
    pos = V.int_scalar("kv_scatter", "pos", pos, 0, max(max_seq - 1, 0))
    if max_seq == 0:
        raise ValueError("kv_scatter: pos must be < max_seq = 0")
    if src.size:
        kv_scatter_kernel[V.ceil_div(src.size, 256), 256](cache, src.reshape(-1), pos)
    return cache


def decode_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, seq_len: int,
                     num_splits: int | None = None) -> np.ndarray:
    """Single-token attention: out_h = Σ_t softmax_t(q_h·k_{g(h),t} / sqrt(head_dim)) v_{g(h),t}.

    `q` is `[n_heads, head_dim]` or flat; the caches are `[n_kv_heads, max_seq, head_dim]` with
    n_heads a multiple of n_kv_heads (g(h) = h // (n_heads / n_kv_heads)); only tokens
    t < seq_len are used (seq_len = 0 gives zeros).  `num_splits` (default: from seq_len) > 1
    uses the flash-decoding split-K path.  Returns an array of q's shape.
    """
    fn = "decode_attention"
    k_cache = _cache(fn, "k_cache", k_cache)
    v_cache = _cache(fn, "v_cache", v_cache)
    V.same_shape(fn, "v_cache", v_cache, k_cache.shape, "k_cache")
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
    q2 = q_in.reshape(n_heads, hd)
    if seq_len == 0:
        return np.zeros(q_in.shape, np.float32)
    out = np.empty((n_heads, hd), np.float32)
    if num_splits is None:
        num_splits = 1 if seq_len <= SPLIT_THRESHOLD else \
            min(MAX_SPLITS, V.ceil_div(seq_len, SPLIT_CHUNK))
    num_splits = V.int_scalar(fn, "num_splits", num_splits, 1, 65535)
    chunk = V.ceil_div(seq_len, num_splits)
    num_splits = V.ceil_div(seq_len, chunk)          # no empty trailing splits
    dpl = V.ceil_div(hd, 32)
    scale = np.float32(1.0 / math.sqrt(hd))
    hpb = min(HEADS_PER_BLOCK, n_heads)
    grid = (V.ceil_div(n_heads, hpb), num_splits)
    split = num_splits > 1
    part_ml = np.empty((n_heads, num_splits, 2) if split else (1, 1, 2), np.float32)
    part_acc = np.empty((n_heads, num_splits, hd) if split else (1, 1, 1), np.float32)
    decode_attention_kernel[grid, 32 * hpb](out, part_ml, part_acc, q2, k_cache, v_cache,
                                            seq_len, chunk, scale, dpl, split)
    if split:
        decode_merge_kernel[V.ceil_div(n_heads * hd, 128), 128](out, part_ml, part_acc)
    return out.reshape(q_in.shape)
