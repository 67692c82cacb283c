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

import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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


def _ptxas_ok(ck, early_read=False):
    """ptxas accepts the kernel for sm_90a, does not serialise its wgmma pipeline ("Potential
    Performance Loss: wgmma.mma_async instructions are serialized due to ...") and, unless the
    kernel reads an accumulator before its wait on purpose, injects no wait of its own ("(C7517)
    wgmma.wait_group is injected ... to allow use of registers defined by GMMA")."""
    log = assemble(ck.ptx, "sm_90a", verbose=True)
    assert "serializ" not in log.lower(), log
    assert early_read or "injected" not in log, log
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
    assert (err <= bound).all(), (tag, float(np.nanmax(err - bound)),
                                  np.argwhere(~(err <= bound))[:4])


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


# ---- a runtime K loop: the accumulator stays in its registers ------------------------------------

@pyptx.kernel
def wg_kloop(out: f32[:, :], imga: u16[:], imgb: u16[:], nk: i32):
    """64 x 64 x (16 nk) with 128B-swizzled K-major tiles of K = 64 (one atom row): k-slice s
    of atom-row r starts at r * 8 KiB + 32 s bytes; acc carried by a runtime loop."""
    sa = pyptx.shared.array(64 * 128, u16)
    sb = pyptx.shared.array(64 * 128, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16 * nk, 128):
        sa[i] = imga[i]
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    acc = (0.0,) * 32
    for k in range(nk):
        pyptx.wgmma_fence()
        off = (k // 4) * 4096 + (k % 4) * 16
        da = pyptx.wgmma_desc(sa, off, swizzle=128)
        db = pyptx.wgmma_desc(sb, off, swizzle=128)
        acc = pyptx.wgmma(da, db, acc, atype="bf16", scale_d=k > 0)
        pyptx.wgmma_commit()
        pyptx.wgmma_wait(0)
    for j in pyptx.static_range(32):
        out[t, j] = acc[j]


def _loop_body(ptx: str) -> str:
    """The PTX between the loop's label and its back edge."""
    lines = ptx.splitlines()
    start = next(i for i, l in enumerate(lines) if "wgmma.fence" in l)
    end = next(i for i, l in enumerate(lines) if l.strip().startswith("bra ") and i > start)
    return "\n".join(lines[start:end])


def test_k_loop_keeps_the_accumulator_in_place_and_ptxas_pipelines_it(tmp_path):
    ck = pyptx.compile(wg_kloop, arch="sm_90a")
    body = _loop_body(ck.ptx)
    assert "wgmma.mma_async" in body and "mov.f32" not in body, body
    log = assemble(ck.ptx, "sm_90a", verbose=True)
    assert "serializ" not in log.lower() and "injected" not in log, log
    assert "0 bytes spill stores" in log, log
    import subprocess
    from pyptx.toolchain import find_ptxas
    ptxas = find_ptxas()
    cubin = tmp_path / "k.cubin"
    src = tmp_path / "k.ptx"
    src.write_text(ck.ptx)
    subprocess.run([ptxas, "-arch=sm_90a", "-o", str(cubin), str(src)], check=True)
    cuobjdump = str(pathlib.Path(ptxas).with_name("cuobjdump"))
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    assert "HGMMA.64x64x16.F32.BF16" in sass


def test_k_loop_on_the_cpu_through_a_plain_launch():
    """kernel[grid, block](...) on the CPU executor compiles for sm_90a by itself (the kernel
    needs it) and the loop-carried accumulator sums every k slice."""
    nk = 8
    Abits, Av = _halves("bf16", (64, 16 * nk))
    Bbits, Bv = _halves("bf16", (16 * nk, 64))
    imgs = []
    for bits in (Abits, Bbits.T):            # two atom rows of K = 64, 128B swizzle
        lay = Layout(128, False, 64, 64)
        imgs.append(np.concatenate([lay.image(bits[:, 64 * r:64 * r + 64]) for r in range(2)]))
    out = np.full((128, 32), np.nan, np.float32)
    wg_kloop[1, 128](out, imgs[0], imgs[1], nk)
    _check(out, np.zeros((128, 32), np.float32), Av, Bv, nk, False, "kloop")


# ---- the asynchronous protocol on the CPU executor -------------------------------------------

@pyptx.kernel
def wg_protocol(out: f32[:, :], imga: u16[:], imgb: u16[:], MODE: pyptx.constexpr):
    """MODE 0: two groups, wait(1) then store (the first group's result is there, the second's
    is not yet: NaN); MODE 1: no wgmma_fence; MODE 2: read acc before any wait."""
    sa = pyptx.shared.array(64 * 16, u16)
    sb = pyptx.shared.array(8 * 16, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16, 128):
        sa[i] = imga[i]
    for i in range(t, 8 * 16, 128):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    da = pyptx.wgmma_desc(sa, 0, swizzle=32)
    db = pyptx.wgmma_desc(sb, 0, swizzle=32)
    z = (0.0,) * 4
    if MODE != 1:
        pyptx.wgmma_fence()
    x = pyptx.wgmma(da, db, z, atype="f16", scale_d=False)
    pyptx.wgmma_commit()
    y = pyptx.wgmma(da, db, z, atype="f16", scale_d=False)
    pyptx.wgmma_commit()
    if MODE == 0:
        pyptx.wgmma_wait(1)
    for j in pyptx.static_range(4):
        out[t, j] = x[j]
        out[t, 4 + j] = y[j]
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(4):
        out[t, 8 + j] = y[j]


def _protocol(mode, block=128):
    Abits, Av = _halves("f16", (64, 16))
    Bbits, Bv = _halves("f16", (16, 8))
    la, lb = Layout(32, False, 64, 16), Layout(32, False, 8, 16)
    out = np.full((block, 12), -1.0, np.float32)
    wg_protocol[1, block](out, la.image(Abits), lb.image(Bbits.T), mode)
    return out, Av @ Bv


def test_wait_group_retires_the_older_group_only():
    out, want = _protocol(0)
    got_x, got_y_late = np.zeros_like(want), np.zeros_like(want)
    for th in range(128):
        for j in range(4):
            got_x[d_place(th, j)] = out[th, j]
            got_y_late[d_place(th, j)] = out[th, 8 + j]
    # one rounding of a k=16 sum of exact products: |err| <= 2**-24 |A| @ |B| (+ f64 slop)
    tol = 2.0 ** -23 * np.abs(want).max()
    np.testing.assert_allclose(got_x, want, rtol=0, atol=tol)
    np.testing.assert_allclose(got_y_late, want, rtol=0, atol=tol)
    assert np.isnan(out[:, 4:8]).all()        # y's group was still pending at the store


def test_reading_the_accumulator_before_its_wait_reads_nan():
    out, _ = _protocol(2)
    assert np.isnan(out[:, 0:8]).all() and not np.isnan(out[:, 8:]).any()


def test_wgmma_without_a_fence_is_a_launch_error():
    with pytest.raises(pyptx.LaunchError, match="wgmma.fence"):
        _protocol(1)


def test_an_incomplete_warpgroup_is_a_launch_error():
    with pytest.raises(pyptx.LaunchError, match="warpgroup"):
        _protocol(0, block=64)


# ---- compile errors ---------------------------------------------------------------------------

@pyptx.kernel
def wg_bad(out: f32[:], imga: u16[:], WHAT: pyptx.constexpr):
    s = pyptx.shared.array(64 * 64, u16)
    d = pyptx.wgmma_desc(s, 0, swizzle=128)
    if WHAT == 0:
        acc = pyptx.wgmma(d, d, (0.0,) * 5)
    elif WHAT == 1:
        acc = pyptx.wgmma(d, d, (0.0,) * 4, atype="f32")
    elif WHAT == 2:
        e = pyptx.wgmma_desc(s, 0, swizzle=16)
        acc = pyptx.wgmma(e, d, (0.0,) * 4)
    elif WHAT == 3:
        acc = pyptx.wgmma((u32(1), u32(2), u32(3), u32(4)), d, (0.0,) * 4, trans_a=True)
    elif WHAT == 4:
        acc = pyptx.wgmma(d, d, (0.0,) * 4, trans_b=out[0] > 0)
    elif WHAT == 5:
        acc = pyptx.wgmma(d, d, (0.0,) * 4, scale_d=out[0])
    elif WHAT == 6:
        acc = pyptx.wgmma(out[0], d, (0.0,) * 4)
    else:
        acc = pyptx.wgmma(d, d, (0.0,) * 4)
    out[0] = acc[0]


@pytest.mark.parametrize("what,msg", [
    (0, "tuple of N/2 f32 accumulators"), (1, "f16 or bf16"), (2, "one of 0, 32, 64, 128"),
    (3, "trans_a applies to A in shared memory only"), (4, "literal True or False"),
    (5, "scale_d must be True, False or a bool"), (6, "u64 matrix descriptor")])
def test_misuse_is_a_compile_error_at_the_call(what, msg):
    with pytest.raises(CompileError, match=msg) as e:
        pyptx.compile(wg_bad, arch="sm_90a", constexprs={"WHAT": what})
    assert e.value.filename.endswith("test_wgmma.py") and e.value.lineno


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100a"])
def test_wgmma_needs_sm_90a(arch):
    with pytest.raises(CompileError, match="arch='sm_90a'") as e:
        pyptx.compile(wg_bad, arch=arch, constexprs={"WHAT": 7})
    assert e.value.filename.endswith("test_wgmma.py") and e.value.lineno


def test_fence_proxy_async_needs_sm_90():
    with pytest.raises(CompileError, match="sm_90"):
        pyptx.compile(wg_kloop, arch="sm_80")
    ck = pyptx.compile(wg_kloop, arch="sm_90a")
    assert "fence.proxy.async.shared::cta" in ck.ptx


@pytest.mark.parametrize("opt", [0, 1, 2])
def test_the_optimizer_keeps_the_async_ops_in_order(opt):
    """The async ops are not pure: no pass removes, merges or moves them; the stores of the
    accumulator stay after the wait that retires it."""
    ck = pyptx.compile(wg_protocol, arch="sm_90a", constexprs={"MODE": 0}, opt_level=opt)
    seq = [l.split()[0].rstrip(";") for l in ck.ptx.splitlines()
           if l.strip().startswith(("wgmma.", "st.global"))]
    wg = [s for s in seq if s.startswith("wgmma.")]
    assert wg == ["wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
                  "wgmma.commit_group.sync.aligned",
                  "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
                  "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
                  "wgmma.wait_group.sync.aligned"]
    last_wait = max(i for i, s in enumerate(seq) if s.startswith("wgmma.wait"))
    assert seq.index("wgmma.wait_group.sync.aligned") < seq.index("st.global.f32")
    assert sum(s.startswith("st.global") for s in seq[last_wait:]) == 4
    _ptxas_ok(ck, early_read=True)          # y is stored before its wait on purpose


# ---- the descriptor's bits and the accumulator-copy fallback ----------------------------------

@pyptx.kernel
def wg_descs(out: pyptx.u64[:], lbo: i32, sbo: i32):
    s = pyptx.shared.array(4096, u16)
    out[0] = pyptx.wgmma_desc(s, 0, swizzle=0, lbo=128, sbo=256)
    out[1] = pyptx.wgmma_desc(s, 16, swizzle=32)
    out[2] = pyptx.wgmma_desc(s, 64 + 8, swizzle=64, lbo=lbo, sbo=sbo)
    out[3] = pyptx.wgmma_desc(s, 1000, swizzle=128, lbo=lbo, sbo=sbo)
    out[4] = pyptx.wgmma_desc(s, 0, swizzle=128) + 2     # advanced by hand: start + 32 bytes


def test_descriptor_bits():
    """The ISA's descriptor: (addr >> 4) in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
    swizzle in 62-63 (1 = 128B, 2 = 64B, 3 = 32B).  The array `s` is the first shared array and
    is 1024-aligned (a 128B-swizzled descriptor points into it), so it starts at 0 here."""
    out = np.zeros(5, np.uint64)
    wg_descs[1, 1](out, 4096, 2048)

    def desc(addr, lbo, sbo, code):
        return (addr >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | code << 62
    want = [desc(0, 128, 256, 0), desc(32, 16, 256, 3), desc(144, 4096, 2048, 2),
            desc(2000, 4096, 2048, 1), desc(32, 16, 1024, 1)]
    assert [int(x) for x in out] == want
    ck = pyptx.compile(wg_descs, arch="sm_90a")
    assert ".shared .align 1024 .b8" in ck.ptx
    assemble(ck.ptx, "sm_90a")


@pytest.mark.parametrize("lbo,msg", [(8, "multiple of 16"), (1 << 18, "multiple of 16"),
                                     (1.5, "integer byte offset")])
def test_descriptor_offsets_are_checked(lbo, msg):
    @pyptx.kernel
    def bad(out: pyptx.u64[:], L: pyptx.constexpr):
        s = pyptx.shared.array(4096, u16)
        out[0] = pyptx.wgmma_desc(s, 0, swizzle=128, lbo=L)
    with pytest.raises(CompileError, match=msg):
        pyptx.compile(bad, arch="sm_90a", constexprs={"L": lbo})


@pyptx.kernel
def wg_reuse(out: f32[:, :], c: f32[:, :], imga: u16[:], imgb: u16[:]):
    """The accumulator passed in is still used after the wgmma (D = A·B + C and C itself are
    stored): the backend must copy C into fresh D registers, not overwrite it."""
    sa = pyptx.shared.array(64 * 16, u16)
    sb = pyptx.shared.array(8 * 16, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16, 128):
        sa[i] = imga[i]
    for i in range(t, 8 * 16, 128):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    acc = (c[t, 0], c[t, 1], c[t, 2], c[t, 3])
    pyptx.wgmma_fence()
    d = pyptx.wgmma(pyptx.wgmma_desc(sa, 0, swizzle=32), pyptx.wgmma_desc(sb, 0, swizzle=32),
                    acc, atype="f16")
    pyptx.wgmma_commit()
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(4):
        out[t, j] = d[j]
        out[t, 4 + j] = acc[j]


def test_an_accumulator_used_later_is_copied_not_clobbered():
    Abits, Av = _halves("f16", (64, 16))
    Bbits, Bv = _halves("f16", (16, 8))
    la, lb = Layout(32, False, 64, 16), Layout(32, False, 8, 16)
    c = rng.standard_normal((128, 4)).astype(np.float32)
    out = np.full((128, 8), np.nan, np.float32)
    wg_reuse[1, 128](out, c, la.image(Abits), lb.image(Bbits.T))
    np.testing.assert_array_equal(out[:, 4:], c)
    _check(np.ascontiguousarray(out[:, :4]), c, Av, Bv, 1, True, "reuse")
    ck = pyptx.compile(wg_reuse, arch="sm_90a")
    assert ck.ptx.count("mov.f32") == 4
    assemble(ck.ptx, "sm_90a")


@pytest.mark.parametrize("opt", [0, 2])
def test_the_ir_verifies_and_round_trips(opt):
    """The frontend's IR for descriptors and wgmma passes the verifier's type rules (u32 shift
    counts, VecType(f32, N/2) results) and prints/parses back to itself."""
    from pyptx.ir import parse_function, print_function, verify
    for kernel, cx in ((wg_kloop, {}), (wg_protocol, {"MODE": 0}), (wg_descs, {})):
        ck = pyptx.compile(kernel, arch="sm_90a", constexprs=cx or None, opt_level=opt)
        fn = parse_function(ck.ir)
        verify(fn)
        assert print_function(fn) == ck.ir


@pyptx.kernel
def wg_early_overwrite(out: f32[:, :], imga: u16[:], imgb: u16[:]):
    """Overwrites the B tile (with zeros) after issuing the wgmma and before its wait: a race
    on the GPU (the tensor cores may read B any time until the wait)."""
    sa = pyptx.shared.array(64 * 16, u16)
    sb = pyptx.shared.array(8 * 16, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16, 128):
        sa[i] = imga[i]
    for i in range(t, 8 * 16, 128):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    pyptx.wgmma_fence()
    d = pyptx.wgmma(pyptx.wgmma_desc(sa, 0, swizzle=32), pyptx.wgmma_desc(sb, 0, swizzle=32),
                    (0.0,) * 4, atype="f16", scale_d=False)
    pyptx.wgmma_commit()
    sb[t] = u16(0x3C00)                         # 1.0 everywhere: B becomes all ones
    pyptx.fence_proxy_async()
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(4):
        out[t, j] = d[j]


def test_shared_memory_is_read_when_the_wait_retires_the_wgmma():
    """The executor carries a wgmma out at its retiring wait, so a tile overwritten before it
    is read as overwritten (here: D = A @ ones), and a checked launch names the race."""
    Abits, Av = _halves("f16", (64, 16))
    Bbits, _ = _halves("f16", (16, 8))
    la, lb = Layout(32, False, 64, 16), Layout(32, False, 8, 16)
    out = np.full((128, 4), np.nan, np.float32)
    wg_early_overwrite[1, 128](out, la.image(Abits), lb.image(Bbits.T))
    _check(out, np.zeros((128, 4), np.float32), Av, np.ones((16, 8)), 1, False, "overwrite")
    with pytest.raises(pyptx.SanitizerError, match="race"):
        with pyptx.sanitize():
            wg_early_overwrite[1, 128](out, la.image(Abits), lb.image(Bbits.T))


def test_two_warpgroups_per_block_and_two_blocks():
    """Block of 256 threads (warpgroups 0 and 1, each its own C and D), grid of 2 blocks."""
    kind, n, mode = "bf16", 16, 64
    kt = _kt(mode)
    Abits, Av = _halves(kind, (64, kt))
    Bbits, Bv = _halves(kind, (kt, n))
    la, lb = Layout(mode, False, 64, kt), Layout(mode, False, n, kt)
    imga, imgb = la.image(Abits), lb.image(Bbits.T)
    c = rng.standard_normal((256, n // 2)).astype(np.float32)
    out = np.full((256, n // 2), np.nan, np.float32)
    cx = dict(NA=imga.size, NB=imgb.size, NH=n // 2, KS=kt // 16, SW=mode, ALBO=la.lbo,
              ASBO=la.sbo, BLBO=lb.lbo, BSBO=lb.sbo, ASTEP=la.start(1) // 2,
              BSTEP=lb.start(1) // 2, TA=False, TB=False, BF=True, SCALE=1)
    wg_desc.specialize(**cx)[2, 256](out, c, imga, imgb, 1)
    for g in range(2):
        rows = slice(128 * g, 128 * g + 128)
        _check(np.ascontiguousarray(out[rows]), c[rows], Av, Bv, kt // 16, True, ("wg", g))


def test_a_correct_kernel_is_clean_under_the_sanitizer():
    """fence_proxy_async + syncthreads before, wait before reading: no race, nothing read
    uninitialised, and the result is the same."""
    with pyptx.sanitize():
        test_k_loop_on_the_cpu_through_a_plain_launch()
        test_wait_group_retires_the_older_group_only()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["f16", "bf16"]), n=st.integers(1, 32).map(lambda k: 8 * k),
       mode=st.sampled_from([0, 32, 64, 128]), ta=st.booleans(), tb=st.booleans(),
       scale=st.sampled_from([None, True, False]), flag=st.integers(0, 1))
def test_generated_shapes_and_layouts(kind, n, mode, ta, tb, scale, flag):
    _run_desc(kind, n, mode, ta, tb, scale, flag)
