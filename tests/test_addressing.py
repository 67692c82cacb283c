"""Address generation: constant index parts as `[%r+imm]` immediates (every memory op), 32- and
64-bit shared-memory addresses (`tables.SHARED_ADDRESS_BITS`), widened i32 index products - run
on the CPU executor against numpy, with the faults that existed before (negative / past-the-end
indices) still raised.  Kernels are made fresh per test: a Kernel caches its PTX."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from pyptx import f32, i32, u16, u32
from pyptx.ir import parse_function
from pyptx.passes import widen
from pyptx.ptx import tables
from pyptx.types import i64

from ir_interp import run_function

RNG = np.random.default_rng(11)


@pytest.fixture(params=[32, 64])
def bits(request, monkeypatch):
    monkeypatch.setattr(tables, "SHARED_ADDRESS_BITS", request.param)
    return request.param


def _fresh(kernel):
    return pyptx.kernel(kernel.py_func)


def _instrs(ptx: str) -> list[str]:
    return [ln.strip().rstrip(";") for ln in ptx.splitlines()
            if ln.startswith("\t") and not ln.strip().startswith("//")]


@pyptx.kernel
def _stencil(out: f32[:, :], x: f32[:, :], shift: i32):
    """out[r, c] = x[r, c - 1 + shift] + 2 x[r, c + shift] + tile[ty, tx + 1] (tile: x's 16x17
    block staged through shared memory, one column of halo)."""
    tile = pyptx.shared.array((16, 17), f32)
    tx = pyptx.thread_idx.x
    ty = pyptx.thread_idx.y
    r = pyptx.block_idx.y * 16 + ty
    c = pyptx.block_idx.x * 16 + tx
    tile[ty, tx] = x[r, c]
    if tx == 15:
        tile[ty, tx + 1] = x[r, c + 1]
    pyptx.syncthreads()
    out[r, c] = x[r, c - 1 + shift] + 2.0 * x[r, c + shift] + tile[ty, tx + 1]


def _stencil_ref(x, shift):
    h, w = x.shape
    out = np.empty((h, w - 2), np.float32)
    for r in range(h):
        for c in range(w - 2):
            out[r, c] = x[r, c - 1 + shift] + np.float32(2) * x[r, c + shift] + x[r, c + 1]
    return out


def test_constant_offsets_global_and_shared_match_numpy(bits):
    k = _fresh(_stencil)
    x = RNG.standard_normal((32, 50)).astype(np.float32)
    out = np.full((32, 48), np.nan, np.float32)
    k[(3, 2), (16, 16)](out, x, 1)
    np.testing.assert_array_equal(out, _stencil_ref(x, 1))
    ptx = pyptx.compile(k, arch="sm_90").ptx
    ins = _instrs(ptx)
    # shared memory: the +1 column as an immediate, through a 32- or 64-bit register
    reg = r"%r" if bits == 32 else r"%rd"
    assert any(re.fullmatch(rf"ld\.shared\.f32 %f\d+, \[{reg}\d+\+4\]", i) for i in ins)
    assert (bits == 32) == any(re.fullmatch(r"mov\.u32 %r\d+, \w+", i) for i in ins)
    if bits == 32:
        assert not any(re.search(r"\.shared\S* .*\[%rd", i) for i in ins)
    # x[r, c - 1 + shift] and x[r, c + shift] share one base register: [%rd+-4] / [%rd]
    assert any(re.fullmatch(r"ld\.global\.nc\.f32 %f\d+, \[%rd\d+\+-4\]", i) for i in ins)
    # the row product is one widening multiply, not cvt + cvt + mul.lo.s64
    assert any(i.startswith("mul.wide.s32") for i in ins)
    assert not any(i.startswith("mul.lo.s64") for i in ins)


def test_negative_index_with_folded_offset_still_faults(bits, cpu_device):
    x = RNG.standard_normal((32, 50)).astype(np.float32)
    out = np.full((32, 48), np.nan, np.float32)
    # shift 0: thread (0, 0) of block (0, 0) reads x[0, -1], before x's buffer
    with pytest.raises(pyptx.MemoryFault) as ei:
        _fresh(_stencil)[(3, 2), (16, 16)](out, x, 0)
    assert ei.value.space == "global"


@pyptx.kernel
def _shared_shift(out: f32[:], x: f32[:], j0: i32):
    """A negative intermediate index plus a constant: sh[j + 1] with j = -1 is sh[0]."""
    sh = pyptx.shared.array(64, f32)
    t = pyptx.thread_idx.x
    sh[t] = x[t]
    pyptx.syncthreads()
    j = t + j0
    if t < out.shape[0]:
        out[t] = sh[j + 1] * 3.0


@pytest.mark.parametrize("j0", [-1, 0])
def test_shared_negative_intermediate_index(bits, j0):
    x = RNG.standard_normal(64).astype(np.float32)
    out = np.full(63, np.nan, np.float32)
    _fresh(_shared_shift)[1, 64](out, x, j0)
    np.testing.assert_array_equal(out, x[j0 + 1:j0 + 64] * np.float32(3))


def test_shared_out_of_bounds_faults(bits, cpu_device):
    x = RNG.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    k = _fresh(_shared_shift)
    with pytest.raises(pyptx.MemoryFault) as ei:      # thread 0 reads sh[-1]
        k[1, 64](out, x, -2)
    assert ei.value.space == "shared"
    with pytest.raises(pyptx.MemoryFault):            # thread 63 reads sh[64]
        k[1, 64](out, x, 0)


@pyptx.kernel
def _histogram(counts: u32[:], keys: i32[:], n: i32):
    """counts[k + 2] += 1 in global memory and counts[k + 1] += 2 through shared memory."""
    sh = pyptx.shared.array(20, u32)
    t = pyptx.thread_idx.x
    if t < 20:
        sh[t] = u32(0)
    pyptx.syncthreads()
    i = pyptx.grid(1)
    if i < n:
        k = keys[i]
        pyptx.atomic_add(counts, k + 2, u32(1))
        pyptx.atomic_add(sh, k + 1, u32(2))
    pyptx.syncthreads()
    if t < 16:
        pyptx.atomic_add(counts, t + 20, sh[t + 1])


def test_atomics_with_constant_offsets(bits):
    n = 700
    keys = RNG.integers(0, 16, n).astype(np.int32)
    counts = np.zeros(36, np.uint32)
    k = _fresh(_histogram)
    k[3, 256](counts, keys, n)
    h = np.bincount(keys, minlength=16).astype(np.uint32)
    want = np.zeros(36, np.uint32)
    want[2:18] = h
    want[20:36] = 2 * h
    np.testing.assert_array_equal(counts, want)
    ins = _instrs(pyptx.compile(k, arch="sm_80").ptx)
    reg = r"%r" if bits == 32 else r"%rd"
    assert any(re.fullmatch(r"atom\.global\.add\.u32 %r\d+, \[%rd\d+\+8\], 1", i) for i in ins)
    assert any(re.fullmatch(rf"atom\.shared\.add\.u32 %r\d+, \[{reg}\d+\+4\], 2", i)
               for i in ins)


@pyptx.kernel
def _tc_copy(out: u16[:, :], src: u16[:, :]):
    """One warp: cp_async 16 rows x 16 halves at (row + 1, col + 8) of a padded buffer, then
    ldmatrix x4 of the 16x16 tile and store the fragments back in place (identity layout
    check through the documented m8n8 fragment order)."""
    buf = pyptx.shared.array((18, 24), u16)
    lane = pyptx.thread_idx.x
    r = lane >> 1
    h = (lane & 1) * 8
    pyptx.cp_async(buf, (r + 1, h + 8), src, (r, h), 16)
    pyptx.cp_async_wait(0)
    pyptx.syncthreads()
    m = lane >> 3                       # matrix m of 4: rows (m & 1) * 8, cols (m >> 1) * 8
    row = (m & 1) * 8 + (lane & 7)
    f = pyptx.ldmatrix(buf, (row + 1, (m >> 1) * 8 + 8), count=4)
    g = lane >> 2
    c2 = (lane & 3) * 2
    for k in pyptx.static_range(4):
        rr = (k & 1) * 8 + g
        cc = (k >> 1) * 8 + c2
        lo, hi = pyptx.unpack2(f[k], pyptx.f16)
        out[rr, cc] = pyptx.bitcast(pyptx.f16(lo), u16)
        out[rr, cc + 1] = pyptx.bitcast(pyptx.f16(hi), u16)


def test_ldmatrix_and_cp_async_offsets(bits):
    src = RNG.standard_normal((16, 16)).astype(np.float16).view(np.uint16)
    out = np.full((16, 16), 0x7E00, np.uint16)
    k = _fresh(_tc_copy)
    k[1, 32](out, src)
    np.testing.assert_array_equal(out, src)
    ins = _instrs(pyptx.compile(k, arch="sm_80").ptx)
    reg = r"%r" if bits == 32 else r"%rd"
    cp = [i for i in ins if i.startswith("cp.async.cg")]
    assert len(cp) == 1 and re.search(rf"\[{reg}\d+\+64\], \[%rd\d+\]", cp[0])  # (1, 8) * 2 B
    ld = [i for i in ins if i.startswith("ldmatrix")]
    assert len(ld) == 1 and re.search(rf"\[{reg}\d+\+64\]$", ld[0])


def test_widen_rewrites_are_exact():
    text = """kernel @k(%x: ptr.global<f32>, %a: i32, %b: i32, %w: i64)
{
^entry:
  %s = sreg {name = "tid.x"} : i32
  %t = add %s, %a : i32
  %0 = cvt %t : i64
  %1 = cvt %b : i64
  %g = cvt %s : i64
  %2 = mul %0, %1 : i64
  %3 = mul %0, 3000000000:i64 : i64
  %4 = mul %0, 12:i64 : i64
  %5 = mul %w, %1 : i64
  %6 = gep %x, %g : ptr.global<f32>
  %7 = cvt %a : i64
  %8 = mul %7, %1 : i64
  %9 = load %6 : f32
  print %2, %3, %4, %5, %8, %9 {fmt = ""}
  ret
}
"""
    fn = parse_function(text)
    assert widen.run(fn)
    ins = [i for i in fn.entry.instrs[1:] if i.op != "cvt" or i.operands[0] is not
           fn.entry.instrs[0]]
    assert ins[3].op == "mulwide" and ins[3].type == i64     # varying i32 x i32
    assert ins[4].op == "mul"                                # 3e9 does not fit i32
    assert ins[5].op == "mulwide" and ins[5].operands[1].type == i32
    assert ins[6].op == "mul"                                # a real 64-bit operand
    assert ins[7].op == "gep" and ins[7].operands[1] is fn.entry.instrs[0]   # gep widens i32
    assert ins[9].op == "mul"      # block-uniform product: left to ptxas's uniform datapath
    mem = {"global": RNG.standard_normal(64).astype(np.float32).tobytes()}
    for a, b in ((123456, -98765), (-(1 << 31), (1 << 31) - 1), ((1 << 31) - 4, -(1 << 31))):
        params = {"x": 0, "a": a, "b": b, "w": -(1 << 40) + 5}
        assert run_function(fn, params, mem) == run_function(parse_function(text), params, mem)


def test_shared_nd_index_is_linearised_in_32_bits():
    fn = parse_function(pyptx.compile(_stencil, arch="sm_90").ir)
    geps = [ins for b in fn.blocks for ins in b.instrs if ins.op == "gep"]
    shared = [g for g in geps if g.type.space == "shared"]
    assert shared and all(g.operands[1].type == i32 for g in shared)
    assert any(g.operands[1].type == i64 for g in geps if g.type.space == "global")
