"""Row softmax with one `exp` per element where the row fits in registers.

Rows are read in 128-bit chunks (`pyptx.vload`, 4 floats) whatever their length: a row that does
not start 16-byte aligned gets a partial first and last chunk, read element by element; see
`_rows.py`.

* Register-resident rows (≤ 32·8 chunks of 4 for the warp kernel, ≤ BLOCK·8 for the block
  kernel): x is read once into registers, the row max is reduced, each element's e^(x−max) is
  computed once and kept, the sum reduced, and e·(1/sum) written: exactly one `exp` per element.
* Longer rows stream: pass 1 keeps a per-thread online (max m, Σe^(x−m)), rescaling the sum only
  when a 4-element chunk raises the max; the block then reduces M = max m, and each thread rescales
  its own partial once (s·e^(m−M)) before the block sum; pass 2 writes e^(x−M)/sum.
Block reductions are warp butterflies whose per-warp partials warp 0 merges once.  Subtracting the
row max keeps every exponent ≤ 0, so ±80 (or ±1e30) inputs never overflow.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, thread_idx

from . import _validate as V
from ._rows import (MAX_CHUNKS, RowConfig, in_row, load_chunks, load_row4, row_config,
                    row_head, store_row4)
from ._warp import NEG_BIG, block_max, block_sum, warp_max, warp_sum

#: threads per block of the warp-per-row kernel (= rows per block × 32)
WARP_KERNEL_BLOCK = 256


@pyptx.func
def exp_in_place(vals, m: f32, t, n, h, STRIDE, VEC, CHUNKS):
    """vals[i] = e^(vals[i] − m) for the chunks inside the row (0 for the columns outside it);
    returns their sum."""
    s = f32(0.0)
    for k in pyptx.static_range(CHUNKS):
        col = (t + k * STRIDE) * 4 - h
        if col < n:
            for e in pyptx.static_range(4):
                ev = pyptx.math.exp(vals[4 * k + e] - m)
                if VEC != 4:
                    ev = ev if in_row(col + e, n) else f32(0.0)
                vals[4 * k + e] = ev
                s += ev
    return s


@pyptx.func
def store_scaled(out, vals, row, t, n, h, scale: f32, STRIDE, VEC, CHUNKS):
    """out[row, chunk] = vals[chunk] · scale for the thread's chunks inside the row."""
    for k in pyptx.static_range(CHUNKS):
        col = (t + k * STRIDE) * 4 - h
        if col < n:
            i = 4 * k
            store_row4(out, row, col, n, vals[i] * scale, vals[i + 1] * scale,
                       vals[i + 2] * scale, vals[i + 3] * scale, VEC)


@pyptx.func
def chunk_max(vals, CHUNKS):
    m = vals[0]
    for i in pyptx.static_range(1, 4 * CHUNKS):
        m = max(m, vals[i])
    return m


@pyptx.kernel
def softmax_warp_kernel(out: f32[:, :], x: f32[:, :], VEC: pyptx.constexpr,
                        CHUNKS: pyptx.constexpr):
    """One warp per row, the row in registers (≤ 32·CHUNKS chunks): no shared memory, no
    barriers, one exp per element."""
    row = block_idx.x * (block_dim.x // 32) + thread_idx.x // 32
    lane = thread_idx.x % 32
    n = x.shape[1]
    if row < x.shape[0]:
        h = row_head(row, n, VEC)
        vals = pyptx.local.array(4 * CHUNKS, f32)
        load_chunks(vals, x, row, lane, n, h, NEG_BIG, 32, VEC, CHUNKS)
        m = warp_max(chunk_max(vals, CHUNKS))
        s = warp_sum(exp_in_place(vals, m, lane, n, h, 32, VEC, CHUNKS))
        store_scaled(out, vals, row, lane, n, h, 1.0 / s, 32, VEC, CHUNKS)


@pyptx.kernel
def softmax_block_kernel(out: f32[:, :], x: f32[:, :], BLOCK: pyptx.constexpr,
                         VEC: pyptx.constexpr, CHUNKS: pyptx.constexpr):
    """One block of BLOCK threads per row: the row in registers when CHUNKS > 0
    (≤ BLOCK·CHUNKS chunks), streamed with an online max/sum when CHUNKS == 0 (any length)."""
    red_m = pyptx.shared.array(32, f32)
    red_s = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    h = row_head(row, n, VEC)
    if CHUNKS > 0:
        vals = pyptx.local.array(4 * CHUNKS, f32)
        load_chunks(vals, x, row, tid, n, h, NEG_BIG, BLOCK, VEC, CHUNKS)
        m = block_max(chunk_max(vals, CHUNKS), red_m, BLOCK // 32)
        s = block_sum(exp_in_place(vals, m, tid, n, h, BLOCK, VEC, CHUNKS), red_s, BLOCK // 32)
        store_scaled(out, vals, row, tid, n, h, 1.0 / s, BLOCK, VEC, CHUNKS)
    else:
        m = NEG_BIG
        s = 0.0
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, NEG_BIG, VEC)
            cm = max(max(a, b), max(d, e))
            if cm > m:
                s = s * pyptx.math.exp(m - cm)
                m = cm
            s += (pyptx.math.exp(a - m) + pyptx.math.exp(b - m)) + \
                (pyptx.math.exp(d - m) + pyptx.math.exp(e - m))
        mx = block_max(m, red_m, BLOCK // 32)
        inv = 1.0 / block_sum(s * pyptx.math.exp(m - mx), red_s, BLOCK // 32)
        for c in range(tid * 4 - h, n, BLOCK * 4):
            a, b, d, e = load_row4(x, row, c, n, NEG_BIG, VEC)
            store_row4(out, row, c, n, pyptx.math.exp(a - mx) * inv,
                       pyptx.math.exp(b - mx) * inv, pyptx.math.exp(d - mx) * inv,
                       pyptx.math.exp(e - mx) * inv, VEC)


def warp_row_max(vec: int) -> int:
    """The longest row the warp-per-row kernel keeps in registers (`vec` as in RowConfig: a
    misaligned row may span 3 more columns)."""
    return 32 * 4 * MAX_CHUNKS - (0 if vec == 4 else 3)


def plan(n: int) -> tuple[str, RowConfig]:
    """('warp' | 'block', RowConfig) the wrapper uses for rows of n elements."""
    vec = 4 if n % 4 == 0 else 1
    if n <= warp_row_max(vec):
        return "warp", row_config(n, 32)
    return "block", row_config(n)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(x)_i = exp(x_i - max(x)) / Σ_j exp(x_j - max(x)) along `axis` (float32).

    Any number of dimensions; rows of any length.  Returns a new array of x's shape.
    """
    x = V.float32_array("softmax", "x", x, (1, 2, 3, 4, 5, 6))
    axis = V.int_scalar("softmax", "axis", axis, -x.ndim, x.ndim - 1)
    if V.is_device(x):                  # device-resident: rows along the last axis only
        if axis % x.ndim != x.ndim - 1:
            raise ValueError("softmax: a DeviceArray x takes axis=-1 only (no transposes on "
                             "the device)")
        out = V.empty(x.shape, np.float32, x)
        if x.size:
            _rows(out.reshape(-1, x.shape[-1]), x.reshape(-1, x.shape[-1]))
        return out
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    if moved.size == 0:
        return np.empty_like(x)
    rows = np.ascontiguousarray(moved.reshape(-1, n))
    out = np.empty_like(rows)
    _rows(out, rows)
    return np.ascontiguousarray(np.moveaxis(out.reshape(moved.shape), -1, axis))


def _rows(out, rows) -> None:
    """softmax of each row of the 2-d `rows` into `out` (warp or block kernel by length)."""
    n_rows, n = rows.shape
    kind, cfg = plan(n)
    if kind == "warp":
        per_block = min(WARP_KERNEL_BLOCK // 32, n_rows)
        softmax_warp_kernel[V.ceil_div(n_rows, per_block), 32 * per_block](out, rows, cfg.vec,
                                                                           cfg.chunks)
    else:
        softmax_block_kernel[n_rows, cfg.block](out, rows, cfg.block, cfg.vec, cfg.chunks)
