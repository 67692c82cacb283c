"""Tensor-core GEMM: C (float32) = A @ B for float16 or bfloat16 A [m, k] and B [k, n].

A block of 128 threads (4 warps, 2 x 2) owns a 64 x 64 tile of C and walks K in steps of 32.
Each step's A [64 x 32] and B [32 x 64] tiles are copied global -> shared with `cp_async`
(16 bytes a copy, two stages: the next tile is in flight while this one is multiplied), then each
warp multiplies its 32 x 32 sub-tile as 2 x 4 m16n8k16 MMAs per 16 of K, fragments loaded with
`ldmatrix` (B with `.trans`, since B is stored K-major).  Shared rows are padded by 8 halves so
the 8 row addresses of one `ldmatrix` phase fall in different banks.

Any shape works.  When the rows are 16-byte aligned (`k % 8 == 0` for A, `n % 8 == 0` for B)
every chunk is one 16-byte `cp_async` in its zero-fill form: a chunk that crosses the edge
reads only the bytes inside the matrix and the rest of it lands as zeros, so edge tiles take
the same path as interior ones.  Otherwise every chunk is copied element by element through
ordinary shared stores, zeros past the edges.  Products are exact and accumulate in float32
(docs/tensor-cores.md).
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u16

from . import _validate as V
from ._args import result

BM, BN, BK = 64, 64, 32
PAD = 8                      # halves of padding per shared row (keeps rows 16-byte aligned)
THREADS = 128


@pyptx.func
def _stage_a(sa: u16[:, :, :], a: u16[:, :], st: i32, m0: i32, k0: i32, tid: i32,
             vec: pyptx.constexpr):
    """Copy A[m0:m0+64, k0:k0+32] into stage `st` (two 8-half chunks per thread)."""
    for i in pyptx.static_range(2):
        c = tid + THREADS * i
        _chunk(sa, st, c >> 2, (c & 3) * 8, a, m0 + (c >> 2), k0 + (c & 3) * 8, vec)


@pyptx.func
def _stage_b(sb: u16[:, :, :], b: u16[:, :], st: i32, k0: i32, n0: i32, tid: i32,
             vec: pyptx.constexpr):
    """Copy B[k0:k0+32, n0:n0+64] into stage `st` (two 8-half chunks per thread)."""
    for i in pyptx.static_range(2):
        c = tid + THREADS * i
        _chunk(sb, st, c >> 3, (c & 7) * 8, b, k0 + (c >> 3), n0 + (c & 7) * 8, vec)


@pyptx.func
def _chunk(s: u16[:, :, :], st: i32, r: i32, col: i32, x: u16[:, :], gr: i32, gc: i32,
           vec: pyptx.constexpr):
    """x[gr, gc:gc+8] -> s[st, r, col:col+8], zeros past the edges of x.  vec: one 16-byte
    zero-fill cp_async (rows 16-byte aligned); else element by element."""
    rows = x.shape[0]
    cols = x.shape[1]
    if vec:
        nb = min(max(cols - gc, 0), 8) * 2 if gr < rows else 0
        pyptx.cp_async(s, (st, r, col), x, (gr, gc), 16, nb)
    else:
        for e in pyptx.static_range(8):
            s[st, r, col + e] = x[gr, gc + e] if (gr < rows and gc + e < cols) else 0


@pyptx.func
def _store2(c: f32[:, :], row: i32, col: i32, v0: f32, v1: f32):
    m = c.shape[0]
    n = c.shape[1]
    if row < m:
        if col < n:
            c[row, col] = v0
        if col + 1 < n:
            c[row, col + 1] = v1


@pyptx.func
def _store_tile(c: f32[:, :], row: i32, col: i32, d: f32, e: f32, g: f32, h: f32):
    """One m16n8 accumulator fragment: (d, e) at row, (g, h) at row + 8."""
    _store2(c, row, col, d, e)
    _store2(c, row + 8, col, g, h)


@pyptx.kernel
def gemm_tc_kernel(c: f32[:, :], a: u16[:, :], b: u16[:, :], bf: pyptx.constexpr,
                   a_vec: pyptx.constexpr, b_vec: pyptx.constexpr):
    """c = a @ b; a, b hold f16 (bf False) or bf16 (bf True) bit patterns."""
    sa = pyptx.shared.array((2, BM, BK + PAD), u16)
    sb = pyptx.shared.array((2, BK, BN + PAD), u16)
    k = a.shape[1]
    tid = thread_idx.x
    lane = tid & 31                 # shifts and masks: tid is never negative
    warp = tid >> 5
    wm = (warp >> 1) * 32
    wn = (warp & 1) * 32
    m0 = block_idx.y * BM
    n0 = block_idx.x * BN
    lr = lane & 15
    lc = (lane >> 4) * 8
    z = (0.0, 0.0, 0.0, 0.0)
    c00 = z
    c01 = z
    c02 = z
    c03 = z
    c10 = z
    c11 = z
    c12 = z
    c13 = z
    ntiles = (k + BK - 1) // BK
    _stage_a(sa, a, 0, m0, 0, tid, a_vec)
    _stage_b(sb, b, 0, 0, n0, tid, b_vec)
    pyptx.cp_async_wait(1)
    for t in range(ntiles):
        s = t & 1
        if t + 1 < ntiles:
            _stage_a(sa, a, 1 - s, m0, (t + 1) * BK, tid, a_vec)
            _stage_b(sb, b, 1 - s, (t + 1) * BK, n0, tid, b_vec)
        pyptx.cp_async_wait(1)
        pyptx.syncthreads()
        for ks in pyptx.static_range(BK // 16):
            kk = ks * 16
            a0 = pyptx.ldmatrix(sa, (s, wm + lr, kk + lc), count=4)
            a1 = pyptx.ldmatrix(sa, (s, wm + 16 + lr, kk + lc), count=4)
            b01 = pyptx.ldmatrix(sb, (s, kk + lr, wn + lc), count=4, trans=True)
            b23 = pyptx.ldmatrix(sb, (s, kk + lr, wn + 16 + lc), count=4, trans=True)
            c00 = pyptx.mma_sync(a0, (b01[0], b01[1]), c00, atype="bf16" if bf else "f16")
            c01 = pyptx.mma_sync(a0, (b01[2], b01[3]), c01, atype="bf16" if bf else "f16")
            c02 = pyptx.mma_sync(a0, (b23[0], b23[1]), c02, atype="bf16" if bf else "f16")
            c03 = pyptx.mma_sync(a0, (b23[2], b23[3]), c03, atype="bf16" if bf else "f16")
            c10 = pyptx.mma_sync(a1, (b01[0], b01[1]), c10, atype="bf16" if bf else "f16")
            c11 = pyptx.mma_sync(a1, (b01[2], b01[3]), c11, atype="bf16" if bf else "f16")
            c12 = pyptx.mma_sync(a1, (b23[0], b23[1]), c12, atype="bf16" if bf else "f16")
            c13 = pyptx.mma_sync(a1, (b23[2], b23[3]), c13, atype="bf16" if bf else "f16")
        pyptx.syncthreads()         # stage s is done: the next step copies tile t + 2 into it
    row = m0 + wm + (lane >> 2)
    col = n0 + wn + (lane & 3) * 2
    _store_tile(c, row, col, c00[0], c00[1], c00[2], c00[3])
    _store_tile(c, row, col + 8, c01[0], c01[1], c01[2], c01[3])
    _store_tile(c, row, col + 16, c02[0], c02[1], c02[2], c02[3])
    _store_tile(c, row, col + 24, c03[0], c03[1], c03[2], c03[3])
    _store_tile(c, row + 16, col, c10[0], c10[1], c10[2], c10[3])
    _store_tile(c, row + 16, col + 8, c11[0], c11[1], c11[2], c11[3])
    _store_tile(c, row + 16, col + 16, c12[0], c12[1], c12[2], c12[3])
    _store_tile(c, row + 16, col + 24, c13[0], c13[1], c13[2], c13[3])


#: the fix for a uint16 array of bit patterns where float16/bfloat16 is needed
_FROM_BITS = ("; pass ml_dtypes.bfloat16 or float16 arrays (x.view(ml_dtypes.bfloat16) or "
              "x.view(np.float16) for uint16 bit patterns)")


def half_dtype(fn: str, name: str, value, ndims: tuple[int, ...]) -> bool:
    """Check that `value` is a float16 or bfloat16 array (numpy, ml_dtypes.bfloat16, or a
    DeviceArray of either) with one of `ndims` dimensions; returns is_bf16."""
    if not (isinstance(value, np.ndarray) or V.is_device(value)):
        raise TypeError(f"{fn}: {name} must be a float16 or bfloat16 array ({V.ARRAY_KINDS}), "
                        f"got {type(value).__name__}")
    if value.dtype == np.float16:
        bf = False
    elif value.dtype.name == "bfloat16":
        bf = True
    elif value.dtype == np.uint16:
        raise TypeError(f"{fn}: {name} must have dtype float16 or bfloat16, got uint16"
                        f"{_FROM_BITS}")
    else:
        raise TypeError(f"{fn}: {name} must have dtype float16 or bfloat16, got {value.dtype}; "
                        f"convert with .astype(np.float16)")
    if value.ndim not in ndims:
        raise ValueError(f"{fn}: {name} must have {' or '.join(map(str, ndims))} dimensions, "
                         f"got shape {tuple(value.shape)}")
    if any(d > 2**31 - 1 for d in value.shape):
        raise ValueError(f"{fn}: {name} has a dimension over 2**31-1 ({tuple(value.shape)})")
    return bf


def bits(x):
    """A float16/bfloat16 array (numpy or DeviceArray) as C-contiguous uint16 bit patterns,
    without a copy where it is contiguous already (a DeviceArray always is)."""
    if V.is_device(x):
        return x.view(np.uint16)
    return np.ascontiguousarray(x).view(np.uint16)


def half_bits(fn: str, name: str, value, ndims: tuple[int, ...]):
    """A float16 or bfloat16 array -> (C-contiguous uint16 bit patterns, is_bf16): a numpy
    view (bfloat16 is ml_dtypes') or, for a DeviceArray, a DeviceArray view."""
    bf = half_dtype(fn, name, value, ndims)
    return bits(value), bf


def same_place(fn: str, name: str, value, like, like_name: str) -> None:
    """`value` lives where `like` does (both host arrays, or both DeviceArrays)."""
    if V.is_device(value) != V.is_device(like):
        where = lambda x: "a DeviceArray" if V.is_device(x) else "a host array"  # noqa: E731
        raise ValueError(f"{fn}: {name} is {where(value)} but {like_name} is {where(like)}; "
                         f"pass all of them on the host or all on the device")


def gemm_tc_bits(a, b, bf: bool, c=None):
    """C = A @ B (float32) for uint16 arrays of f16 (bf False) or bf16 (bf True) bit patterns
    (numpy or DeviceArrays); `c`: the [m, n] float32 result to write (default: a new numpy
    array)."""
    m, k = a.shape
    n = b.shape[1]
    if c is None:
        c = np.empty((m, n), np.float32)
    if m == 0 or n == 0:
        return c
    if k == 0 and not V.is_device(c):
        c[...] = 0.0
        return c
    # k == 0 on the device: the kernel stages zero-filled tiles only (nothing is read) and
    # stores its zero accumulators, so the result is written where it lives
    grid = (V.ceil_div(n, BN), V.ceil_div(m, BM))
    gemm_tc_kernel[grid, THREADS](c, a, b, bool(bf), k % 8 == 0, n % 8 == 0)
    return c


def gemm_tensor_core(a, b, out=None):
    """gemm(a, b, variant="tensor_core"): float16 (or bfloat16) inputs, float32 result (in
    `out` when given; a DeviceArray for DeviceArray inputs)."""
    a16, abf = half_bits("gemm", "a", a, (2,))
    b16, bbf = half_bits("gemm", "b", b, (2,))
    if abf != bbf:
        raise TypeError(f"gemm: a and b must have the same dtype for variant='tensor_core', got "
                        f"{a.dtype} and {b.dtype}")
    same_place("gemm", "b", b, a, "a")
    if a16.shape[1] != b16.shape[0]:
        raise ValueError(f"gemm: b must have {a16.shape[1]} rows (a's columns), got shape "
                         f"{tuple(b16.shape)}")
    c = result("gemm", out, (a16.shape[0], b16.shape[1]), np.float32, a)
    return gemm_tc_bits(a16, b16, abf, c)
