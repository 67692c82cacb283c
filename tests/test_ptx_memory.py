"""Memory, atomics, warp operations, synchronisation and print: PTX forms and ptxas acceptance."""
from __future__ import annotations

import re

import pytest
from ptx_ir_helpers import FnBuilder

from pyptx.errors import CompileError
from pyptx.ir.core import Const
from pyptx.ptx import emit
from pyptx.ptx.lower_sync import widen_format
from pyptx.types import bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from test_ptx_support import ARCHS, assemble_ok, instructions


def _ins(fn, arch="sm_80"):
    return instructions(emit(fn, arch).text)


def memory_kernel():
    b = FnBuilder("mem")
    x = b.ptr("x", f32)
    n = b.param("n", i64)
    sh = b.shared("tile", f32, 256)
    sh8 = b.shared("bytes", u8, 33, align=4)
    loc = b.local("scratch", f64, 8, align=8)
    tid = b.sreg("tid.x")
    s_ptr = b.addr(sh, "shared")
    l_ptr = b.addr(loc, "local")
    d = b.op("addr", [], b.fn.params[0].type.__class__("shared", i32), space="shared",
             symbol="__dynamic_shared")
    b.fn.dynamic_shared = True
    v = b.load(b.gep(x, tid), offset=8)                 # offset folded into the address
    b.store(b.gep(s_ptr, tid), v)
    b.op("barrier", [])
    w = b.load(b.gep(s_ptr, Const(i32, 5)))
    b.store(b.gep(l_ptr, n), b.op("cvt", [w], f64))
    b.store(b.gep(d, b.op("cvt", [tid], i16)), tid, offset=-4)
    b.store(b.gep(b.addr(sh8, "shared"), tid), Const(u8, 200))
    b.store(b.gep(x, n), b.op("cvt", [b.load(l_ptr, offset=16)], f32))
    b.ret()
    return b.fn


def test_memory_forms():
    fn = memory_kernel()
    text = emit(fn, "sm_80").text
    ins = instructions(text)
    assert re.search(r"^\s*\.shared \.align 16 \.b8 tile\[1024\];", text, re.M)
    assert re.search(r"^\s*\.shared \.align 4 \.b8 bytes\[33\];", text, re.M)
    assert re.search(r"^\s*\.local \.align 8 \.b8 scratch\[64\];", text, re.M)
    assert ".extern .shared .align 16 .b8 __dynamic_shared[];" in text
    assert any(re.fullmatch(r"ld\.global\.f32 %f\d+, \[%rd\d+\+8\]", i) for i in ins)
    assert any(re.fullmatch(r"st\.shared\.s32 \[%rd\d+\+-4\], %r\d+", i) for i in ins)
    assert any(re.fullmatch(r"mov\.u64 %rd\d+, tile", i) for i in ins)
    assert any(re.fullmatch(r"mad\.lo\.s64 %rd\d+, %rd\d+, 8, %rd\d+", i) for i in ins)
    assert any(re.fullmatch(r"add\.s64 %rd\d+, %rd\d+, 20", i) for i in ins)   # 5 * 4 bytes
    assert any(i.startswith("st.local.f64") for i in ins)
    assert any(i.startswith("ld.local.f64") and i.endswith("+16]") for i in ins)
    assert "bar.sync 0" in ins
    assert any(i.startswith("cvta.to.global.u64") for i in ins)
    assemble_ok([(emit(fn, a).text, a) for a in ARCHS])


def test_resources_see_shared_and_local():
    from pyptx.toolchain import resources
    res = resources(emit(memory_kernel(), "sm_80").text, "sm_80")
    assert res["shared_bytes"] >= 1024 + 33
    assert res["local_bytes"] >= 64
    assert res["registers"] > 0


def test_bool_load_store_as_bytes():
    b = FnBuilder("flags")
    x = b.ptr("x", bool_)
    flag = b.param("flag", bool_)
    v = b.load(x)
    b.store(b.gep(x, Const(i32, 1)), b.op("and", [v, flag], bool_))
    b.ret()
    m = emit(b.fn, "sm_80")
    ins = instructions(m.text)
    assert any(re.fullmatch(r"ld\.global\.u8 %rs\d+, \[%rd\d+\]", i) for i in ins)
    assert any(re.fullmatch(r"setp\.ne\.u16 %p\d+, %rs\d+, 0", i) for i in ins)
    assert any(re.fullmatch(r"selp\.u16 %rs\d+, 1, 0, %p\d+", i) for i in ins)
    assert any(re.fullmatch(r"st\.global\.u8 \[%rd\d+\], %rs\d+", i) for i in ins)
    assert any(re.fullmatch(r"ld\.param\.u8 %rs\d+, \[flag\]", i) for i in ins)
    assert [p.ptx_type for p in m.params] == ["u64", "u8"]
    assemble_ok([(m.text, "sm_80"), (m.text, "sm_90")])


ATOMIC_OK = [(k, t) for k, ts in {
    "add": [i32, u32, i64, u64, f32, f64], "min": [i32, u32, i64, u64],
    "max": [i32, u32, i64, u64], "exch": [i32, u32, i64, u64, f32, f64],
    "cas": [i32, u32, i64, u64, f32, f64], "and": [i32, u32, i64, u64],
    "or": [i32, u32, i64, u64], "xor": [i32, u32, i64, u64]}.items() for t in ts]

ATOMIC_SPELLING = {("add", i32): "atom.global.add.s32", ("add", u64): "atom.global.add.u64",
                   ("add", i64): "atom.global.add.u64", ("add", f32): "atom.global.add.f32",
                   ("min", i64): "atom.global.min.s64", ("max", u32): "atom.global.max.u32",
                   ("exch", f32): "atom.global.exch.b32", ("cas", i64): "atom.global.cas.b64",
                   ("xor", u32): "atom.global.xor.b32"}


def atomics_kernel(space):
    b = FnBuilder(f"atomics_{space}")
    outs = {}
    tid = b.sreg("tid.x")
    for k, t in ATOMIC_OK:
        if space == "global":
            p = b.ptr(f"a_{k}_{t.name}", t)
        else:
            p = b.addr(b.shared(f"s_{k}_{t.name}", t, 32), "shared")
        q = b.gep(p, tid)
        v = b.op("cvt", [tid], t)
        operands = [q, v, Const(t, 3)] if k == "cas" else [q, v]
        outs[(k, t)] = b.op("atomic", operands, t, kind=k)
        b.store(b.gep(p, Const(i32, 40)), outs[(k, t)])
    b.ret()
    return b.fn


@pytest.mark.parametrize("space", ["global", "shared"])
def test_atomics(space):
    fn = atomics_kernel(space)
    ops = {i.split()[0] for i in _ins(fn)}
    for (k, t), want in ATOMIC_SPELLING.items():
        assert want.replace("global", space) in ops
    assemble_ok([(emit(fn, a).text, a) for a in ARCHS])


@pytest.mark.parametrize("kind,t", [("add", i8), ("add", u16), ("min", f32), ("and", f64),
                                    ("exch", bool_), ("max", f16), ("cas", i16)])
def test_unsupported_atomics_are_compile_errors(kind, t):
    b = FnBuilder("bad_atomic")
    p = b.ptr("x", t)
    v = b.load(p)
    b.op("atomic", [p, v] + ([v] if kind == "cas" else []), t, kind=kind)
    b.ret()
    with pytest.raises(CompileError, match=f"atomic_{kind}"):
        emit(b.fn, "sm_80")


@pytest.mark.parametrize("t", [i32, u32, f32, i64, u64, f64, i16, u8, f16, bool_],
                         ids=lambda t: t.name)
def test_shfl_every_mode(t):
    b = FnBuilder(f"shfl_{t.name}")
    x = b.ptr("x", t)
    lane = b.sreg("laneid")
    v = b.load(b.gep(x, lane))
    for k, mode in enumerate(("bfly", "down", "up", "idx")):
        r = b.op("shfl", [v, Const(u32, 1) if mode != "idx" else lane, Const(u32, 0xFFFFFFFF)],
                 t, mode=mode)
        b.store(b.gep(x, b.op("add", [lane, Const(i32, 32 * (k + 1))], i32)), r)
    b.ret()
    ins = _ins(b.fn)
    shfls = [i for i in ins if i.startswith("shfl.sync")]
    assert len(shfls) == (8 if t.bits == 64 else 4)
    assert all(i.startswith("shfl.sync.") and ".b32 " in i for i in shfls)
    up = [i for i in shfls if i.startswith("shfl.sync.up")]
    assert all(i.split(",")[3].strip() == "0" for i in up)
    assert all(i.split(",")[3].strip() == "0x1f" for i in shfls if i not in up)
    if t.bits == 64:
        assert any(re.fullmatch(r"mov\.b64 \{%r\d+, %r\d+\}, %(rd|fd)\d+", i) for i in ins)
        assert any(re.fullmatch(r"mov\.b64 %(rd|fd)\d+, \{%r\d+, %r\d+\}", i) for i in ins)
    assemble_ok([(emit(b.fn, a).text, a) for a in ("sm_75", "sm_80", "sm_90")])


def test_vote_sync_fence():
    b = FnBuilder("warp")
    x = b.ptr("x", u32)
    lane = b.sreg("laneid")
    p = b.op("cmp", [lane, Const(i32, 7)], bool_, pred="lt")
    full = Const(u32, 0xFFFFFFFF)
    anyv = b.op("vote", [p, full], bool_, mode="any")
    allv = b.op("vote", [p, full], bool_, mode="all")
    bal = b.op("vote", [p, full], u32, mode="ballot")
    b.op("syncwarp", [full])
    for scope in ("gl", "cta", "sys"):
        b.op("fence", [], scope=scope)
    both = b.op("and", [anyv, allv], bool_)
    b.store(x, b.op("select", [both, bal, Const(u32, 5)], u32))
    b.ret()
    ins = _ins(b.fn)
    ops = [i.split()[0] for i in ins]
    for want in ("vote.sync.any.pred", "vote.sync.all.pred", "vote.sync.ballot.b32",
                 "bar.warp.sync", "membar.gl", "membar.cta", "membar.sys", "selp.b32"):
        assert want in ops
    assert any(re.fullmatch(r"vote\.sync\.ballot\.b32 %r\d+, %p\d+, 4294967295", i) for i in ins)
    assemble_ok([(emit(b.fn, a).text, a) for a in ARCHS])


def test_print_lowers_to_vprintf():
    b = FnBuilder("hello")
    x = b.ptr("x", f32)
    tid = b.sreg("tid.x")
    v = b.load(b.gep(x, tid))
    h = b.op("cvt", [v], f16)
    small = b.op("cvt", [tid], i8)
    big = b.op("cvt", [tid], u64)
    flag = b.op("cmp", [v, Const(f32, 0.0)], bool_, pred="gt")
    b.op("print", [tid, v, h, small, big, flag], None,
         fmt="tid %d x=%f h=%5.2f s=%hhd big=%lu flag=%u 100%%\n")
    b.op("print", [], None, fmt="no args\n")
    b.ret()
    m = emit(b.fn, "sm_80")
    text = m.text
    assert ".extern .func (.param .b32 func_retval0) vprintf" in text
    fmt = b"tid %ld x=%f h=%5.2f s=%ld big=%lu flag=%lu 100%%\n\0"
    want = f".global .align 1 .b8 $str0[{len(fmt)}] = {{{', '.join(map(str, fmt))}}};"
    assert want in text
    assert "$str1[9]" in text
    assert re.search(r"\.local \.align 8 \.b8 __pyptx_printf_buf\[48\];", text)
    ins = instructions(text)
    assert sum(i.startswith("call.uni (retval0), vprintf, (param0, param1)") for i in ins) == 2
    assert sum(i.startswith("st.local.f64") for i in ins) == 2           # f32 and f16 as f64
    assert sum(i.startswith("st.local.u64") for i in ins) == 4           # ints widened to 64
    assert any(i.startswith("cvt.f64.f16") for i in ins)
    assert any(i.startswith("cvta.local.u64") for i in ins)
    assert any(i.startswith("cvta.global.u64") for i in ins)
    assert "st.param.b64 [param1], 0" in ins
    assemble_ok([(text, a) for a in ("sm_80", "sm_90")])


@pytest.mark.parametrize("fmt,want", [
    ("%d", "%ld"), ("%5d|%-3u", "%5ld|%-3lu"), ("%x %X %o %i", "%lx %lX %lo %li"),
    ("%lld %hd %zu", "%ld %ld %lu"), ("%f %.3e %g %%d", "%f %.3e %g %%d"), ("%c", "%c"),
])
def test_widen_format(fmt, want):
    assert widen_format(fmt) == want
