"""Paged KV cache (vLLM's PagedAttention): `paged_kv_scatter` and `paged_attention`.

The cache is a pool of fixed-size pages `[num_pages, n_kv_heads, page_size, head_dim]`; sequence
b owns the pages `block_table[b, 0..]` in order, so its token t lives in page
`block_table[b, t // page_size]`, row `t % page_size` (page_size a power of two: a shift and a
mask).  Slot s names page `s // page_size`, row `s % page_size` of the pool.

`paged_attention` is decode_attention's flash-decoding over pages: block (g, s, b) takes the
query heads of KV head g of sequence b (one warp each) over tokens [s·chunk, (s+1)·chunk), chunk a
multiple of the page size and of the 32-token tile (a split is a group of whole pages).  Each
tile's K/V rows are looked up through the block table (one page id per tile when pages hold at
least a tile: tiles start at multiples of their size), read once with 128-bit `vload`s into shared
memory and scored by every head of the group (`attention.attend_tile`, the same step as
decode_attention); splits store partials (`attention.store_partials`) that
`paged_merge_kernel` combines with `attention.merged_value`.  The split count follows from the
longest sequence: max(seq_lens) for host lengths; for device-resident ones the caller's
`max_seq_len` hint, or by default the block table's capacity, so that one launch geometry
serves every step of a decode (a launch graph replays it while `seq_lens` grows).  float16
pools are read 8 halves per 128-bit load and converted to f32 in shared memory.
"""
from __future__ import annotations

import math

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u32

from . import _validate as V
from ._args import result, stdlib_function
from ._warp import NEG_BIG
from .attention import (LOG2E, TARGET_BLOCKS, _tile, attend_tile, kv_array, kv_kernel,
                        merged_value, same_kv_dtype, stage_vectors, store_partials, tile_sum,
                        value_column, window_softcap)


@pyptx.func
def page_row(page, n_pages, n_kv, head):
    """The row of the pools' 3-d view holding KV head `head` of page `page`; for an id outside
    [0, n_pages), row -2^30: gigabytes before the pool, outside every allocation, so a fault (a
    MemoryFault on the executor, an illegal address on a GPU) and never another array's data.
    A device block table (or slot list) is not validated on the host, and page·n_kv + head in
    32 bits wrapped a bad id onto another page (2^30 with 4 KV heads read page 0, silently).
    A compare and a select per lookup keep the index 32-bit (a 64-bit product cost 7 % more
    instructions per tile)."""
    return page * n_kv + head if u32(page) < u32(n_pages) else -(1 << 30)


@pyptx.kernel
def paged_kv_scatter_kernel(k_pages: f32[:, :, :], v_pages: f32[:, :, :],
                            k: f32[:, :, :], v: f32[:, :, :], slots: i32[:], log2_page: i32):
    """Page p, KV head h, row r of the pools is row p·n_kv_heads + h, r of the 3-d views
    `k_pages`/`v_pages` `[num_pages·n_kv_heads, page_size, head_dim]`.  Token t goes to page
    s >> log2_page, row s & (page_size - 1) for s = slots[t]; a thread per 4 elements of a row
    (128-bit loads and stores) when head_dim % 4 == 0, else per element."""
    hd = k.shape[2]
    n_kv = k.shape[1]
    n_pages = k_pages.shape[0] // n_kv
    i = pyptx.grid(1)
    if hd % 4 == 0:
        q4 = hd >> 2
        if i < k.shape[0] * n_kv * q4:
            row = i // q4
            c = (i - row * q4) * 4
            t = row // n_kv
            h = row - t * n_kv
            s = slots[t]
            pg = s >> log2_page
            r = s & ((1 << log2_page) - 1)
            prow = page_row(pg, n_pages, n_kv, h)
            pyptx.vstore(k_pages, (prow, r, c), pyptx.vload(k, (t, h, c), 4))
            pyptx.vstore(v_pages, (prow, r, c), pyptx.vload(v, (t, h, c), 4))
    elif i < k.shape[0] * n_kv * hd:
        row = i // hd
        d = i - row * hd
        t = row // n_kv
        h = row - t * n_kv
        s = slots[t]
        pg = s >> log2_page
        r = s & ((1 << log2_page) - 1)
        prow = page_row(pg, n_pages, n_kv, h)
        k_pages[prow, r, d] = k[t, h, d]
        v_pages[prow, r, d] = v[t, h, d]


def paged_attention_kernel(out: f32[:, :, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :],
                           q: f32[:, :, :], k_pages: f32[:, :, :], v_pages: f32[:, :, :],
                           block_table: i32[:, :], seq_lens: i32[:], chunk: i32,
                           log2_page: i32, scale_log2: f32,
                           DPL: pyptx.constexpr, TILE: pyptx.constexpr,
                           GROUP: pyptx.constexpr, VEC: pyptx.constexpr,
                           SPLIT: pyptx.constexpr, KV16: pyptx.constexpr,
                           WINDOW: pyptx.constexpr, SOFTCAP: pyptx.constexpr):
    """Block (g, s, b): the GROUP query heads of KV head g of sequence b (one warp each) over
    its tokens [s·chunk, (s+1)·chunk) ∩ [0, seq_lens[b]), in shared-memory tiles of TILE tokens
    whose rows are found through block_table (pools as 3-d views, as paged_kv_scatter_kernel;
    n_kv_heads = grid_dim.x).  SPLIT=False: out[b, head] = the normalised
    result; SPLIT=True: the split's partials in row b·n_heads + head of part_ml/part_acc.

    KV16, WINDOW, SOFTCAP as in attention.decode_attention_kernel (float16 pools; the last
    WINDOW tokens of each sequence, the splits starting at the tile holding its first one; the
    logit cap); `paged_attention_kernel` is this kernel with all three off."""
    width = DPL * 32
    ks = pyptx.shared.array((TILE, width), f32)
    vs = pyptx.shared.array((TILE, width), f32)
    qs = pyptx.shared.array((GROUP, width), f32)
    ps = pyptx.shared.array((GROUP, TILE), f32)
    hd = q.shape[2]
    kvh = block_idx.x
    n_kv = pyptx.grid_dim.x
    n_pages = k_pages.shape[0] // n_kv
    split = block_idx.y
    b = block_idx.z
    tid = thread_idx.x
    lane = tid & 31
    nthreads = GROUP * 32
    head = kvh * GROUP + (tid >> 5)
    pmask = (1 << log2_page) - 1
    if WINDOW:
        # never past the block table's capacity, whatever seq_lens holds
        sl = min(seq_lens[b], block_table.shape[1] << log2_page)
        lo = max(sl - WINDOW, 0)
        t0 = (lo & -TILE) + split * chunk
        t1 = min(sl, t0 + chunk)
    else:
        lo = 0
        t0 = split * chunk
        # never past the block table's capacity, whatever seq_lens holds
        t1 = min(min(seq_lens[b], block_table.shape[1] << log2_page), t0 + chunk)
    for e in range(tid, GROUP * width, nthreads):      # zero past head_dim
        h = e // width
        d = e - h * width
        qs[h, d] = q[b, kvh * GROUP + h, d] * scale_log2 if d < hd else 0.0
    VW = 4 + 4 * KV16                       # pool elements per 128-bit load (f32: 4, f16: 8)
    NV = DPL * 32 // VW                     # vectors per shared row
    RS = nthreads // NV                     # rows staged per step when NV divides the block
    vr = tid // NV
    vdst = (tid - vr * NV) * VW
    vsrc = min(vdst, hd - VW)               # see attention.stage_vectors
    acc = (0.0,) * DPL
    m = NEG_BIG
    l = 0.0
    for tt in range(t0, t1, TILE):
        pyptx.syncthreads()                 # the previous tile is consumed (and q is stored)
        if VEC:                             # 128-bit loads and stores: hd % 4 == 0
            if nthreads % NV == 0 and TILE % RS == 0:   # rows vr, vr + RS, ...: a column each
                if pmask >= TILE - 1:       # the tile lies in one page (tt % TILE == 0): one id
                    pg = page_row(block_table[b, tt >> log2_page], n_pages, n_kv, kvh)
                    for it in pyptx.static_range(TILE // RS):
                        r = vr + it * RS
                        stage_vectors(ks, vs, k_pages, v_pages, pg, min(tt + r, t1 - 1) & pmask,
                                      vsrc, r, vdst, VW)
                else:
                    for it in pyptx.static_range(TILE // RS):
                        r = vr + it * RS
                        t = min(tt + r, t1 - 1)
                        pg = page_row(block_table[b, t >> log2_page], n_pages, n_kv, kvh)
                        stage_vectors(ks, vs, k_pages, v_pages, pg, t & pmask, vsrc, r, vdst,
                                      VW)
            else:
                for it in pyptx.static_range((TILE * NV + nthreads - 1) // nthreads):
                    e = tid + it * nthreads
                    r = e // NV
                    c = (e - r * NV) * VW
                    t = min(tt + r, t1 - 1)
                    if e < TILE * NV:
                        pg = page_row(block_table[b, t >> log2_page], n_pages, n_kv, kvh)
                        stage_vectors(ks, vs, k_pages, v_pages, pg, t & pmask, min(c, hd - VW),
                                      r, c, VW)
        else:
            for e in range(tid, TILE * width, nthreads):
                r = e // width
                c = e - r * width
                t = tt + r
                kx = 0.0
                vx = 0.0
                if t < t1:
                    if c < hd:
                        pg = page_row(block_table[b, t >> log2_page], n_pages, n_kv, kvh)
                        kx = f32(k_pages[pg, t & pmask, c])
                        vx = f32(v_pages[pg, t & pmask, c])
                ks[r, c] = kx
                vs[r, c] = vx
        pyptx.syncthreads()
        m, l, acc = attend_tile(qs, ks, vs, ps, min(TILE, t1 - tt), m, l, acc, DPL, TILE,
                                lo - tt, WINDOW, SOFTCAP)     # lo - tt: used with WINDOW only
    l = tile_sum(l)
    if SPLIT:
        store_partials(part_ml, part_acc, b * q.shape[1] + head, split, m, l, acc, hd, DPL)
    else:
        inv = 1.0 / l if l > 0.0 else 0.0
        for c in pyptx.static_range(DPL):
            d = value_column(lane, c, DPL)
            if d < hd:
                out[b, head, d] = acc[c] * inv


#: the kernel with every option off (float32 pools, no window, no softcap): the launch signature
#: and code of the kernel before the options existed
paged_attention_kernel = pyptx.kernel(paged_attention_kernel).specialize(
    KV16=False, WINDOW=0, SOFTCAP=0.0)


@pyptx.kernel
def paged_merge_kernel(out: f32[:, :, :], part_ml: f32[:, :, :], part_acc: f32[:, :, :]):
    """out[b, h, d] from the split partials of row b·n_heads + h; a thread per element."""
    i = pyptx.grid(1)
    hd = out.shape[2]
    rows = out.shape[0] * out.shape[1]
    if i < rows * hd:
        row = i // hd
        d = i - row * hd
        out[row // out.shape[1], row % out.shape[1], d] = merged_value(part_ml, part_acc, row, d)


# ---- host side -----------------------------------------------------------------------------

def _rows(pages):
    """The kernels' 3-d view `[num_pages·n_kv_heads, page_size, head_dim]` of a page pool."""
    n, h, ps, hd = pages.shape
    return pages.reshape(n * h, ps, hd)


def _pages(fn: str, name: str, pages, *, in_place: bool = False):
    """A float32 or float16 page pool `[num_pages, n_kv_heads, page_size, head_dim]`."""
    if in_place and isinstance(pages, np.ndarray) and not (
            pages.flags.c_contiguous and pages.flags.writeable):
        raise ValueError(f"{fn}: {name} must be C-contiguous and writeable (updated in place)")
    pages = kv_array(fn, name, pages, (4,))
    ps = pages.shape[2]
    if ps == 0 or ps & (ps - 1):
        raise ValueError(f"{fn}: {name}'s page size (axis 2) must be a power of two, got {ps}")
    return pages


@stdlib_function
def paged_kv_scatter(k, v, k_pages, v_pages, slots):
    """k_pages[s // page_size, :, s % page_size] = k[t] (and v) for s = slots[t]: token t's
    `k[t]`, `v[t]` (`[tokens, n_kv_heads, head_dim]` float32) go to slot `slots[t]` of the pools
    (`[num_pages, n_kv_heads, page_size, head_dim]`, both float32 or both float16 - then k, v
    are rounded to nearest -, C-contiguous, updated in place): page `s // page_size`, row
    `s % page_size`.  A slot outside the pools (or a repeated one) is a
    ValueError (host slots; device-resident slots are not read back).

    Returns `(k_pages, v_pages)`, the caller's own objects (a torch tensor stays that tensor).
    No `out=`: the results are the pools themselves, so there is no result array to provide.
    """
    fn = "paged_kv_scatter"
    k_pages = _pages(fn, "k_pages", k_pages, in_place=True)
    v_pages = _pages(fn, "v_pages", v_pages, in_place=True)
    kv16 = same_kv_dtype(fn, k_pages, v_pages, "k_pages", "v_pages")
    V.same_shape(fn, "v_pages", v_pages, k_pages.shape, "k_pages")
    num_pages, n_kv, ps, hd = k_pages.shape
    k = V.float32_array(fn, "k", k, (3,))
    v = V.float32_array(fn, "v", v, (3,))
    if k.shape[1:] != (n_kv, hd):
        raise ValueError(f"{fn}: k must be [tokens, {n_kv}, {hd}] (n_kv_heads and head_dim "
                         f"from k_pages), got shape {k.shape}")
    V.same_shape(fn, "v", v, k.shape, "k")
    slots = V.int_array(fn, "slots", slots, 1)
    if slots.shape[0] != k.shape[0]:
        raise ValueError(f"{fn}: slots must have one entry per token ({k.shape[0]}, from k), "
                         f"got {slots.shape[0]}")
    cap = num_pages * ps
    if V.is_device(slots):
        pass                                  # device-resident slots: the caller's contract
    elif slots.size and (slots.min() < 0 or slots.max() >= cap):
        bad = slots[(slots < 0) | (slots >= cap)][0]
        raise ValueError(f"{fn}: slot {bad} is outside the pages (slots must be in "
                         f"[0, {cap}) = num_pages x page_size)")
    if not V.is_device(slots) and np.unique(slots).size != slots.size:
        raise ValueError(f"{fn}: slots must be distinct (two tokens written to one slot)")
    n = k.size // 4 if hd % 4 == 0 else k.size
    if n:
        kern = (kv_kernel(paged_kv_scatter_kernel, ("k_pages", "v_pages")) if kv16
                else paged_kv_scatter_kernel)
        kern[V.ceil_div(n, 256), 256](
            _rows(k_pages), _rows(v_pages), k, v, slots, ps.bit_length() - 1)
    return k_pages, v_pages


@stdlib_function
def paged_attention(q, k_pages, v_pages, block_table, seq_lens, scale: float | None = None,
                    max_seq_len: int | None = None, window: int | None = None,
                    softcap: float | None = None, *, out=None):
    """Decode attention over a paged KV cache, per sequence b and query head h:
    out[b, h] = Σ_t softmax_t(q[b, h]·k_t · scale) v_t over the sequence's seq_lens[b] tokens,
    token t in page block_table[b, t // page_size], row t % page_size, KV head
    h // (n_heads / n_kv_heads).

    `q` float32 `[batch, n_heads, head_dim]`; pages `[num_pages, n_kv_heads, page_size,
    head_dim]` (page_size a power of two), both float32 or both float16 (read as halves, 8 per
    128-bit load when head_dim % 8 == 0; the math is f32); `block_table` int32 `[batch,
    max_pages]`; `seq_lens` int32 `[batch]`, each ≤ max_pages·page_size (0 gives zeros).
    `scale` defaults to 1/sqrt(head_dim).  `window` (sliding window, Mistral): only each
    sequence's last `window` tokens; `softcap` (Gemma 2): each logit x = q·k·scale becomes
    softcap·tanh(x / softcap) (each distinct value compiles its own kernel instance).

    The split-K work is sized by the longest sequence: max(seq_lens) when seq_lens is a host
    array; for device-resident seq_lens (never read back) by `max_seq_len`, a host int the
    caller guarantees every seq_lens[b] is at most (tokens past it are not attended), default
    the block table's capacity max_pages·page_size (one launch geometry for every step of a
    decode, e.g. a captured graph replayed while seq_lens grows).  Returns float32 `[batch,
    n_heads, head_dim]` (or fills `out`).
    """
    fn = "paged_attention"
    k_pages = _pages(fn, "k_pages", k_pages)
    v_pages = _pages(fn, "v_pages", v_pages)
    kv16 = same_kv_dtype(fn, k_pages, v_pages, "k_pages", "v_pages")
    V.same_shape(fn, "v_pages", v_pages, k_pages.shape, "k_pages")
    window, softcap = window_softcap(fn, window, softcap)
    num_pages, n_kv, ps, hd = k_pages.shape
    q = V.float32_array(fn, "q", q, (3,))
    batch, n_heads = q.shape[:2]
    if q.shape[2] != hd:
        raise ValueError(f"{fn}: q must be [batch, n_heads, {hd}] (head_dim from k_pages), "
                         f"got shape {q.shape}")
    if n_kv == 0 or n_heads == 0 or n_heads % n_kv:
        raise ValueError(f"{fn}: q's head count {n_heads} must be a positive multiple of "
                         f"k_pages' {n_kv} KV heads")
    block_table = V.int_array(fn, "block_table", block_table, 2)
    if block_table.shape[0] != batch:
        raise ValueError(f"{fn}: block_table must be [{batch}, max_pages] (batch from q), got "
                         f"shape {block_table.shape}")
    seq_lens = V.int_array(fn, "seq_lens", seq_lens, 1)
    V.same_shape(fn, "seq_lens", seq_lens, (batch,), "q")
    max_pages = block_table.shape[1]
    if not (V.is_device(seq_lens) or V.is_device(block_table)):
        _check_table(fn, block_table, seq_lens, num_pages, ps)
    cap = max_pages * ps
    if max_seq_len is not None:
        max_seq_len = V.int_scalar(fn, "max_seq_len", max_seq_len, 0, cap)
    if V.is_device(seq_lens):
        longest = cap if max_seq_len is None else max_seq_len
    else:
        longest = int(min(seq_lens.max(initial=0), cap))      # seq_lens past cap: checked
        if max_seq_len is not None and longest > max_seq_len:
            raise ValueError(f"{fn}: seq_lens holds {longest} > max_seq_len = {max_seq_len}")
    scale = 1.0 / math.sqrt(hd) if scale is None else V.float_scalar(fn, "scale", scale)
    out = result(fn, out, (batch, n_heads, hd), np.float32, q)
    if batch * n_heads * hd == 0:
        return out
    group = n_heads // n_kv
    dpl = V.ceil_div(hd, 32)
    tile = _tile(dpl, group)
    if tile is None:
        raise ValueError(f"{fn}: {group} query heads per KV head with head_dim {hd} do not fit "
                         f"the kernel's shared memory (at most 32 heads per group)")
    # tokens a split covers: [0, longest), or with a window at most its tokens from the tile
    # holding the first (the kernel's t0 is rounded down to a tile)
    span = min(longest, window + tile - 1) if window else longest
    splits, chunk = _split_plan(span, batch * n_kv, max(tile, ps))
    part_ml = V.empty((batch * n_heads, splits, 2) if splits > 1 else (1, 1, 2), np.float32, q)
    part_acc = V.empty((batch * n_heads, splits, hd) if splits > 1 else (1, 1, 1), np.float32,
                       q)
    kern = paged_attention_kernel
    if kv16 or window or softcap:
        kern = kv_kernel(kern, ("k_pages", "v_pages") if kv16 else (), KV16=kv16,
                         WINDOW=window, SOFTCAP=softcap)
    kern[(n_kv, splits, batch), 32 * group](
        out, part_ml, part_acc, q, _rows(k_pages), _rows(v_pages), block_table, seq_lens, chunk,
        ps.bit_length() - 1, np.float32(scale * LOG2E), dpl, tile, group,
        hd % (8 if kv16 else 4) == 0, splits > 1)
    if splits > 1:
        paged_merge_kernel[V.ceil_div(batch * n_heads * hd, 128), 128](out, part_ml, part_acc)
    return out


def _check_table(fn, block_table, seq_lens, num_pages, ps):
    """Host-side checks of the lengths and of the pages they use (numpy arguments only)."""
    max_pages = block_table.shape[1]
    if seq_lens.size and (seq_lens.min() < 0 or seq_lens.max() > max_pages * ps):
        raise ValueError(f"{fn}: seq_lens must be in [0, {max_pages * ps}] (max_pages x "
                         f"page_size), got {seq_lens.min()}..{seq_lens.max()}")
    for b in range(block_table.shape[0]):
        used = block_table[b, :V.ceil_div(int(seq_lens[b]), ps)]
        if used.size and (used.min() < 0 or used.max() >= num_pages):
            raise ValueError(f"{fn}: block_table[{b}] names a page outside [0, {num_pages}) "
                             f"among the {used.size} pages its {seq_lens[b]} tokens use")


def _split_plan(capacity: int, blocks: int, unit: int) -> tuple[int, int]:
    """(splits, chunk): chunks of whole units (pages / tiles) covering the capacity, enough
    splits for TARGET_BLOCKS blocks with `blocks` blocks per split (and at most 65535)."""
    units = max(1, V.ceil_div(capacity, unit))
    want = min(units, max(1, V.ceil_div(TARGET_BLOCKS, blocks)), 65535)
    chunk = V.ceil_div(units, want) * unit
    return V.ceil_div(max(capacity, 1), chunk), chunk
