"""Shared pieces of the row kernels (softmax, RMSNorm, LayerNorm): launch configuration and
register-resident rows read with 128-bit loads.

A row of n float32 is read in *chunks* of VEC elements: VEC = 4 (one 128-bit `vload`) when n is a
multiple of 4, so that every row starts 16-byte aligned, else VEC = 1.  Thread t of a block of
BLOCK threads owns chunks t, t + BLOCK, t + 2·BLOCK, ...; when the row fits in CHUNKS ≤ 8 chunks
per thread (4 with 1024-thread blocks, whose threads have at most 64 registers), the kernel keeps
its chunks in registers (`pyptx.local.array` indexed only with
`static_range`) and reads x exactly once; otherwise (CHUNKS = 0) it streams the row.
"""
from __future__ import annotations

from typing import NamedTuple

import pyptx
from pyptx import f32

from ._validate import ceil_div, row_block

#: the most chunks a thread keeps in registers (32 floats with 128-bit chunks) ...
MAX_CHUNKS = 8
#: ... and with 1024 threads, where a thread may use at most 64 registers (65536 per block)
MAX_CHUNKS_1024 = 4


class RowConfig(NamedTuple):
    """Launch plan of a one-block-per-row kernel: threads, chunk width, chunks per thread
    (0 = the row does not fit in registers: stream it)."""
    block: int
    vec: int
    chunks: int


def row_config(n: int, block: int | None = None) -> RowConfig:
    """The plan for rows of n elements (block: threads per row, default `row_block(n)`)."""
    block = block or row_block(n)
    vec = 4 if n % 4 == 0 else 1
    chunks = ceil_div(n, block * vec)
    if chunks > (MAX_CHUNKS_1024 if block >= 1024 else MAX_CHUNKS):
        return RowConfig(block, vec, 0)
    return RowConfig(block, vec, 1 << (chunks - 1).bit_length())     # 1, 2, 4 or 8


@pyptx.func
def load_chunks(vals, x, row, t, n, fill: f32, STRIDE, VEC, CHUNKS):
    """vals[k·VEC + e] = x[row, (t + k·STRIDE)·VEC + e] for k < CHUNKS, `fill` past the row end."""
    for k in pyptx.static_range(CHUNKS):
        c = (t + k * STRIDE) * VEC
        if c < n:
            v = pyptx.vload(x, (row, c), VEC)
            for e in pyptx.static_range(VEC):
                vals[k * VEC + e] = v[e]
        else:
            for e in pyptx.static_range(VEC):
                vals[k * VEC + e] = fill


@pyptx.func
def store4(out, row, c, v0: f32, v1: f32, v2: f32, v3: f32, VEC):
    """out[row, c .. c+VEC) = (v0, v1, v2, v3)[:VEC] as one access."""
    if VEC == 4:
        pyptx.vstore(out, (row, c), (v0, v1, v2, v3))
    else:
        out[row, c] = v0


@pyptx.func
def load4(a, index, VEC):
    """(a[index], ... 3 more along the last axis) as one 128-bit load when VEC == 4;
    (a[index], 0, 0, 0) when VEC == 1, so callers are written once for both widths.  `index` is
    `c` for a 1-d array, `(row, c)` for a 2-d one."""
    if VEC == 4:
        v0, v1, v2, v3 = pyptx.vload(a, index, 4)
        return v0, v1, v2, v3
    return a[index], f32(0.0), f32(0.0), f32(0.0)
