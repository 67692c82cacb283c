"""Tensor-core intrinsics on the CPU executor: ldmatrix/mma fragment layouts lane by lane, mma
against numpy matmul (f16 and bf16, trans and not), pack2/unpack2, bf16 conversions, cp_async."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import pyptx
from pyptx import bf16, f16, f32, i32, thread_idx, u16, u32
from pyptx.bfloat16 import from_bf16, to_bf16

from kernel_factory import make_kernel

rng = np.random.default_rng(20261123)


def _halves(kind, shape):
    """Random f16 / bf16 matrix as (uint16 bits, float64 values)."""
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "f16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float64)
    b = to_bf16(x)
    return b, from_bf16(b).astype(np.float64)


# ---- fragment layouts, lane by lane --------------------------------------------------------

@pyptx.kernel
def ldmatrix_lanes(out: u32[:, :], m: u16[:, :], trans: pyptx.constexpr):
    """Each lane loads four 8x8 matrices (rows 8i..8i+7 of `m`, an [32, 8] array) and writes
    its four registers."""
    s = pyptx.shared.array((32, 8), u16)
    l = thread_idx.x
    for c in range(8):
        s[l, c] = m[l, c]
    pyptx.syncthreads()
    r = pyptx.ldmatrix(s, (l, 0), count=4, trans=trans)
    for i in pyptx.static_range(4):
        out[l, i] = r[i]


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragment_layout(trans):
    bits = rng.integers(0, 2**16, size=(32, 8), dtype=np.uint16)
    out = np.full((32, 4), 0xDEADBEEF, np.uint32)
    ldmatrix_lanes[1, 32](out, bits, trans)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            mat = bits[8 * i:8 * i + 8]
            if trans:
                mat = mat.T
            want = int(mat[g, 2 * t]) | int(mat[g, 2 * t + 1]) << 16
            assert out[lane, i] == want, (lane, i)


@pyptx.kernel
def mma_direct(out: f32[:, :], a: u32[:, :], b: u32[:, :], c: f32[:, :], bf: pyptx.constexpr):
    """Fragments read straight from per-lane tables: checks mma's own register layout."""
    l = thread_idx.x
    d = pyptx.mma_sync((a[l, 0], a[l, 1], a[l, 2], a[l, 3]), (b[l, 0], b[l, 1]),
                       (c[l, 0], c[l, 1], c[l, 2], c[l, 3]), atype="bf16" if bf else "f16")
    for k in pyptx.static_range(4):
        out[l, k] = d[k]


def _pack(lo, hi):
    return lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mma_register_layout(kind):
    A, Av = _halves(kind, (16, 16))
    B, Bv = _halves(kind, (16, 8))
    C = rng.standard_normal((16, 8)).astype(np.float32)
    a = np.zeros((32, 4), np.uint32)
    b = np.zeros((32, 2), np.uint32)
    c = np.zeros((32, 4), np.float32)
    for lane in range(32):       # the PTX ISA's m16n8k16 tables, written out independently
        g, t = lane // 4, lane % 4
        for k in range(4):
            r, col = g + 8 * (k % 2), 2 * t + 8 * (k // 2)
            a[lane, k] = _pack(A[r, col], A[r, col + 1])
            c[lane, k] = C[g + 8 * (k // 2), 2 * t + k % 2]
        for k in range(2):
            b[lane, k] = _pack(B[2 * t + 8 * k, g], B[2 * t + 8 * k + 1, g])
    out = np.full((32, 4), np.nan, np.float32)
    mma_direct[1, 32](out, a, b, c, kind == "bf16")
    D = Av @ Bv + C
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for k in range(4):
            want = D[g + 8 * (k // 2), 2 * t + k % 2]
            assert out[lane, k] == pytest.approx(want, rel=1e-6, abs=1e-6), (lane, k)


# ---- ldmatrix + mma = matmul -----------------------------------------------------------------

@pyptx.kernel
def warp_matmul(out: f32[:, :, :], a: u16[:, :, :], b: u16[:, :, :], c: f32[:, :, :],
                bf: pyptx.constexpr, btrans: pyptx.constexpr):
    """Warp w computes out[w] = a[w] (16x16) @ B + c[w]; B is b[w] as [n][k] (btrans False)
    or as [k][n] (btrans True, loaded with ldmatrix .trans)."""
    sa = pyptx.shared.array((4, 16, 16), u16)
    sb = pyptx.shared.array((4, 16, 16), u16)
    w = thread_idx.x // 32
    l = thread_idx.x % 32
    for e in range(l, 256, 32):
        sa[w, e // 16, e % 16] = a[w, e // 16, e % 16]
    nb = 128
    for e in range(l, nb, 32):
        if btrans:
            sb[w, e // 8, e % 8] = b[w, e // 8, e % 8]
        else:
            sb[w, e // 16, e % 16] = b[w, e // 16, e % 16]
    pyptx.syncthreads()
    fa = pyptx.ldmatrix(sa, (w, l % 16, (l // 16) * 8), count=4)
    if btrans:
        fb = pyptx.ldmatrix(sb, (w, l % 16, 0), count=2, trans=True)
    else:
        fb = pyptx.ldmatrix(sb, (w, l % 8, ((l // 8) % 2) * 8), count=2)
    g = l // 4
    t = l % 4
    d = pyptx.mma_sync(fa, fb, (c[w, g, 2 * t], c[w, g, 2 * t + 1], c[w, g + 8, 2 * t],
                                c[w, g + 8, 2 * t + 1]), atype="bf16" if bf else "f16")
    out[w, g, 2 * t] = d[0]
    out[w, g, 2 * t + 1] = d[1]
    out[w, g + 8, 2 * t] = d[2]
    out[w, g + 8, 2 * t + 1] = d[3]


def assert_mma_close(out, Av, Bv, C):
    """out == Av @ Bv + C within the f32 accumulation bound.  f16/bf16 products are exact in
    f32 (11 + 11 or 8 + 8 significand bits), so the only error is summing K = 16 products and c:
    at most (K + 1)·2^-24·(Σ_k |a_k b_k| + |c|) per element, whatever order and rounding the
    tensor core uses (PTX leaves both unspecified; on an H100 a result of -0.0094 came out
    1.4e-6 relative off, past the old rtol 1e-6, well inside this bound).  The CPU executor,
    which sums in order with round-to-nearest, uses ~3 % of it."""
    ref = Av @ Bv + C
    bound = 17 * 2.0**-24 * (np.abs(Av) @ np.abs(Bv) + np.abs(C))
    fin = np.isfinite(ref)
    assert (np.abs(out[fin] - ref[fin]) <= bound[fin]).all(), np.abs(out - ref)[fin].max()


@pytest.mark.parametrize("kind", ["f16", "bf16"])
@pytest.mark.parametrize("btrans", [False, True])
def test_ldmatrix_mma_matches_numpy(kind, btrans):
    warps = 4
    A, Av = _halves(kind, (warps, 16, 16))
    B, Bv = _halves(kind, (warps, 16, 8))          # [k][n]
    C = rng.standard_normal((warps, 16, 8)).astype(np.float32)
    bt = np.zeros((warps, 16, 16), np.uint16)
    if btrans:
        bt[:, :, :8] = B
    else:
        bt[:, :8, :] = B.transpose(0, 2, 1)
    out = np.full((warps, 16, 8), np.nan, np.float32)
    warp_matmul[1, 32 * warps](out, A, np.ascontiguousarray(bt.reshape(warps, 16, 16)), C,
                               kind == "bf16", btrans)
    assert_mma_close(out, Av, Bv, C)


def test_mma_special_values_propagate():
    A, Av = _halves("f16", (1, 16, 16))
    A[0, 3, 5] = np.float16(np.inf).view(np.uint16)
    Av[0, 3, 5] = np.inf
    B, Bv = _halves("f16", (1, 16, 8))
    C = rng.standard_normal((1, 16, 8)).astype(np.float32)
    bt = np.zeros((1, 16, 16), np.uint16)
    bt[:, :8, :] = B.transpose(0, 2, 1)
    out = np.full((1, 16, 8), np.nan, np.float32)
    warp_matmul[1, 32](out, A, bt, C, False, False)
    with np.errstate(invalid="ignore"):
        ref = Av @ Bv + C
    np.testing.assert_array_equal(np.isinf(out), np.isinf(ref))
    with np.errstate(invalid="ignore"):
        assert_mma_close(out, Av, Bv, C)


# ---- pack2 / unpack2 / bf16 --------------------------------------------------------------------

@pyptx.kernel
def pack_roundtrip(words: u32[:], back: f32[:, :], x: f32[:, :], bf: pyptx.constexpr):
    i = pyptx.grid(1)
    if i < len(words):
        w = pyptx.pack2(x[i, 0], x[i, 1], bf16 if bf else f16)
        words[i] = w
        lo, hi = pyptx.unpack2(w, bf16 if bf else f16)
        back[i, 0] = lo
        back[i, 1] = hi


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_pack2_unpack2(kind):
    n = 300
    x = (rng.standard_normal((n, 2)) * 10.0 ** rng.integers(-6, 6, (n, 2))).astype(np.float32)
    x[:4, 0] = [np.inf, -np.inf, -0.0, 1e30]
    words = np.full(n, 0xDEADBEEF, np.uint32)
    back = np.full((n, 2), np.nan, np.float32)
    pack_roundtrip[2, 256](words, back, x, kind == "bf16")
    if kind == "f16":
        with np.errstate(over="ignore"):
            h = x.astype(np.float16)
        want = h.view(np.uint16)
        vals = h.astype(np.float32)
    else:
        want = to_bf16(x)
        vals = from_bf16(want)
    np.testing.assert_array_equal(words, _pack(want[:, 0], want[:, 1]))
    np.testing.assert_array_equal(back.view(np.uint32), vals.view(np.uint32))


@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=40))
def test_bf16_convert_rounds_to_nearest_even(values):
    x = np.array(values, np.float32)
    out = np.zeros(len(x), np.uint16)
    back = np.full(len(x), np.nan, np.float32)
    bf16_convert[1, 64](out, back, x)
    want = np.array([bf16(v) for v in x], np.uint16)        # scalar reference (pyptx.types)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(back, from_bf16(want))


@pyptx.kernel
def bf16_convert(out: bf16[:], back: f32[:], x: f32[:]):
    i = thread_idx.x
    if i < len(x):
        b = bf16(x[i])
        out[i] = b
        back[i] = f32(b)


@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_bf16_rounding_on_every_arch(arch):
    """sm_75 has no cvt.rn.bf16.f32: the backend rounds on the bits; both give the same bits."""
    from pyptx.runtime.cpu import ArrayArg, launch
    x = np.concatenate([rng.standard_normal(60).astype(np.float32),
                        np.array([np.nan, np.inf, -np.inf, 3.4e38], np.float32)])
    x[:8] = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 2 ** -130, 0.0, -0.0,
                      65504.0, 1.0 - 2 ** -9], np.float32)
    out = np.zeros(len(x), np.uint16)
    back = np.full(len(x), np.nan, np.float32)
    ck = pyptx.compile(bf16_convert, arch=arch)
    launch(ck.ptx, ck.name, (1, 1, 1), (64, 1, 1),
           [ArrayArg(out, True), len(x), ArrayArg(back, True), len(x), ArrayArg(x, False), len(x)])
    want = to_bf16(x)
    np.testing.assert_array_equal(out, want)
    assert (np.isnan(back) == np.isnan(x)).all()


@pyptx.kernel
def bf16_arith(out: bf16[:], x: bf16[:], y: bf16[:]):
    i = pyptx.grid(1)
    if i < len(x):
        v = x[i] * y[i]
        out[i] = v - x[i] if x[i] < y[i] else v + 1.0


def test_bf16_arithmetic_rounds_through_f32():
    n = 200
    x, xv = _halves("bf16", n)
    y, yv = _halves("bf16", n)
    out = np.zeros(n, np.uint16)
    pyptx.compile(bf16_arith, fma=False)
    bf16_arith[1, 256](out, x, y)
    r = lambda v: from_bf16(to_bf16(np.asarray(v, np.float32)))   # noqa: E731
    prod = r(xv * yv)
    want = np.where(xv < yv, r(prod - xv.astype(np.float32)), r(prod + np.float32(1.0)))
    # fma contraction may fuse v - x / v + 1 with the product (one rounding instead of two)
    got = from_bf16(out)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=2 ** -120)


def test_bf16_host_helpers_and_promotion():
    assert pyptx.bf16(1.0) == 0x3F80
    assert pyptx.bf16(1.0 + 2 ** -8) == 0x3F80           # tie -> even
    assert pyptx.bf16(1.0 + 3 * 2 ** -9) == 0x3F81
    from pyptx import types as T
    assert T.promote(T.bf16, T.f16) is T.f32
    assert T.promote(T.bf16, T.i8) is T.bf16
    assert T.promote(T.bf16, T.f32) is T.f32
    assert T.from_dtype(np.uint16) is T.u16


# ---- cp.async ----------------------------------------------------------------------------------

@pyptx.kernel
def cp_async_pipeline(out: f32[:], x: f32[:], nbytes: pyptx.constexpr):
    """Double-buffered: stage k+1 is in flight while stage k is read.  Each wait(1) closes the
    group just issued and waits until at most one group (the newest) is still in flight."""
    per = nbytes // 4
    s = pyptx.shared.array((2, 256), f32)
    t = thread_idx.x
    tile = 64 * per
    ntiles = len(x) // tile
    pyptx.cp_async(s, (0, t * per), x, t * per, nbytes)
    pyptx.cp_async_wait(1)              # closes group 0; one group may stay in flight
    for k in range(ntiles):
        if k + 1 < ntiles:
            pyptx.cp_async(s, ((k + 1) % 2, t * per), x, (k + 1) * tile + t * per, nbytes)
        pyptx.cp_async_wait(1)
        pyptx.syncthreads()
        for j in range(per):
            out[k * tile + t * per + j] = s[k % 2, t * per + j] * 2.0
        pyptx.syncthreads()


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_cp_async_double_buffer(nbytes):
    per = nbytes // 4
    x = rng.standard_normal(64 * per * 5).astype(np.float32)
    out = np.full_like(x, np.nan)
    cp_async_pipeline[1, 64](out, x, nbytes)
    np.testing.assert_array_equal(out, x * 2)


@pyptx.kernel
def cp_async_at(out: f32[:], x: f32[:], off: i32):
    s = pyptx.shared.array(64, f32)
    t = thread_idx.x
    pyptx.cp_async(s, 4 * t, x, 4 * t + off, 16)
    pyptx.cp_async_wait(0)
    pyptx.syncthreads()
    out[t] = s[4 * t]


def test_cp_async_memcheck(cpu_device):
    x = rng.standard_normal(68).astype(np.float32)
    out = np.full(16, np.nan, np.float32)
    cp_async_at[1, 16](out, x, 0)
    np.testing.assert_array_equal(out, x[:64:4])
    with pytest.raises(pyptx.MemoryFault, match="misaligned"):
        cp_async_at[1, 16](out, x, 1)
    with pytest.raises(pyptx.MemoryFault):
        cp_async_at[1, 16](out, x, 8)           # the last thread reads past the end of x


def test_mma_needs_a_whole_warp(cpu_device):
    out = np.zeros((32, 4), np.float32)
    a = np.zeros((32, 4), np.uint32)
    with pytest.raises(pyptx.LaunchError, match="32 lanes"):
        mma_direct[1, 16](out, a, np.zeros((32, 2), np.uint32), out.copy(), False)


# ---- compile errors ----------------------------------------------------------------------------

def test_tensor_cores_need_sm80():
    with pytest.raises(pyptx.CompileError, match="sm_80"):
        pyptx.compile(mma_direct, arch="sm_75", constexprs={"bf": False})
    with pytest.raises(pyptx.CompileError, match="sm_80"):
        pyptx.compile(cp_async_at, arch="sm_75")


def _compile_body(body: str):
    src = ("import pyptx\nfrom pyptx import f32, u32, u16\n"
           "@pyptx.kernel\ndef k(o: f32[:], w: u32[:]):\n"
           "    s = pyptx.shared.array(256, u16)\n    x = w[0]\n    y = o[0]\n" + body)
    return pyptx.compile(make_kernel(src, "k"), arch="sm_80")


@pytest.mark.parametrize("body, msg", [
    ("    r = pyptx.ldmatrix(s, 0, count=3)\n", "one of 1, 2, 4"),
    ("    r = pyptx.mma_sync((x, x, x, x), (x, x), (y, y, y, y), atype='f32')\n", "f16 or bf16"),
    ("    r = pyptx.mma_sync((x, x, x), (x, x), (y, y, y, y))\n", "tuple of 4"),
    ("    r = pyptx.mma_sync((y, y, y, y), (x, x), (y, y, y, y))\n", "32-bit integer word"),
    ("    r = pyptx.ldmatrix(o, 0)\n", "shared-memory array"),
    ("    pyptx.cp_async(s, 0, o, 0, 12)\n", "4, 8, 16"),
    ("    a, b = pyptx.unpack2(o[0], pyptx.f16)\n", "32-bit integer word"),
])
def test_bad_arguments_are_compile_errors(body, msg):
    with pytest.raises(pyptx.CompileError, match=msg):
        _compile_body(body)


@pyptx.kernel
def bf16_scalar_param(out: f32[:], b: bf16):
    out[0] = f32(b) * 2.0


def test_bf16_scalar_parameter():
    out = np.full(1, np.nan, np.float32)
    bf16_scalar_param[1, 1](out, 1.00390625)          # rounds to 1.0 (tie to even)
    assert out[0] == 2.0
    with pytest.raises(pyptx.LaunchError, match="b"):
        bf16_scalar_param[1, 1](out, 1e39)


@pyptx.kernel
def cp_async_deferred(before: f32[:], after: f32[:], x: f32[:]):
    s = pyptx.shared.array(64, f32)
    t = thread_idx.x
    s[t] = -1.0
    pyptx.cp_async(s, t, x, t, 4)
    before[t] = s[t]                    # not waited for yet: the executor still has -1
    pyptx.cp_async_wait(0)
    after[t] = s[t]


def test_cp_async_lands_at_the_wait():
    """The executor models the asynchrony: bytes move when wait_group retires the group."""
    x = rng.standard_normal(64).astype(np.float32)
    before = np.full(64, np.nan, np.float32)
    after = np.full(64, np.nan, np.float32)
    cp_async_deferred[1, 64](before, after, x)
    np.testing.assert_array_equal(before, -1.0)
    np.testing.assert_array_equal(after, x)


@pyptx.kernel
def ldmatrix_at(out: u32[:], m: u16[:], row: i32):
    s = pyptx.shared.array((16, 8), u16)
    l = thread_idx.x
    for c in range(4):
        s[l // 2, (l % 2) * 4 + c] = m[l * 4 + c]
    pyptx.syncthreads()
    r = pyptx.ldmatrix(s, (row + l % 16, 0), count=2)
    out[l] = r[0] ^ r[1]


def test_ldmatrix_memcheck(cpu_device):
    m = rng.integers(0, 2**16, 128, dtype=np.uint16)
    out = np.zeros(32, np.uint32)
    ldmatrix_at[1, 32](out, m, 0)
    with pytest.raises(pyptx.MemoryFault, match="shared"):
        ldmatrix_at[1, 32](out, m, 1)             # lane 15 addresses row 16 of 16


def test_pack2_is_one_conversion_from_sm80():
    """f32 pairs pack with one cvt.rn.{f16x2,bf16x2}.f32 on sm_80+ (hi first, as PTX orders
    it); f16 on sm_75 falls back to two conversions and a shift (test_pack2_unpack2 checks the
    values on the default arch)."""
    import re
    for kind in ("f16", "bf16"):
        ptx = pyptx.compile(pack_roundtrip, arch="sm_80", constexprs={"bf": kind == "bf16"}).ptx
        assert re.search(rf"cvt\.rn\.{kind}x2\.f32 %r\d+, %f\d+, %f\d+;", ptx)
    ptx = pyptx.compile(pack_roundtrip, arch="sm_75", constexprs={"bf": False}).ptx
    assert "f16x2" not in ptx and "cvt.rn.f16.f32" in ptx
