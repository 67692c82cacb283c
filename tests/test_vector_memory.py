"""pyptx.vload / pyptx.vstore: one vector access for n consecutive elements.

Semantics on the CPU executor against numpy (random inputs, NaN/poisoned outputs), the PTX
forms (`ld.global.v4`, `ld.shared.v4`, b32 words for 8 x 16-bit), faults (out of bounds,
misaligned vector and scalar accesses), compile errors, and the IR text round trip.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import pyptx
from pyptx import f16, f32, i8, i32, toolchain, u8, u32
from pyptx.ir import parse_function, print_function, verify
from pyptx.ir.verifier import IRError
from kernel_factory import make_kernel
from test_cpu_util import HEADER, inp, run

RNG = np.random.default_rng(7)


def _random(dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (RNG.standard_normal(n) * 10).astype(dt)
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def _poison(like):
    return np.full_like(like, np.nan) if like.dtype.kind == "f" else np.full_like(
        like, np.iinfo(like.dtype).max // 3)


def _copy_kernel(dtype, lanes):
    """out[i..i+lanes) = x[i..i+lanes) reversed, then the first lane doubled (order matters)."""
    @pyptx.kernel
    def vcopy(out, x, n: i32, L: pyptx.constexpr):
        i = pyptx.grid(1) * L
        if i + L <= n:
            w = pyptx.vload(x, i, L)
            if L == 1:
                pyptx.vstore(out, i, (w[0] + w[0],))
            elif L == 2:
                pyptx.vstore(out, i, (w[1] + w[1], w[0]))
            elif L == 4:
                pyptx.vstore(out, i, (w[3] + w[3], w[2], w[1], w[0]))
            else:
                pyptx.vstore(out, i, (w[7] + w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0]))
    return vcopy


def _copy_reference(x, lanes):
    r = x.reshape(-1, lanes)[:, ::-1].copy()
    with np.errstate(over="ignore"):
        r[:, 0] = r[:, 0] + r[:, 0]
    return r.reshape(-1)


CASES = [(np.float32, 1), (np.float32, 2), (np.float32, 4), (np.float16, 2), (np.float16, 8),
         (np.int8, 4), (np.uint8, 2), (np.int16, 8), (np.uint16, 4), (np.float64, 2),
         (np.int64, 2), (np.uint32, 4), (np.int32, 4)]


@pytest.mark.parametrize("dtype,lanes", CASES, ids=lambda c: str(c))
def test_vload_vstore_match_numpy(cpu_device, dtype, lanes):
    n = 32 * lanes
    x = _random(dtype, n)
    out = _poison(x)
    _copy_kernel(dtype, lanes)[1, 32](out, x, n, lanes)
    assert np.array_equal(out, _copy_reference(x, lanes))


@pytest.mark.parametrize("dtype,lanes", [(np.float32, 4), (np.float16, 8), (np.uint8, 4),
                                         (np.float64, 2)])
def test_ptx_uses_one_vector_access(dtype, lanes):
    t = pyptx.types.from_dtype(dtype)
    ptx = pyptx.compile(_copy_kernel(dtype, lanes), signature=(t[:], t[:], i32, pyptx.constexpr),
                        constexprs={"L": lanes}).ptx
    if lanes == 8:            # 8 x 16-bit travels as 4 x b32
        assert len(re.findall(r"ld\.global(\.nc)?\.v4\.b32", ptx)) == 1
        assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 1
    else:
        mem = {np.float32: "f32", np.uint8: "u8", np.float64: "f64"}[dtype]
        assert len(re.findall(rf"ld\.global(\.nc)?\.v{lanes}\.{mem}", ptx)) == 1
        assert len(re.findall(rf"st\.global\.v{lanes}\.{mem}", ptx)) == 1
    assert not re.search(r"\bld\.global(\.nc)?\.(f32|u8|f64|b16) ", ptx)   # no scalar loads


@pytest.mark.parametrize("dtype,lanes", [(np.float32, 4), (np.float16, 8), (np.int8, 4),
                                         (np.float64, 2)])
def test_ptxas_accepts_the_vector_forms(dtype, lanes):
    if toolchain.find_ptxas() is None:
        pytest.skip("no ptxas (test_toolchain_available fails instead)")
    t = pyptx.types.from_dtype(dtype)
    for arch in ("sm_80", "sm_90"):
        ptx = pyptx.compile(_copy_kernel(dtype, lanes), arch=arch, constexprs={"L": lanes},
                            signature=(t[:], t[:], i32, pyptx.constexpr)).ptx
        toolchain.assemble(ptx, arch)            # raises ToolchainError if ptxas rejects it


@pyptx.kernel
def _scale3(out: f32[:], x: f32[:], n: i32):
    t = pyptx.grid(1)
    stride = pyptx.block_dim.x
    body = n // 4 * 4
    for i in range(t * 4, body, stride * 4):
        a, b, c, d = pyptx.vload(x, i, 4)
        pyptx.vstore(out, i, (a * 3.0, b * 3.0, c * 3.0, d * 3.0))
    for i in range(body + t, n, stride):
        out[i] = x[i] * 3.0


@given(n=st.integers(1, 200), block=st.sampled_from([32, 64]))
def test_vector_body_with_scalar_tail(cpu_device, n, block):
    """The streaming idiom: 4-wide accesses for the bulk, scalar ones for the last n % 4."""
    x = _random(np.float32, n)
    out = _poison(x)
    _scale3[1, block](out, x, n)
    assert np.array_equal(out, x * np.float32(3.0))


def test_two_d_arrays_use_the_last_axis(cpu_device):
    @pyptx.kernel
    def rows(out: f32[:, :], x: f32[:, :]):
        r = pyptx.block_idx.x
        j = pyptx.thread_idx.x * 4
        if j < x.shape[1]:
            a, b, c, d = pyptx.vload(x, (r, j), 4)
            pyptx.vstore(out, (r, j), (d, c, b, a))
    x = _random(np.float32, 6 * 16).reshape(6, 16)
    out = _poison(x)
    rows[6, 4](out, x)
    assert np.array_equal(out, x.reshape(6, 4, 4)[:, :, ::-1].reshape(6, 16))


def test_shared_memory_vectors(cpu_device):
    @pyptx.kernel
    def stage(out: f32[:], x: f32[:]):
        tile = pyptx.shared.array(256, f32)
        t = pyptx.thread_idx.x
        pyptx.vstore(tile, t * 4, pyptx.vload(x, t * 4, 4))
        pyptx.syncthreads()
        a, b, c, d = pyptx.vload(tile, 252 - t * 4, 4)     # another thread's four
        pyptx.vstore(out, t * 4, (a, b, c, d))
    ptx = pyptx.compile(stage).ptx
    assert "ld.shared.v4.f32" in ptx and "st.shared.v4.f32" in ptx
    x = _random(np.float32, 256)
    out = _poison(x)
    stage[1, 64](out, x)
    assert np.array_equal(out, x.reshape(64, 4)[::-1].reshape(-1))


def test_vload_of_a_u32_view_reads_sixteen_bytes(cpu_device):
    @pyptx.kernel
    def bytesum(out: u32[:], q: u8[:]):
        t = pyptx.thread_idx.x
        a, b, c, d = pyptx.vload(q.view(u32), t * 4, 4)
        out[t] = pyptx.popc(a) + pyptx.popc(b) + pyptx.popc(c) + pyptx.popc(d)
    q = _random(np.uint8, 16 * 32)
    out = _poison(np.zeros(32, np.uint32))
    bytesum[1, 32](out, q)
    ref = np.unpackbits(q).reshape(32, -1).sum(axis=1)
    assert np.array_equal(out, ref)
    assert "ld.global.nc.v4.u32" in pyptx.compile(bytesum).ptx


def _one_vload(lanes):
    @pyptx.kernel
    def probe(out: f32[:], x: f32[:], start: i32, L: pyptx.constexpr):
        t = pyptx.thread_idx.x
        v = pyptx.vload(x, start + t * L, L)
        out[t] = v[0]
    return probe


def test_misaligned_vload_is_a_memory_fault(cpu_device):
    x = _random(np.float32, 64)
    out = _poison(np.zeros(4, np.float32))
    with pytest.raises(pyptx.MemoryFault, match="misaligned 16-byte"):
        _one_vload(4)[1, 4](out, x, 2, 4)          # index 2 with 4 lanes
    _one_vload(4)[1, 4](out, x, 4, 4)              # aligned: fine
    assert np.array_equal(out, x[4:20:4])


def test_vload_past_the_end_is_a_memory_fault(cpu_device):
    x = _random(np.float32, 16)
    out = _poison(np.zeros(4, np.float32))
    with pytest.raises(pyptx.MemoryFault, match="past the end"):
        _one_vload(4)[1, 4](out, x, 4, 4)          # thread 3 reads x[16..19]
    assert np.isnan(out).all()                     # a faulting launch writes nothing back


def test_misaligned_scalar_access_is_a_memory_fault():
    x = _random(np.float32, 64)
    for space_decl, ld in (("", "ld.global.f32 %f1, [%rd1+2];"),
                           (".shared .align 4 .b8 sh[64];",
                            "mov.u64 %rd2, sh; ld.shared.u16 %rs1, [%rd2+3];")):
        ptx = HEADER + rf"""
.visible .entry mis(.param .u64 x)
{{
    {space_decl}
    .reg .b16 %rs<2>;
    .reg .b64 %rd<3>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [x];
    {ld}
    ret;
}}
"""
        with pytest.raises(pyptx.MemoryFault, match="misaligned"):
            run(ptx, "mis", 1, 32, [inp(x)])


def test_vstore_marks_only_its_array_written():
    @pyptx.kernel
    def k(out: f32[:], x: f32[:]):
        t = pyptx.thread_idx.x * 2
        a, b = pyptx.vload(x, t, 2)
        pyptx.vstore(out, t, (b, a))
    sig = {s.name: s.writable for s in pyptx.compile(k).signature}
    assert sig == {"out": True, "x": False}


def test_ir_text_round_trips_with_vector_types():
    ir = pyptx.compile(_copy_kernel(np.float16, 8), signature=(f16[:], f16[:], i32, pyptx.constexpr),
                       constexprs={"L": 8}).ir
    assert re.search(r"= vload %\d+.*: f16x8", ir) and "lane %" in ir and "vstore %" in ir
    fn = parse_function(ir)
    verify(fn)
    assert print_function(fn) == ir


@pytest.mark.parametrize("body,match", [
    ("a, b, c = pyptx.vload(x, 0, 3)", r"takes 1, 2, 4 lanes .* not 3"),
    ("a = pyptx.vload(x, 0, 8)", r"takes 1, 2, 4 lanes"),
    ("a, b = pyptx.vload(x, 1, 2)", r"multiple of 2, got 1"),
    ("a, b = pyptx.vload(x, 0, n)", r"compile-time int"),
    ("a = pyptx.vload(n, 0, 1)", r"needs an array"),
    ("pyptx.vstore(x, 0, 1.0)", r"must be a tuple"),
    ("pyptx.vstore(x, 0, (1.0, 2.0, 3.0))", r"not 3"),
    ("a, b, c, d, e, f, g, h = pyptx.vload(q, 0, 8)", r"view the array as u32"),
    ("a, b = pyptx.vload(bb, 0, 2)", r"bool_ arrays"),
])
def test_vector_compile_errors(body, match):
    k = make_kernel("import pyptx\nfrom pyptx import f32, u8, i32\n\n"
                    "@pyptx.kernel\n"
                    "def k(x: f32[:], q: u8[:], bb: pyptx.bool_[:], n: i32):\n"
                    f"    {body}\n", "k")
    with pytest.raises(pyptx.CompileError, match=match) as ei:
        pyptx.compile(k)
    assert ei.value.lineno == 6


def test_vload_of_i8_sign_extends(cpu_device):
    @pyptx.kernel
    def widen(out: i32[:], x: i8[:]):
        t = pyptx.thread_idx.x * 4
        a, b, c, d = pyptx.vload(x, t, 4)
        pyptx.vstore(out, t, (i32(a), i32(b), i32(c), i32(d)))
    x = np.array(RNG.integers(-128, 128, 128), np.int8)
    out = _poison(np.zeros(128, np.int32))
    widen[1, 32](out, x)
    assert np.array_equal(out, x.astype(np.int32))



_GOOD_IR = """kernel @k(%x: ptr.global<f32>)
{
^entry:
  %0 = vload %x : f32x4
  %1 = lane %0 {index = 3} : f32
  vstore %x, %1, %1 {offset = 8}
  ret
}
"""


@pytest.mark.parametrize("old,new,msg", [
    ("lane %0 {index = 3}", "lane %0 {index = 4}", "index within"),
    ("%1 = lane %0 {index = 3} : f32", "%1 = add %0, %0 : f32", "taken apart by 'lane'"),
    ("vstore %x, %1, %1 {", "vstore %x, %1, %1, %1 {", "1, 2, 4 or 8 lanes"),
    (": f32x4", ": f32x8", "1, 2, 4 or 8 lanes"),
    (": f32x4", ": f64x2", "VecType of elem"),
])
def test_verifier_rejects_misused_vector_values(old, new, msg):
    verify(parse_function(_GOOD_IR))
    with pytest.raises(IRError, match=msg):
        verify(parse_function(_GOOD_IR.replace(old, new)))
