"""Every IR op on every type it applies to: emitted for each supported arch, accepted by ptxas,
and spelled with the instruction the PTX ISA prescribes for its exact semantics."""
from __future__ import annotations

import random
import re

import pytest
from ptx_ir_helpers import FnBuilder

from pyptx.frontend.values import const_value
from pyptx.ir.core import Const
from pyptx.ptx import emit
from pyptx.types import SCALARS, bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from test_ptx_support import ARCHS, assemble_ok, instructions

INTS = [i8, i16, i32, i64, u8, u16, u32, u64]
FLOATS = [f16, f32, f64]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "min", "max"]
FLOAT_UNARY = ["neg", "abs", "sqrt", "rcp", "floor", "ceil", "trunc", "rint"]
PREDS = ["eq", "ne", "lt", "le", "gt", "ge"]


def rand_const(t, rng):
    if t.is_bool:
        return Const(t, True)
    if t.is_float:
        return Const(t, const_value(rng.uniform(-100, 100), t) or 1.5)
    lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (1, (1 << t.bits) - 1)
    return Const(t, rng.randint(lo, hi) or 3)


class AllOps:
    """A kernel applying every op to loaded values of type t; each result goes to its own array."""

    def __init__(self, t, seed=0):
        self.rng = random.Random(seed)
        self.b = b = FnBuilder(f"all_{t.name}")
        self.t = t
        self.n_out = 0
        ps = [b.ptr(n, t) for n in "xyz"]
        self.tid = b.sreg("tid.x")
        self.x, self.y, self.z = (b.load(b.gep(p, self.tid)) for p in ps)

    def out(self, v):
        p = self.b.ptr(f"o{self.n_out}", v.type)
        self.n_out += 1
        self.b.store(self.b.gep(p, self.tid), v)
        return v

    def op(self, op, operands, t=None, **attrs):
        return self.out(self.b.op(op, operands, t if t is not None else self.t, **attrs))

    def c(self):
        return rand_const(self.t, self.rng)

    def finish(self):
        self.b.ret()
        return self.b.fn


def build_all_ops(t):
    k = AllOps(t)
    x, y, z, c = k.x, k.y, k.z, k.c
    if t.is_int:
        for op in INT_BINARY:
            k.op(op, [x, y]); k.op(op, [x, c()]); k.op(op, [c(), y])
        for op in ("neg", "abs", "not"):
            k.op(op, [x])
        amount = k.b.op("cvt", [y], u32) if t != u32 else y
        for op in ("shl", "shr"):
            k.op(op, [x, amount]); k.op(op, [x, Const(u32, 3)])
        if t.bits >= 32:
            k.op("mulhi", [x, y])
            for op in ("popc", "clz"):
                k.op(op, [x], i32)
            k.op("brev", [x])
        if t.bits == 32:
            k.op("mulwide", [x, y], i64 if t.is_signed else u64)
            k.op("dp4a", [x, y, z])
    elif t.is_float:
        for op in FLOAT_BINARY:
            k.op(op, [x, y]); k.op(op, [x, c()])
        for op in FLOAT_UNARY:
            k.op(op, [x])
        k.op("fma", [x, y, z]); k.op("fma", [x, c(), c()])
        k.op("isnan", [x], bool_)
        if t == f32:
            for fn in ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt", "rcp", "sqrt"):
                k.op("approx", [x], fn=fn)
    else:
        for op in ("and", "or", "xor"):
            k.op(op, [x, y]); k.op(op, [x, c()])
        k.op("not", [x])
    for pred in PREDS:
        k.op("cmp", [x, y], bool_, pred=pred)
        k.op("cmp", [x, c()], bool_, pred=pred)
    cond = k.b.op("cmp", [x, y], bool_, pred="lt") if not t.is_bool else z
    k.op("select", [cond, x, y]); k.op("select", [cond, c(), y])
    for dst in SCALARS.values():
        if dst != t:
            k.op("cvt", [x], dst)
        if dst.bits == t.bits and not dst.is_bool and not t.is_bool and dst != t:
            k.op("bitcast", [x], dst)
    return k.finish()


ALL_TYPES = list(SCALARS.values())


@pytest.fixture(scope="module")
def emitted():
    return {(t.name, arch): emit(build_all_ops(t), arch) for t in ALL_TYPES for arch in ARCHS}


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_every_op_assembles_on_every_arch(emitted, t):
    assemble_ok([(emitted[(t.name, a)].text, a) for a in ARCHS])


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_no_ftz_and_float_arithmetic_is_rounded(emitted, t):
    text = emitted[(t.name, "sm_80")].text
    # the one .ftz: fast_exp/fast_exp2's ex2.approx.ftz (an approximation by request anyway)
    assert [i for i in instructions(text) if ".ftz" in i] == (
        [] if t != f32 else [i for i in instructions(text) if i.startswith("ex2.approx.ftz.f32")])
    for ins in instructions(text):
        m = re.match(r"(add|sub|mul|div|fma|sqrt|rcp)\.(\w+)", ins)
        if m and m.group(2) in ("f16", "f32", "f64"):
            pytest.fail(f"unrounded float arithmetic: {ins}")


# The instruction each (op, type) must become: written from the PTX ISA, not from the backend.
EXPECTED = [
    ("add", i32, "add.s32"), ("add", u16, "add.u16"), ("add", f32, "add.rn.f32"),
    ("add", f64, "add.rn.f64"), ("add", f16, "add.rn.f16"), ("sub", f32, "sub.rn.f32"),
    ("mul", i32, "mul.lo.s32"), ("mul", u64, "mul.lo.u64"), ("mul", f32, "mul.rn.f32"),
    ("div", f32, "div.rn.f32"), ("div", f64, "div.rn.f64"), ("div", i32, "div.s32"),
    ("div", u32, "div.u32"), ("rem", i64, "rem.s64"), ("rem", u32, "rem.u32"),
    ("min", u32, "min.u32"), ("max", i16, "max.s16"), ("min", f32, "min.f32"),
    ("and", i32, "and.b32"), ("xor", u64, "xor.b64"), ("or", bool_, "or.pred"),
    ("shr", i32, "shr.s32"), ("shr", u32, "shr.u32"), ("shl", i64, "shl.b64"),
    ("neg", f32, "neg.f32"), ("abs", f64, "abs.f64"), ("neg", i32, "neg.s32"),
    ("sqrt", f32, "sqrt.rn.f32"), ("sqrt", f64, "sqrt.rn.f64"), ("rcp", f32, "rcp.rn.f32"),
    ("floor", f32, "cvt.rmi.f32.f32"), ("ceil", f64, "cvt.rpi.f64.f64"),
    ("trunc", f32, "cvt.rzi.f32.f32"), ("rint", f32, "cvt.rni.f32.f32"),
    ("fma", f32, "fma.rn.f32"), ("fma", f16, "fma.rn.f16"), ("mulhi", u32, "mul.hi.u32"),
    ("mulhi", i64, "mul.hi.s64"), ("popc", u64, "popc.b64"), ("clz", i32, "clz.b32"),
    ("brev", u32, "brev.b32"), ("mulwide", i32, "mul.wide.s32"), ("mulwide", u32, "mul.wide.u32"),
    ("isnan", f32, "setp.nan.f32"), ("approx", f32, "tanh.approx.f32"),
    ("approx", f32, "ex2.approx.ftz.f32"), ("dp4a", i32, "dp4a.s32.s32"),
]


@pytest.mark.parametrize("op,t,want", EXPECTED, ids=lambda v: getattr(v, "name", v))
def test_op_spelling(emitted, op, t, want):
    assert want in {i.split()[0] for i in instructions(emitted[(t.name, "sm_80")].text)}


@pytest.mark.parametrize("t,pred,want", [
    (i32, "lt", "setp.lt.s32"), (u32, "lt", "setp.lo.u32"), (u32, "le", "setp.ls.u32"),
    (u64, "gt", "setp.hi.u64"), (u16, "ge", "setp.hs.u16"), (i8, "ge", "setp.ge.s16"),
    (f32, "ne", "setp.neu.f32"), (f32, "lt", "setp.lt.f32"), (f64, "eq", "setp.eq.f64"),
    (f16, "ne", "setp.neu.f16"), (u8, "lt", "setp.lo.u16"),
])
def test_compare_predicates(emitted, t, pred, want):
    assert want in {i.split()[0] for i in instructions(emitted[(t.name, "sm_80")].text)}


@pytest.mark.parametrize("t", [i8, u8], ids=lambda t: t.name)
def test_8bit_arithmetic_is_renormalised(t):
    b = FnBuilder("k8")
    x = b.ptr("x", t)
    v = b.load(x)
    s = b.op("add", [v, v], t)
    b.store(x, s)
    b.ret()
    ins = instructions(emit(b.fn, "sm_80").text)
    k = next(n for n, i in enumerate(ins) if i.startswith("add."))
    norm = "cvt.s16.s8" if t.is_signed else "cvt.u16.u8"
    dst = ins[k].split()[1].rstrip(",")
    assert ins[k].startswith("add.s16" if t.is_signed else "add.u16")
    assert ins[k + 1] == f"{norm} {dst}, {dst}"
    assert f"ld.global.{t.ptx}" in ins[2] or any(i.startswith(f"ld.global.{t.ptx}") for i in ins)


def test_f16_min_max_below_sm80_goes_through_f32():
    b = FnBuilder("mm")
    x = b.ptr("x", f16)
    v = b.load(x)
    b.store(x, b.op("max", [v, b.load(b.gep(x, Const(i32, 1)))], f16))
    b.ret()
    low, high = emit(b.fn, "sm_75"), emit(b.fn, "sm_80")
    assert "max.f16" not in low.text and "max.f32" in low.text and "cvt.rn.f16.f32" in low.text
    assert "max.f16" in high.text
    assemble_ok([(low.text, "sm_75"), (high.text, "sm_80")])


def test_float_to_int_conversion_is_rzi_and_int_to_float_is_rn(emitted):
    ins = {i.split()[0] for i in instructions(emitted[("f32", "sm_80")].text)}
    assert {"cvt.rzi.s32.f32", "cvt.rzi.u64.f32", "cvt.rzi.s8.f32", "cvt.f64.f32",
            "cvt.rn.f16.f32"} <= ins
    ins = {i.split()[0] for i in instructions(emitted[("i64", "sm_80")].text)}
    assert {"cvt.rn.f32.s64", "cvt.rn.f64.s64", "cvt.rn.f16.s64", "cvt.s32.s64"} <= ins
    ins = {i.split()[0] for i in instructions(emitted[("i32", "sm_80")].text)}
    assert {"cvt.s64.s32", "cvt.u64.s32"} <= ins          # widening extends per the source


def test_bool_conversions(emitted):
    ins = instructions(emitted[("bool_", "sm_80")].text)
    assert any(i.startswith("selp.f32") and "0f3F800000, 0f00000000" in i for i in ins)
    assert any(i.startswith("selp.b16") and "0x3C00, 0x0000" in i for i in ins)
    ins = instructions(emitted[("f32", "sm_80")].text)
    assert any(i.startswith("setp.neu.f32") and i.endswith("0f00000000") for i in ins)
