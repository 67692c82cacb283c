"""Row softmax with one `exp` per element where the row fits in registers.

Rows are read in 128-bit chunks (`pyptx.vload`, 4 floats) when the row length is a multiple of 4
(so every row starts 16-byte aligned), else one float at a time; see `_rows.py`.

* Register-resident rows (≤ 32·VEC·8 elements for the warp kernel, ≤ BLOCK·VEC·8 for the block
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
from ._rows import MAX_CHUNKS, RowConfig, load4, load_chunks, row_config, store4
from ._warp import NEG_BIG, block_max, block_sum, warp_max, warp_sum

#: threads per block of the warp-per-row kernel (= rows per block × 32)
WARP_KERNEL_BLOCK = 256


@pyptx.func
def exp_in_place(vals, m: f32, t, n, STRIDE, VEC, CHUNKS):
    """vals[i] = e^(vals[i] − m) for the chunks inside the row; returns their sum."""
    s = f32(0.0)
    for k in pyptx.static_range(CHUNKS):
        if (t + k * STRIDE) * VEC < n:
            for e in pyptx.static_range(VEC):
                ev = pyptx.math.exp(vals[k * VEC + e] - m)
                vals[k * VEC + e] = ev
                s += ev
    return s


@pyptx.func
def store_scaled(out, vals, row, t, n, scale: f32, STRIDE, VEC, CHUNKS):
    """out[row, chunk] = vals[chunk] · scale for the thread's chunks inside the row."""
    for k in pyptx.static_range(CHUNKS):
        c = (t + k * STRIDE) * VEC
        if c < n:
            i = k * VEC
            store4(out, row, c, vals[i] * scale, vals[i + 1 % VEC] * scale,
                   vals[i + 2 % VEC] * scale, vals[i + 3 % VEC] * scale, VEC)


@pyptx.func
def chunk_max(vals, VEC, CHUNKS):
    m = vals[0]
    for i in pyptx.static_range(1, VEC * CHUNKS):
        m = max(m, vals[i])
    return m


@pyptx.kernel
def softmax_warp_kernel(out: f32[:, :], x: f32[:, :], VEC: pyptx.constexpr,
                        CHUNKS: pyptx.constexpr):
    """One warp per row, the row in registers (n ≤ 32·VEC·CHUNKS): no shared memory, no
    barriers, one exp per element."""
    row = block_idx.x * (block_dim.x // 32) + thread_idx.x // 32
    lane = thread_idx.x % 32
    n = x.shape[1]
    if row < x.shape[0]:
        vals = pyptx.local.array(VEC * CHUNKS, f32)
        load_chunks(vals, x, row, lane, n, NEG_BIG, 32, VEC, CHUNKS)
        m = warp_max(chunk_max(vals, VEC, CHUNKS))
        s = warp_sum(exp_in_place(vals, m, lane, n, 32, VEC, CHUNKS))
        store_scaled(out, vals, row, lane, n, 1.0 / s, 32, VEC, CHUNKS)


@pyptx.kernel
def softmax_block_kernel(out: f32[:, :], x: f32[:, :], BLOCK: pyptx.constexpr,
                         VEC: pyptx.constexpr, CHUNKS: pyptx.constexpr):
    """One block of BLOCK threads per row: the row in registers when CHUNKS > 0
    (n ≤ BLOCK·VEC·CHUNKS), streamed with an online max/sum when CHUNKS == 0 (any length)."""
    red_m = pyptx.shared.array(32, f32)
    red_s = pyptx.shared.array(32, f32)
    row = block_idx.x
    tid = thread_idx.x
    n = x.shape[1]
    if CHUNKS > 0:
        vals = pyptx.local.array(VEC * CHUNKS, f32)
        load_chunks(vals, x, row, tid, n, NEG_BIG, BLOCK, VEC, CHUNKS)
        m = block_max(chunk_max(vals, VEC, CHUNKS), red_m, BLOCK // 32)
        s = block_sum(exp_in_place(vals, m, tid, n, BLOCK, VEC, CHUNKS), red_s, BLOCK // 32)
        store_scaled(out, vals, row, tid, n, 1.0 / s, BLOCK, VEC, CHUNKS)
    else:
        m = NEG_BIG
        s = 0.0
        for c in range(tid * VEC, n, BLOCK * VEC):
            a, b, d, e = load4(x, (row, c), VEC)
            cm = max(max(a, b), max(d, e)) if VEC == 4 else a
            if cm > m:
                s = s * pyptx.math.exp(m - cm)
                m = cm
            s += pyptx.math.exp(a - m)
            if VEC == 4:
                s += pyptx.math.exp(b - m) + pyptx.math.exp(d - m) + pyptx.math.exp(e - m)
        mx = block_max(m, red_m, BLOCK // 32)
        inv = 1.0 / block_sum(s * pyptx.math.exp(m - mx), red_s, BLOCK // 32)
        for c in range(tid * VEC, n, BLOCK * VEC):
            a, b, d, e = load4(x, (row, c), VEC)
            if VEC == 4:
                store4(out, row, c, pyptx.math.exp(a - mx) * inv, pyptx.math.exp(b - mx) * inv,
                       pyptx.math.exp(d - mx) * inv, pyptx.math.exp(e - mx) * inv, VEC)
            else:
                out[row, c] = pyptx.math.exp(a - mx) * inv


def warp_row_max(vec: int) -> int:
    """The longest row the warp-per-row kernel keeps in registers for chunk width `vec`."""
    return 32 * vec * MAX_CHUNKS


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
