"""Shared pieces of the row kernels (softmax, RMSNorm, LayerNorm; the fused gate/up SwiGLU and
RoPE use the chunk helpers too): launch configuration and rows read with 128-bit loads whatever
their length.

A row is read in *chunks* of 4 floats, each one 128-bit `vload`.  Chunk j of row r covers
columns 4j − h .. 4j − h + 3, where h = r·n mod 4 is how far the row's start lies past a 16-byte
boundary, so every chunk that lies inside the row is aligned (chunk 0 holds the row's head: its
first 4 − h columns).  VEC (a constexpr)
says which case a launch is in: VEC = 4 when n is a multiple of 4 (h = 0 for every row, every
chunk below n is whole: the code has no per-element checks), VEC = 1 otherwise (the first and
last chunk of a row may be partial: those are read and written one element at a time, masked;
every other chunk is one 128-bit access).  Per-column vectors (norm weights) are aligned
differently from the row, so with VEC = 1 they are read one element at a time; so are the 4
columns of a second row that lies on another grid (`load4_masked` / `store4_masked`: x's row
next to a weight row, a NeoX head's second half next to its first).

Thread t of a block of BLOCK threads owns chunks t, t + BLOCK, t + 2·BLOCK, ...; when the row
fits in CHUNKS ≤ 8 chunks per thread (4 with 1024-thread blocks, whose threads have at most 64
registers), the kernel keeps its chunks in registers (`pyptx.local.array` indexed only with
`static_range`) and reads x exactly once; otherwise (CHUNKS = 0) it streams the row.
"""
from __future__ import annotations

from typing import NamedTuple

import pyptx
from pyptx import f32

from ._validate import ceil_div, row_block

#: the most chunks a thread keeps in registers (32 floats) ...
MAX_CHUNKS = 8
#: ... and with 1024 threads, where a thread may use at most 64 registers (65536 per block)
MAX_CHUNKS_1024 = 4


class RowConfig(NamedTuple):
    """Launch plan of a one-block-per-row kernel: threads, VEC (4: rows 16-byte aligned, 1: rows
    with a head and tail), chunks per thread (0 = the row does not fit in registers: stream it)."""
    block: int
    vec: int
    chunks: int


def row_chunks(n: int) -> int:
    """The most 4-float chunks a row of n elements spans (a misaligned row spans up to 3 more
    columns: its head)."""
    return ceil_div(n if n % 4 == 0 else n + 3, 4)


def row_config(n: int, block: int | None = None) -> RowConfig:
    """The plan for rows of n elements (block: threads per row, default `row_block(n)`)."""
    block = block or row_block(n)
    vec = 4 if n % 4 == 0 else 1
    chunks = ceil_div(row_chunks(n), block)
    if chunks > (MAX_CHUNKS_1024 if block >= 1024 else MAX_CHUNKS):
        return RowConfig(block, vec, 0)
    return RowConfig(block, vec, 1 << (chunks - 1).bit_length())     # 1, 2, 4 or 8


@pyptx.func
def row_head(row, n, VEC):
    """How many floats row `row` (of n) starts past a 16-byte boundary: 0 .. 3 (0 with VEC = 4)."""
    if VEC == 4:
        return 0
    return (row * n) & 3                       # the low bits survive an i32 wraparound


@pyptx.func
def in_row(col, n):
    return col >= 0 and col < n


@pyptx.func
def load_row4(x, row, col, n, fill: f32, VEC):
    """x[row, col .. col+4), `fill` for columns outside [0, n): one 128-bit load when all four
    are inside the row (with VEC = 4, whenever col < n)."""
    v0 = fill
    v1 = fill
    v2 = fill
    v3 = fill
    if VEC == 4:
        if col < n:
            v0, v1, v2, v3 = pyptx.vload(x, (row, col), 4)
    else:
        if col >= 0 and col + 4 <= n:
            v0, v1, v2, v3 = pyptx.vload(x, (row, col), 4)
        else:
            v0, v1, v2, v3 = load4_masked(x, row, col, 0, n, fill)
    return v0, v1, v2, v3


@pyptx.func
def load4_masked(x, row, col, off, n, fill: f32):
    """x[row, col+off+e] for e < 4 where column col+e lies in [0, n), `fill` elsewhere: four
    scalar loads.  For a chunk's partial ends, and for 4 columns that lie on another array's
    16-byte grid (fused gate/up: x's row next to a weight row; NeoX RoPE: the second half of a
    head, `off` = head_dim/2 further on)."""
    v0 = fill
    v1 = fill
    v2 = fill
    v3 = fill
    if in_row(col, n):
        v0 = x[row, col + off]
    if in_row(col + 1, n):
        v1 = x[row, col + off + 1]
    if in_row(col + 2, n):
        v2 = x[row, col + off + 2]
    if in_row(col + 3, n):
        v3 = x[row, col + off + 3]
    return v0, v1, v2, v3


@pyptx.func
def store4_masked(out, row, col, off, n, v0: f32, v1: f32, v2: f32, v3: f32):
    """out[row, col+off+e] = v_e for the e < 4 whose column col+e lies in [0, n); the caller
    checked −3 ≤ col < n (so column col+3 ≥ 0 and column col < n need no test)."""
    if col >= 0:
        out[row, col + off] = v0
    if in_row(col + 1, n):
        out[row, col + off + 1] = v1
    if in_row(col + 2, n):
        out[row, col + off + 2] = v2
    if col + 3 < n:
        out[row, col + off + 3] = v3


@pyptx.func
def load_col4(w, col, n, VEC):
    """w[col .. col+4) of a per-column vector (0 outside [0, n)); the caller checked col < n.
    One 128-bit load with VEC = 4; one element at a time with VEC = 1 (w is aligned
    differently from a misaligned row)."""
    if VEC == 4:
        v0, v1, v2, v3 = pyptx.vload(w, col, 4)
        return v0, v1, v2, v3
    v0, v1, v2, v3 = load_col4_masked(w, col, 0, n)
    return v0, v1, v2, v3


@pyptx.func
def load_col4_masked(w, col, off, n):
    """w[off + col + e] for the e < 4 whose col + e lies in [0, n), 0 elsewhere, one element at
    a time (a 1-d vector: norm weights, RoPE's cos/sin table with off = 0 / head_dim/2); the
    caller checked −3 ≤ col < n."""
    v0 = f32(0.0)
    v1 = f32(0.0)
    v2 = f32(0.0)
    v3 = f32(0.0)
    if col >= 0:
        v0 = w[off + col]
    if col + 1 >= 0 and col + 1 < n:
        v1 = w[off + col + 1]
    if col + 2 >= 0 and col + 2 < n:
        v2 = w[off + col + 2]
    if col + 3 < n:
        v3 = w[off + col + 3]
    return v0, v1, v2, v3


@pyptx.func
def store_row4(out, row, col, n, v0: f32, v1: f32, v2: f32, v3: f32, VEC):
    """out[row, col .. col+4) = (v0, v1, v2, v3) for the columns inside [0, n); the caller
    checked col < n.  One 128-bit store when all four are inside the row."""
    if VEC == 4:
        pyptx.vstore(out, (row, col), (v0, v1, v2, v3))
    else:
        if col >= 0 and col + 4 <= n:
            pyptx.vstore(out, (row, col), (v0, v1, v2, v3))
        else:
            store4_masked(out, row, col, 0, n, v0, v1, v2, v3)


@pyptx.func
def load_chunks(vals, x, row, t, n, h, fill: f32, STRIDE, VEC, CHUNKS):
    """vals[4k .. 4k+4) = chunk t + k·STRIDE of the row for k < CHUNKS, `fill` outside it."""
    for k in pyptx.static_range(CHUNKS):
        v0, v1, v2, v3 = load_row4(x, row, (t + k * STRIDE) * 4 - h, n, fill, VEC)
        vals[4 * k] = v0
        vals[4 * k + 1] = v1
        vals[4 * k + 2] = v2
        vals[4 * k + 3] = v3


@pyptx.func
def chunk_in_row(vals, i, col, n, VEC):
    """vals[i], or 0 when its column col is outside the row (only possible with VEC = 1)."""
    if VEC == 4:
        return vals[i]
    return vals[i] if in_row(col, n) else f32(0.0)
