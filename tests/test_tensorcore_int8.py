"""int8 tensor cores: `mma_sync(atype="s8"|"u8")` (PTX mma.sync m16n8k32 .s32.s8.s8.s32 /
.u8) and `ldmatrix` on 8-bit shared arrays, on the CPU executor against numpy int64 matmul.

The fragment layouts are written out here from the PTX ISA's m16n8k32 (.s8/.u8) tables, with
groupID g = lane >> 2 and threadID_in_group t = lane % 4 (byte 0 of a register = bits 0..7):

    A 16x32 row-major: a0 = A[g, 4t..4t+3]   a1 = A[g+8, 4t..4t+3]
                       a2 = A[g, 16+4t..]    a3 = A[g+8, 16+4t..]
    B 32x8 "col":      b0 = B[4t..4t+3, g]   b1 = B[16+4t..16+4t+3, g]
    C/D 16x8 s32:      c0 = C[g, 2t]  c1 = C[g, 2t+1]  c2 = C[g+8, 2t]  c3 = C[g+8, 2t+1]

and the m16n8k16 form (a 2-tuple a, a 1-tuple b): a0 = A[g, 4t..4t+3], a1 = A[g+8, 4t..4t+3],
b0 = B[4t..4t+3, g] (A 16x16, B 16x8), C/D as above.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from pyptx import i8, i32, thread_idx, u8, u32

from kernel_factory import make_kernel

rng = np.random.default_rng(20261126)


def _word(four_bytes) -> int:
    """Four 8-bit values (s8 or u8) -> the u32 register, first value in bits 0..7."""
    b = np.asarray(four_bytes).astype(np.int64) & 0xFF
    return int(b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24)


def _fragments(A, B, C):
    """Per-lane register tables from the ISA layout above (independent of the executor)."""
    a = np.zeros((32, 4), np.uint32)
    b = np.zeros((32, 2), np.uint32)
    c = np.zeros((32, 4), np.int32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        a[lane] = [_word(A[g, 4 * t:4 * t + 4]), _word(A[g + 8, 4 * t:4 * t + 4]),
                   _word(A[g, 16 + 4 * t:20 + 4 * t]), _word(A[g + 8, 16 + 4 * t:20 + 4 * t])]
        b[lane] = [_word(B[4 * t:4 * t + 4, g]), _word(B[16 + 4 * t:20 + 4 * t, g])]
        c[lane] = [C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]]
    return a, b, c


def _d_of(out):
    """Lane outputs (32, 4) -> the 16x8 D they hold, by the C/D table."""
    D = np.zeros((16, 8), np.int64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1] = out[lane]
    return D


def _wrap32(x):
    """int64 -> the s32 that holds x modulo 2**32 (what the non-.satfinite form returns)."""
    return ((np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


@pyptx.kernel
def mma8_direct(out: i32[:, :], a: u32[:, :], b: u32[:, :], c: i32[:, :],
                unsigned: pyptx.constexpr):
    l = thread_idx.x
    d = pyptx.mma_sync((a[l, 0], a[l, 1], a[l, 2], a[l, 3]), (b[l, 0], b[l, 1]),
                       (c[l, 0], c[l, 1], c[l, 2], c[l, 3]), atype="u8" if unsigned else "s8")
    for k in pyptx.static_range(4):
        out[l, k] = d[k]


def _operands(kind, lo_hi=None):
    lo, hi = lo_hi or ((-128, 128) if kind == "s8" else (0, 256))
    A = rng.integers(lo, hi, (16, 32))
    B = rng.integers(lo, hi, (32, 8))
    C = rng.integers(-2**20, 2**20, (16, 8))
    return A, B, C


@pytest.mark.parametrize("kind", ["s8", "u8"])
def test_mma_int8_register_layout(kind):
    A, B, C = _operands(kind)
    a, b, c = _fragments(A, B, C)
    out = np.zeros((32, 4), np.int32)
    mma8_direct[1, 32](out, a, b, c, kind == "u8")
    np.testing.assert_array_equal(_d_of(out), A @ B + C)     # exact: |A@B| < 2**21


@pytest.mark.parametrize("kind", ["s8", "u8"])
def test_mma_int8_extremes_and_wraparound(kind):
    """All-extreme inputs (|sum| = 32·128·128 = 2**19 for s8, 32·255² for u8) and an
    accumulator near the s32 limits: the result wraps modulo 2**32 (no .satfinite)."""
    ext = -128 if kind == "s8" else 255
    A = np.full((16, 32), ext)
    B = np.full((32, 8), ext)
    A[3] = 127 if kind == "s8" else 0
    C = np.full((16, 8), 2**31 - 1 - 1000, np.int64)
    C[8:] = -2**31 + 5
    a, b, c = _fragments(A, B, C.astype(np.int32))
    out = np.zeros((32, 4), np.int32)
    mma8_direct[1, 32](out, a, b, c, kind == "u8")
    want = _wrap32(A @ B + C)
    assert (A @ B + C != want).any()                          # some entries really wrap
    np.testing.assert_array_equal(_d_of(out), want)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["s8", "u8"]), st.integers(0, 2**32 - 1))
def test_mma_int8_random(kind, seed):
    r = np.random.default_rng(seed)
    lo, hi = (-128, 128) if kind == "s8" else (0, 256)
    A, B = r.integers(lo, hi, (16, 32)), r.integers(lo, hi, (32, 8))
    C = r.integers(-2**31, 2**31, (16, 8))
    a, b, c = _fragments(A, B, C.astype(np.int32))
    out = np.zeros((32, 4), np.int32)
    mma8_direct[1, 32](out, a, b, c, kind == "u8")
    np.testing.assert_array_equal(_d_of(out), _wrap32(A @ B + C))


@pyptx.kernel
def mma8_k16(out: i32[:, :], a: u32[:, :], b: u32[:], c: i32[:, :], unsigned: pyptx.constexpr):
    l = thread_idx.x
    d = pyptx.mma_sync((a[l, 0], a[l, 1]), (b[l],), (c[l, 0], c[l, 1], c[l, 2], c[l, 3]),
                       atype="u8" if unsigned else "s8")
    for k in pyptx.static_range(4):
        out[l, k] = d[k]


@pytest.mark.parametrize("kind", ["s8", "u8"])
def test_mma_int8_k16_register_layout(kind):
    lo, hi = (-128, 128) if kind == "s8" else (0, 256)
    A, B = rng.integers(lo, hi, (16, 16)), rng.integers(lo, hi, (16, 8))
    C = rng.integers(-2**31, 2**31, (16, 8))
    a = np.zeros((32, 2), np.uint32)
    b = np.zeros(32, np.uint32)
    c = np.zeros((32, 4), np.int32)
    for lane in range(32):          # the ISA's m16n8k16 .s8/.u8 table, written out
        g, t = lane // 4, lane % 4
        a[lane] = [_word(A[g, 4 * t:4 * t + 4]), _word(A[g + 8, 4 * t:4 * t + 4])]
        b[lane] = _word(B[4 * t:4 * t + 4, g])
        c[lane] = [C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]]
    out = np.zeros((32, 4), np.int32)
    mma8_k16[1, 32](out, a, b, c, kind == "u8")
    np.testing.assert_array_equal(_d_of(out), _wrap32(A @ B + C))


# ---- ldmatrix on 8-bit tiles + mma = int8 matmul -------------------------------------------

@pyptx.kernel
def warp_matmul8(out: i32[:, :], a: i8[:, :], bt: i8[:, :]):
    """out (16x8) = a (16x32, row-major) @ bt.T (bt is B stored [n][k], K contiguous).  An 8x8
    b16 matrix of ldmatrix is 8 rows x 16 bytes = an 8x16 int8 tile: x4 on A gives a0..a3 (rows
    0..7 / 8..15 by bytes 0..15 / 16..31), x2 on B gives b0 (k 0..15) and b1 (k 16..31)."""
    sa = pyptx.shared.array((16, 32), i8)
    sb = pyptx.shared.array((8, 32), i8)
    l = thread_idx.x
    for e in range(l, 512, 32):
        sa[e // 32, e % 32] = a[e // 32, e % 32]
    for e in range(l, 256, 32):
        sb[e // 32, e % 32] = bt[e // 32, e % 32]
    pyptx.syncthreads()
    fa = pyptx.ldmatrix(sa, (l % 16, (l // 16) * 16), count=4)
    fb = pyptx.ldmatrix(sb, (l % 8, ((l // 8) % 2) * 16), count=2)
    d = pyptx.mma_sync(fa, fb, (0, 0, 0, 0), atype="s8")
    g = l // 4
    t = l % 4
    out[g, 2 * t] = d[0]
    out[g, 2 * t + 1] = d[1]
    out[g + 8, 2 * t] = d[2]
    out[g + 8, 2 * t + 1] = d[3]


def test_ldmatrix_int8_tiles_feed_mma():
    A = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    Bt = rng.integers(-128, 128, (8, 32)).astype(np.int8)
    out = np.zeros((16, 8), np.int32)
    warp_matmul8[1, 32](out, A, Bt)
    np.testing.assert_array_equal(out, A.astype(np.int64) @ Bt.T.astype(np.int64))


@pyptx.kernel
def ldmatrix8_lanes(out: u32[:, :], m: u8[:, :]):
    """Four 8x16-byte matrices: rows 8i..8i+7 of m (a [32, 16] u8 array)."""
    s = pyptx.shared.array((32, 16), u8)
    l = thread_idx.x
    for c in range(16):
        s[l, c] = m[l, c]
    pyptx.syncthreads()
    r = pyptx.ldmatrix(s, (l, 0), count=4)
    for i in pyptx.static_range(4):
        out[l, i] = r[i]


def test_ldmatrix_int8_layout():
    """Lane (g, t) gets bytes 4t..4t+3 of row g of each matrix (the b16 layout's two 16-bit
    elements 2t, 2t+1 are those four bytes)."""
    m = rng.integers(0, 256, (32, 16)).astype(np.uint8)
    out = np.zeros((32, 4), np.uint32)
    ldmatrix8_lanes[1, 32](out, m)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            assert out[lane, i] == _word(m[8 * i + g, 4 * t:4 * t + 4]), (lane, i)


@pyptx.kernel
def ldmatrix8_at(out: u32[:], m: u8[:, :], col: i32):
    s = pyptx.shared.array((8, 32), u8)
    l = thread_idx.x
    for c in range(8):
        s[l // 4, (l % 4) * 8 + c] = m[l // 4, (l % 4) * 8 + c]
    pyptx.syncthreads()
    r = pyptx.ldmatrix(s, (l % 8, col), count=1)
    out[l] = r[0]


def test_ldmatrix_int8_row_must_be_16_byte_aligned(cpu_device):
    m = rng.integers(0, 256, (8, 32)).astype(np.uint8)
    out = np.zeros(32, np.uint32)
    ldmatrix8_at[1, 32](out, m, 16)
    with pytest.raises(pyptx.MemoryFault):
        ldmatrix8_at[1, 32](out, m, 4)            # 4-byte offset: not a 16-byte row address


# ---- ptxas and compile errors ---------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind", ["s8", "u8"])
def test_ptxas_accepts_int8_mma(arch, kind):
    from pyptx.toolchain import assemble, find_ptxas
    ck = pyptx.compile(mma8_direct, arch=arch, constexprs={"unsigned": kind == "u8"})
    assert f"mma.sync.aligned.m16n8k32.row.col.s32.{kind}.{kind}.s32" in ck.ptx
    ck2 = pyptx.compile(warp_matmul8, arch=arch)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ck2.ptx
    ck3 = pyptx.compile(mma8_k16, arch=arch, constexprs={"unsigned": kind == "u8"})
    assert f"mma.sync.aligned.m16n8k16.row.col.s32.{kind}.{kind}.s32" in ck3.ptx
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    for c in (ck, ck2, ck3):
        assemble(c.ptx, arch)


def _compile_body(body: str):
    src = ("import pyptx\nfrom pyptx import f32, u32, i32\n"
           "@pyptx.kernel\ndef k(o: i32[:], w: u32[:], f: f32[:]):\n"
           "    x = w[0]\n    y = o[0]\n    z = f[0]\n" + body)
    return pyptx.compile(make_kernel(src, "k"), arch="sm_80")


@pytest.mark.parametrize("body, msg", [
    ("    r = pyptx.mma_sync((x, x, x, x), (x, x), (z, z, z, z), atype='s8')\n",
     "32-bit integer accumulator"),
    ("    r = pyptx.mma_sync((x, x, x, x), (x, x), (y, y, y), atype='u8')\n", "tuple of 4"),
    ("    r = pyptx.mma_sync((x, x, x), (x, x), (y, y, y, y), atype='s8')\n", "tuple of 4"),
    ("    r = pyptx.mma_sync((x, x, x, x), (x,), (y, y, y, y), atype='s8')\n", "tuple of 2"),
    ("    r = pyptx.mma_sync((x, x), (x, x), (y, y, y, y), atype='s8')\n", "tuple of 1"),
    ("    r = pyptx.mma_sync((x, x), (x,), (y, y, y, y), atype='f16')\n", "tuple of 4"),
    ("    r = pyptx.mma_sync((x, x, x, x), (x, x), (y, y, y, y), atype='s4')\n",
     "s8 or u8"),
    ("    r = pyptx.mma_sync((x, x, x, x), (x, x), (y, y, y, y), atype='f16')\n",
     "float accumulator"),
    ("    r = pyptx.mma_sync((z, x, x, x), (x, x), (y, y, y, y), atype='s8')\n",
     "32-bit integer word"),
])
def test_bad_int8_arguments_are_compile_errors(body, msg):
    with pytest.raises(pyptx.CompileError, match=msg) as e:
        _compile_body(body)
    assert ":" in str(e.value)          # file:line:col


def test_int8_results_are_i32_values():
    """d[k] of an s8 mma is an i32: it feeds integer arithmetic and f32() conversion."""
    ck = pyptx.compile(mma8_direct, arch="sm_80", constexprs={"unsigned": False})
    assert "st.global.u32" in ck.ptx or "st.global.s32" in ck.ptx or "st.global.b32" in ck.ptx
