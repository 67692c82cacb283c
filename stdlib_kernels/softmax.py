"""Row softmax with one `exp` per element where the row fits in registers.

Rows are read in 128-bit chunks (`pyptx.vload`, 4 floats) whatever their length: a row that does
not start 16-byte aligned gets a partial first and last chunk, read element by element; see
`_rows.py`.

* Register-resident rows (≤ 32·8 chunks of 4 for the warp kernel, ≤ BLOCK·8 for the block
  kernel): x is read once into registers, the row max is reduced, each element's e^(x−max) is
  computed once and kept, the sum reduced, and e·(1/sum) written: exactly one `exp` per element.
* Longer rows stream, also with one `exp` per element: pass 1 writes y = e^(x−r) into `out` and
  sums it, against a per-thread reference r (its running max, moved only when a chunk rises more
  than STREAM_HEADROOM above it: then the sum and the y the thread already wrote are rescaled by
  e^(r_old−r_new), which for most rows never or once happens); the block reduces R = max r and
  S = Σ s·e^(r−R), and pass 2 rescales the thread's own y by one factor e^(r−R)/S (a load, four
  multiplies and a store per chunk; one `exp` per thread).  Pass 2 reads y where the two-exp
  version re-read x; y's first write is the extra traffic (absorbed by L2 when the row fits).
Block reductions are warp butterflies whose per-warp partials warp 0 merges once.  Subtracting the
row max (or a reference at most STREAM_HEADROOM below it) keeps every exponent ≤ 16, so ±80 (or
±1e30) inputs never overflow.
"""
from __future__ import annotations

import math

import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, thread_idx

from . import _validate as V
from ._args import deliver, result, stdlib_function
from ._rows import (MAX_CHUNKS, RowConfig, in_row, load_chunks, load_row4, row_config,
                    row_head, store_row4)
from ._warp import NEG_BIG, block_max, block_sum, warp_max, warp_sum

#: threads per block of the warp-per-row kernel (= rows per block × 32)
WARP_KERNEL_BLOCK = 256
#: how far (in e-folds) a streamed chunk may rise above its thread's reference r before r moves:
#: the stored e^(x−r) stay ≤ e^16 (a thread's sum of up to 2^31 of them cannot overflow), and
#: where the final factor e^(r−R)/S is subnormal the outputs it scales are < e^16·2^-126, so
#: their absolute error stays below ~1e-38
STREAM_HEADROOM = 16.0
#: the streamed pass's fill for columns outside the row: e^(−inf − r) = 0 adds nothing to the sum
NEG_INF = -math.inf


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


@pyptx.func
def scale_stored(out, row, n, first, stop, f: f32, STRIDE, VEC):
    """out[row, chunk] *= f for the thread's chunks first, first + 4·STRIDE, ... below `stop`."""
    for c in range(first, stop, STRIDE * 4):
        a, b, d, e = load_row4(out, row, c, n, 0.0, VEC)
        store_row4(out, row, c, n, a * f, b * f, d * f, e * f, VEC)


@pyptx.func
def stream_exp(out, x, row, n, first, STRIDE, VEC):
    """Pass 1 of the streamed softmax over the thread's chunks first, first + 4·STRIDE, ...:
    out = e^(x − r) and returns (r, s = Σ e^(x − r)).  r starts at −FLT_MAX and moves to a
    chunk's max when that rises more than STREAM_HEADROOM above r; what the thread stored
    before (only if its sum is not 0) is rescaled to the new r then."""
    r = NEG_BIG
    s = f32(0.0)
    for c in range(first, n, STRIDE * 4):
        if VEC == 4:                            # c < n: the whole chunk is in the row
            a, b, d, e = pyptx.vload(x, (row, c), 4)
        else:
            a, b, d, e = load_row4(x, row, c, n, NEG_INF, VEC)
        cm = max(max(a, b), max(d, e))
        if cm > r + STREAM_HEADROOM:
            if s > 0.0:
                k = pyptx.math.exp(r - cm)
                s = s * k
                scale_stored(out, row, n, first, c, k, STRIDE, VEC)
            r = cm
        a = pyptx.math.exp(a - r)
        b = pyptx.math.exp(b - r)
        d = pyptx.math.exp(d - r)
        e = pyptx.math.exp(e - r)
        s += (a + b) + (d + e)
        store_row4(out, row, c, n, a, b, d, e, VEC)
    return r, s


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
    (≤ BLOCK·CHUNKS chunks), streamed through `out` when CHUNKS == 0 (any length; `out` must
    not overlap x except as the very same array)."""
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
        first = tid * 4 - h
        r, s = stream_exp(out, x, row, n, first, BLOCK, VEC)
        big = block_max(r, red_m, BLOCK // 32)
        g = pyptx.math.exp(r - big)
        scale_stored(out, row, n, first, n, g / block_sum(s * g, red_s, BLOCK // 32), BLOCK,
                     VEC)


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


@stdlib_function
def softmax(x, axis: int = -1, *, out=None):
    """softmax(x)_i = exp(x_i - max(x)) / Σ_j exp(x_j - max(x)) along `axis` (float32).

    Any number of dimensions; rows of any length.  Returns a new array of x's shape (or fills
    `out`).
    """
    x = V.float32_array("softmax", "x", x, (1, 2, 3, 4, 5, 6))
    axis = V.int_scalar("softmax", "axis", axis, -x.ndim, x.ndim - 1)
    if V.is_device(x):                  # device-resident: rows along the last axis only
        if axis % x.ndim != x.ndim - 1:
            raise ValueError("softmax: a DeviceArray x takes axis=-1 only (no transposes on "
                             "the device)")
        res = result("softmax", out, x.shape, np.float32, x)
        if x.size:
            _rows(res.reshape(-1, x.shape[-1]), x.reshape(-1, x.shape[-1]))
        return res
    if axis % x.ndim == x.ndim - 1:     # rows in place: straight into out
        res = result("softmax", out, x.shape, np.float32, x)
        if x.size:
            _rows(res.reshape(-1, x.shape[-1]), x.reshape(-1, x.shape[-1]))
        return res
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    if moved.size == 0:
        return deliver("softmax", out, np.empty_like(x), x)
    rows = np.ascontiguousarray(moved.reshape(-1, n))
    res = np.empty_like(rows)
    _rows(res, rows)
    return deliver("softmax", out, np.ascontiguousarray(np.moveaxis(res.reshape(moved.shape),
                                                                    -1, axis)), x)


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
