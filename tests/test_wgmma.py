"""Hopper warpgroup MMA (`pyptx.wgmma` & co., sm_90a) on the CPU executor, against numpy.

Every kernel here stages A and B into shared memory from a byte image the test builds itself,
element by element, from the PTX ISA's canonical-layout description (8-row x 16-byte core
matrices; the swizzle modes as the ISA's pictures draw them: 16-byte chunk c of row r of a
swizzle atom is stored at chunk c ^ f(r)), runs wgmma through descriptors (or A from registers
in the ISA's A fragment layout), and writes each thread's accumulator registers out; the test
places them with the ISA's D fragment table written out below.  Nothing here uses the executor's
layout helpers.  Every kernel is also assembled by ptxas for sm_90a.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32, thread_idx, u16, u32
from pyptx.bfloat16 import from_bf16, to_bf16
from pyptx.errors import CompileError
from pyptx.runtime.cpu import ArrayArg, launch
from pyptx.toolchain import assemble

rng = np.random.default_rng(20261126)
U = 2.0 ** -24          # unit roundoff of f32


def _halves(kind, shape):
    """Random f16 / bf16 matrix as (uint16 bits, float64 values)."""
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "f16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float64)
    b = to_bf16(x)
    return b, from_bf16(b).astype(np.float64)


# ---- the ISA's tables, written out here ----------------------------------------------------------

def chunk_swizzle(row: int, chunk: int, mode: int) -> int:
    """Where 16-byte chunk `chunk` of W-byte row `row` of a swizzle atom lands (ISA pictures):
    128B: 8 rows of 8 chunks, chunk ^ row; 64B: 8 rows of 4 chunks, chunk ^ (row // 2) % 4;
    32B: 8 rows of 2 chunks, chunk ^ (row // 4) % 2."""
    if mode == 128:
        return chunk ^ (row % 8)
    if mode == 64:
        return chunk ^ ((row // 2) % 4)
    if mode == 32:
        return chunk ^ ((row // 4) % 2)
    return chunk


class Layout:
    """Byte placement of a (rows x kt) operand X (rows = M of A or N of B) in shared memory for
    one descriptor mode.  K-major: X[i, k] with k contiguous; MN-major: i contiguous.

    mode 0: core matrices of 8 x 16 bytes, 128 contiguous bytes each.  K-major: core (i//8, k//8)
      at (i//8)*SBO + (k//8)*LBO, inside it row i%8 at 16*(i%8), element k%8 at 2*(k%8).
      MN-major: core (i//8, k//8) at (i//8)*SBO + (k//8)*LBO, row k%8, element i%8.
    swizzled W: atoms of 8 rows x W bytes.  K-major: a row is one i holding W/2 consecutive k;
      atom i//8 at SBO = 8W; the next W/2 k (another column of atoms) after all rows.
      MN-major: a row is one k holding W/2 consecutive i; atom (i // (W/2)) at LBO, k-group
      k//8 at SBO = 8W.
    The descriptor of k-slice s (16 K elements) starts at `start(s)` bytes."""

    def __init__(self, mode, mn_major, rows, kt):
        self.mode, self.mn_major, self.rows, self.kt = mode, mn_major, rows, kt
        W = mode
        if mode == 0:
            if mn_major:            # i-groups contiguous, then k-groups
                self.sbo, self.lbo = 128, 128 * (rows // 8)
            else:                   # k-groups contiguous, then i-groups
                self.lbo, self.sbo = 128, 128 * (kt // 8)
        elif mn_major:
            self.sbo, self.lbo = 8 * W, 8 * W * (kt // 8)
        else:
            self.lbo, self.sbo = 16, 8 * W
        self.nbytes = 2 + max(self.byte_of(i, k) for i in range(rows) for k in range(kt))

    def start(self, s: int) -> int:
        k0 = 16 * s
        if self.mode == 0:
            return (k0 // 8) * self.lbo
        if self.mn_major:
            return (k0 // 8) * self.sbo
        per = self.mode // 2
        return (k0 // per) * self.rows * self.mode + 2 * (k0 % per)

    def byte_of(self, i: int, k: int) -> int:
        W = self.mode
        if W == 0:
            core = (i // 8) * self.sbo + (k // 8) * self.lbo
            if self.mn_major:
                return core + 16 * (k % 8) + 2 * (i % 8)
            return core + 16 * (i % 8) + 2 * (k % 8)
        per = W // 2
        if self.mn_major:
            atom = (i // per) * self.lbo + (k // 8) * self.sbo
            row, col = k % 8, 2 * (i % per)
        else:
            atom = (k // per) * self.rows * W + (i // 8) * self.sbo
            row, col = i % 8, 2 * (k % per)
        chunk = chunk_swizzle(row, col // 16, W)
        return atom + row * W + 16 * chunk + col % 16

    def image(self, bits: np.ndarray) -> np.ndarray:
        """The u16 shared-memory image of the operand `bits` (rows x kt)."""
        img = np.zeros((self.nbytes + 1) // 2, np.uint16)
        seen = set()
        for i in range(self.rows):
            for k in range(self.kt):
                b = self.byte_of(i, k)
                seen.add(b)
                img[b // 2] = bits[i, k]
        assert len(seen) == self.rows * self.kt        # a placement: no two elements collide
        return img


def d_place(thread: int, j: int) -> tuple[int, int]:
    """The ISA's m64nNk16 D fragment: warp w = thread // 32 owns rows 16w..16w+15; with
    g = lane // 4, t = lane % 4, register j is D[16w + g + 8 * ((j // 2) % 2), 8 * (j // 4) +
    2t + j % 2]."""
    w, lane = divmod(thread, 32)
    g, t = divmod(lane, 4)
    return 16 * w + g + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * t + j % 2


def a_regs(bits: np.ndarray, s: int) -> np.ndarray:
    """A (64 x 16 slice s) in the ISA's register fragment: register k of a thread holds
    A[16w + g + 8 * (k % 2), 2t + 8 * (k // 2) + {0 (low half), 1 (high half)}]."""
    out = np.zeros((128, 4), np.uint32)
    for th in range(128):
        w, lane = divmod(th, 32)
        g, t = divmod(lane, 4)
        for k in range(4):
            r, c = 16 * w + g + 8 * (k % 2), 16 * s + 2 * t + 8 * (k // 2)
            out[th, k] = int(bits[r, c]) | int(bits[r, c + 1]) << 16
    return out


# ---- the kernels -------------------------------------------------------------------------------

@pyptx.kernel
def wg_desc(out: f32[:, :], c: f32[:, :], imga: u16[:], imgb: u16[:], flag: i32,
            NA: pyptx.constexpr, NB: pyptx.constexpr, NH: pyptx.constexpr,
            KS: pyptx.constexpr, SW: pyptx.constexpr, ALBO: pyptx.constexpr,
            ASBO: pyptx.constexpr, BLBO: pyptx.constexpr, BSBO: pyptx.constexpr,
            ASTEP: pyptx.constexpr, BSTEP: pyptx.constexpr, TA: pyptx.constexpr,
            TB: pyptx.constexpr, BF: pyptx.constexpr, SCALE: pyptx.constexpr):
    """A and B from shared memory through descriptors; KS k16 slices; scale_d of the first
    wgmma: SCALE 1 (True), 0 (False) or 2 (the runtime predicate flag != 0)."""
    sa = pyptx.shared.array(NA, u16)
    sb = pyptx.shared.array(NB, u16)
    t = thread_idx.x
    for i in range(t, NA, 128):
        sa[i] = imga[i]
    for i in range(t, NB, 128):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    acc = ()
    for j in pyptx.static_range(NH):
        acc = acc + (c[t, j],)
    pyptx.wgmma_fence()
    da = pyptx.wgmma_desc(sa, 0, swizzle=SW, lbo=ALBO, sbo=ASBO)
    db = pyptx.wgmma_desc(sb, 0, swizzle=SW, lbo=BLBO, sbo=BSBO)
    if SCALE == 2:
        acc = pyptx.wgmma(da, db, acc, atype="bf16" if BF else "f16", trans_a=TA, trans_b=TB,
                          scale_d=flag != 0)
    elif SCALE == 1:
        acc = pyptx.wgmma(da, db, acc, atype="bf16" if BF else "f16", trans_a=TA, trans_b=TB,
                          scale_d=True)
    else:
        acc = pyptx.wgmma(da, db, acc, atype="bf16" if BF else "f16", trans_a=TA, trans_b=TB,
                          scale_d=False)
    for s in pyptx.static_range(1, KS):
        da = pyptx.wgmma_desc(sa, s * ASTEP, swizzle=SW, lbo=ALBO, sbo=ASBO)
        db = pyptx.wgmma_desc(sb, s * BSTEP, swizzle=SW, lbo=BLBO, sbo=BSBO)
        acc = pyptx.wgmma(da, db, acc, atype="bf16" if BF else "f16", trans_a=TA,
                          trans_b=TB)
    pyptx.wgmma_commit()
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(NH):
        out[t, j] = acc[j]


@pyptx.kernel
def wg_regs(out: f32[:, :], c: f32[:, :], ra: u32[:, :], imgb: u16[:],
            NB: pyptx.constexpr, NH: pyptx.constexpr, KS: pyptx.constexpr,
            SW: pyptx.constexpr, BLBO: pyptx.constexpr, BSBO: pyptx.constexpr,
            BSTEP: pyptx.constexpr, TB: pyptx.constexpr, BF: pyptx.constexpr):
    """A from registers (4 words per thread and k16 slice, read from `ra`), B from a
    descriptor."""
    sb = pyptx.shared.array(NB, u16)
    t = thread_idx.x
    for i in range(t, NB, 128):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    acc = ()
    for j in pyptx.static_range(NH):
        acc = acc + (c[t, j],)
    for s in pyptx.static_range(KS):
        a = (ra[t, 4 * s], ra[t, 4 * s + 1], ra[t, 4 * s + 2], ra[t, 4 * s + 3])
        pyptx.wgmma_fence()
        db = pyptx.wgmma_desc(sb, s * BSTEP, swizzle=SW, lbo=BLBO, sbo=BSBO)
        acc = pyptx.wgmma(a, db, acc, atype="bf16" if BF else "f16", trans_b=TB)
    pyptx.wgmma_commit()
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(NH):
        out[t, j] = acc[j]


def _ptxas_ok(ck):
    """ptxas accepts the kernel for sm_90a and does not serialise its wgmma pipeline."""
    log = assemble(ck.ptx, "sm_90a", verbose=True)
    assert "serializ" not in log.lower(), log
    assert "wgmma.mma_async" in ck.ptx and ".target sm_90a" in ck.ptx


def _check(out, c, Av, Bv, ks, scaled, tag):
    """D = A @ B (+ C) per element.  Error analysis: every product of two f16/bf16 values is
    exact; each wgmma rounds its sum (C + 16 products, formed in float64: relative error at most
    16 * 2**-53 of the sum of magnitudes) once to f32 (2**-24 relative), and a chain of `ks`
    wgmmas does that ks times, each partial sum bounded by sum |C| + |A| @ |B|.  So
    |got - want| <= (ks * 2**-24 + ks * 17 * 2**-53) * (|C| + |A| @ |B|)."""
    want = Av @ Bv
    mag = np.abs(Av) @ np.abs(Bv)
    C = np.zeros_like(want)
    for th in range(128):
        for j in range(c.shape[1]):
            C[d_place(th, j)] = c[th, j]
    if scaled:
        want = want + C
        mag = mag + np.abs(C)
    got = np.full_like(want, np.nan)
    for th in range(128):
        for j in range(out.shape[1]):
            got[d_place(th, j)] = out[th, j]
    bound = (ks * U + ks * 17 * 2.0 ** -53) * mag
    err = np.abs(got - want)
    assert (err <= bound).all(), (tag, float(np.nanmax(err - bound)), np.argwhere(~(err <= bound))[:4])


def _kt(mode):
    """The K of a test tile: two k16 slices, or one whole 128B atom row (four slices, so the
    descriptor start moves by 32, 64, 96 bytes inside the swizzle atom)."""
    return max(32, mode // 2)


def _run_desc(kind, n, mode, ta, tb, scale, flag=1):
    kt = _kt(mode)
    ks = kt // 16
    Abits, Av = _halves(kind, (64, kt))
    Bbits, Bv = _halves(kind, (kt, n))
    la = Layout(mode, ta, 64, kt)
    lb = Layout(mode, tb, n, kt)
    imga = la.image(Abits)
    imgb = lb.image(Bbits.T)                    # B as (N x K): rows are n
    c = rng.standard_normal((128, n // 2)).astype(np.float32)
    out = np.full((128, n // 2), np.nan, np.float32)
    cx = dict(NA=imga.size, NB=imgb.size, NH=n // 2, KS=ks, SW=mode, ALBO=la.lbo,
              ASBO=la.sbo, BLBO=lb.lbo, BSBO=lb.sbo, ASTEP=la.start(1) // 2,
              BSTEP=lb.start(1) // 2, TA=ta, TB=tb, BF=kind == "bf16",
              SCALE=2 if scale is None else int(scale))
    assert all(la.start(s) == s * la.start(1) and lb.start(s) == s * lb.start(1)
               for s in range(ks))
    ck = pyptx.compile(wg_desc, arch="sm_90a", constexprs=cx)
    _ptxas_ok(ck)
    launch(ck.ptx, ck.name, (1, 1, 1), (128, 1, 1),
           [ArrayArg(out, True), *out.shape, ArrayArg(c, False), *c.shape,
            ArrayArg(imga, False), imga.size, ArrayArg(imgb, False), imgb.size, flag])
    scaled = bool(flag) if scale is None else scale
    _check(out, c, Av, Bv, ks, scaled, (kind, n, mode, ta, tb, scale, flag))


# ---- tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [0, 32, 64, 128])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (False, True)])
def test_swizzle_modes_and_majorness(mode, ta, tb):
    _run_desc("bf16", 64, mode, ta, tb, True)


@pytest.mark.parametrize("n", [8, 128, 256])
def test_several_n(n):
    _run_desc("f16", n, 128, False, False, True)


@pytest.mark.parametrize("scale,flag", [(False, 1), (True, 1), (None, 0), (None, 1)])
def test_scale_d_constant_and_runtime(scale, flag):
    _run_desc("bf16", 16, 64, False, True, scale, flag)


@pytest.mark.parametrize("kind,n,mode,tb", [("bf16", 64, 128, False), ("f16", 8, 0, True),
                                            ("f16", 256, 32, True)])
def test_a_from_registers(kind, n, mode, tb):
    kt, ks = 32, 2
    Abits, Av = _halves(kind, (64, kt))
    Bbits, Bv = _halves(kind, (kt, n))
    lb = Layout(mode, tb, n, kt)
    imgb = lb.image(Bbits.T)
    ra = np.concatenate([a_regs(Abits, s) for s in range(ks)], axis=1)
    c = rng.standard_normal((128, n // 2)).astype(np.float32)
    out = np.full((128, n // 2), np.nan, np.float32)
    cx = dict(NB=imgb.size, NH=n // 2, KS=ks, SW=mode, BLBO=lb.lbo, BSBO=lb.sbo,
              BSTEP=lb.start(1) // 2, TB=tb, BF=kind == "bf16")
    ck = pyptx.compile(wg_regs, arch="sm_90a", constexprs=cx)
    _ptxas_ok(ck)
    launch(ck.ptx, ck.name, (1, 1, 1), (128, 1, 1),
           [ArrayArg(out, True), *out.shape, ArrayArg(c, False), *c.shape,
            ArrayArg(ra, False), *ra.shape, ArrayArg(imgb, False), imgb.size])
    _check(out, c, Av, Bv, ks, True, (kind, n, mode, tb))
