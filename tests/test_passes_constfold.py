"""Constant folding: bit-exact against the reference interpreter, and the identity rules."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyptx import types as T
from pyptx.ir import Block, Const, Function, Instr, Param, parse_function, print_function, verify
from pyptx.passes import constfold
from pyptx.passes.evaluate import round_to_float

from ir_interp import canon, compute, run_function
from ir_strategies import FLOATS, INTS, SCALARS, const_value

INT_BIN = ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor"]
FLOAT_BIN = ["add", "sub", "mul", "div", "min", "max"]
FLOAT_UN = ["neg", "abs", "sqrt", "rcp", "floor", "ceil", "trunc", "rint"]


@st.composite
def op_specs(draw):
    """(op, result type, operand types, attrs) of a foldable op."""
    kind = draw(st.sampled_from(["ibin", "iun", "shift", "fbin", "fun", "fma", "cmp", "select",
                                 "cvt", "bitcast", "bits", "wide", "dp4a", "bool", "isnan"]))
    if kind == "ibin":
        t = draw(st.sampled_from(INTS))
        op = draw(st.sampled_from(INT_BIN + (["mulhi"] if t.bits >= 32 else [])))
        return op, t, [t, t], {}
    if kind == "iun":
        t = draw(st.sampled_from(INTS))
        return draw(st.sampled_from(["neg", "abs", "not"])), t, [t], {}
    if kind == "shift":
        t = draw(st.sampled_from(INTS))
        return draw(st.sampled_from(["shl", "shr"])), t, [t, draw(st.sampled_from(
            [T.u32, T.i32]))], {}
    if kind == "fbin":
        t = draw(st.sampled_from(FLOATS))
        return draw(st.sampled_from(FLOAT_BIN)), t, [t, t], {}
    if kind == "fun":
        t = draw(st.sampled_from(FLOATS))
        return draw(st.sampled_from(FLOAT_UN)), t, [t], {}
    if kind == "fma":
        t = draw(st.sampled_from(FLOATS))
        return "fma", t, [t, t, t], {}
    if kind == "cmp":
        t = draw(st.sampled_from(SCALARS))
        return "cmp", T.bool_, [t, t], {"pred": draw(st.sampled_from(
            ["eq", "ne", "lt", "le", "gt", "ge"]))}
    if kind == "select":
        t = draw(st.sampled_from(SCALARS))
        return "select", t, [T.bool_, t, t], {}
    if kind == "cvt":
        return "cvt", draw(st.sampled_from(SCALARS)), [draw(st.sampled_from(SCALARS))], {}
    if kind == "bitcast":
        src = draw(st.sampled_from(INTS + FLOATS))
        dst = draw(st.sampled_from([t for t in INTS + FLOATS if t.bits == src.bits]))
        return "bitcast", dst, [src], {}
    if kind == "bits":
        src = draw(st.sampled_from([T.i32, T.u32, T.i64, T.u64]))
        op = draw(st.sampled_from(["popc", "clz", "brev"]))
        return op, (src if op == "brev" else T.i32), [src], {}
    if kind == "wide":
        src = draw(st.sampled_from([T.i32, T.u32]))
        return "mulwide", (T.i64 if src.is_signed else T.u64), [src, src], {}
    if kind == "dp4a":
        t = draw(st.sampled_from([T.i32, T.u32]))
        return "dp4a", t, [draw(st.sampled_from([T.i32, T.u32])), draw(st.sampled_from(
            [T.i32, T.u32])), t], {}
    if kind == "isnan":
        return "isnan", T.bool_, [draw(st.sampled_from(FLOATS))], {}
    op = draw(st.sampled_from(["and", "or", "xor", "not"]))
    return op, T.bool_, [T.bool_] * (1 if op == "not" else 2), {}


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fold_is_bit_exact(data):
    op, t, tys, attrs = data.draw(op_specs())
    consts = [Const(ty, const_value(data.draw, ty)) for ty in tys]
    ins = Instr(op, consts, t, attrs)
    folded = constfold.fold_instr(ins)
    if folded is None:
        return
    assert isinstance(folded, Const) and folded.type == t
    vals = []
    for c in consts:
        vals.append(c.type.dtype.type(c.value) if c.type.is_float else c.value)
    with np.errstate(all="ignore"):
        expected = compute(op, t, attrs, vals, tys)
    assert canon(folded.value, t) == canon(expected, t), (op, t, consts, folded, expected)
    if t.is_float and op != "select" and not any(folded is c for c in consts):
        assert not math.isnan(folded.value)       # NaN results are left to the hardware


def _fold(text):
    fn = parse_function(text)
    constfold.run(fn)
    verify(fn)
    return fn


def _body(fn):
    return [i for i in fn.blocks[0].instrs]


def test_never_folds_int_division_by_zero_or_min_over_minus_one():
    for a, b in ((5, 0), (-2 ** 31, -1)):
        ins = Instr("div", [Const(T.i32, a), Const(T.i32, b)], T.i32)
        assert constfold.fold_instr(ins) is None
        ins = Instr("rem", [Const(T.i32, a), Const(T.i32, b)], T.i32)
        assert constfold.fold_instr(ins) is None


def test_never_folds_approx_loads_or_side_effects():
    assert constfold.fold_instr(Instr("approx", [Const(T.f32, 1.0)], T.f32, {"fn": "ex2"})) \
        is None
    fn = _fold("kernel @k(%p: ptr.global<i32>)\n{\n^e:\n  %0 = load %p : i32\n"
               "  %1 = atomic %p, 1:i32 {kind = \"add\"} : i32\n  store %p, %0\n  ret\n}\n")
    assert [i.op for i in _body(fn)] == ["load", "atomic", "store", "ret"]


def test_identities_are_exact_only():
    fn = _fold("""kernel @k(%x: i32, %f: f32, %c: bool_)
{
^e:
  %0 = add %x, 0:i32 : i32
  %1 = mul %0, 1:i32 : i32
  %2 = mul %1, 0:i32 : i32
  %3 = add %f, 0.0:f32 : f32
  %4 = mul %f, 0.0:f32 : f32
  %5 = mul %f, 1.0:f32 : f32
  %6 = and %x, 0:i32 : i32
  %7 = or %x, 0:i32 : i32
  %8 = select true:bool_, %x, %2 : i32
  %9 = select %c, %f, %f : f32
  print %1, %2, %3, %4, %5, %6, %7, %8, %9 {fmt = ""}
  ret
}
""")
    pr = _body(fn)[-2]
    x, f = fn.params[0], fn.params[1]
    ops = pr.operands
    assert ops[0] is x and isinstance(ops[1], Const) and ops[1].value == 0
    assert ops[2].op == "add" and ops[3].op == "mul"        # float +0.0 / *0.0 stay
    assert ops[4] is f and ops[5].value == 0 and ops[6] is x and ops[7] is x and ops[8] is f


def test_gep_by_zero_is_the_pointer_and_other_geps_stay():
    fn = _fold("kernel @k(%p: ptr.global<f32>, %i: i32)\n{\n^e:\n"
               "  %0 = gep %p, 0:i32 : ptr.global<f32>\n  %1 = load %0 : f32\n"
               "  %2 = gep %p, 1:i32 : ptr.global<f32>\n  %3 = gep %2, %i : ptr.global<f32>\n"
               "  store %3, %1\n  ret\n}\n")
    body = _body(fn)
    assert [i.op for i in body] == ["load", "gep", "gep", "store", "ret"]
    assert body[0].operands[0] is fn.params[0]


def test_cbr_on_constant_becomes_br():
    fn = _fold("kernel @k()\n{\n^e:\n  %0 = cmp 1:i32, 2:i32 {pred = \"lt\"} : bool_\n"
               "  cbr %0, ^a, ^b\n^a:\n  ret\n^b:\n  ret\n}\n")
    term = fn.blocks[0].instrs[-1]
    assert term.op == "br" and term.succs[0][0].name == "a"


@pytest.mark.parametrize("src,dst,v,expected", [
    (T.f32, T.i32, 3.9e9, 2 ** 31 - 1), (T.f32, T.i32, -7.9, -7), (T.f64, T.u8, -3.0, 0),
    (T.f32, T.i32, math.nan, 0), (T.f64, T.i64, -math.inf, -2 ** 63), (T.i32, T.i8, 300, 44),
    (T.u64, T.f32, 2 ** 64 - 1, 1.8446744073709552e19), (T.f64, T.f16, 65520.0, math.inf),
    (T.f64, T.f32, 1e-46, 0.0), (T.i64, T.f64, 2 ** 53 + 1, 9007199254740992.0),
    (T.f32, T.bool_, -0.0, False), (T.bool_, T.f32, True, 1.0)])
def test_cvt_semantics(src, dst, v, expected):
    folded = constfold.fold_instr(Instr("cvt", [Const(src, v)], dst))
    if dst.is_float and math.isinf(expected):
        assert folded.value == expected
    else:
        assert folded.value == expected and type(folded.value) is type(expected)


def test_shifts_past_width():
    def f(op, t, a, n):
        return constfold.fold_instr(Instr(op, [Const(t, a), Const(T.u32, n)], t)).value
    assert f("shl", T.i32, 1, 32) == 0 and f("shl", T.i32, 1, 31) == -2 ** 31
    assert f("shr", T.i32, -5, 40) == -1 and f("shr", T.u32, 2 ** 31, 40) == 0
    assert f("shr", T.i8, -128, 7) == -1 and f("shr", T.u8, 128, 7) == 1


def test_fma_single_rounding():
    a = float(np.float32(1 + 2 ** -12))
    c = float(np.float32(-(1 + 2 ** -11)))
    # a*a = 1 + 2^-11 + 2^-24 exactly; a*a + c = 2^-24 (two roundings would give 0)
    folded = constfold.fold_instr(Instr("fma", [Const(T.f32, a), Const(T.f32, a),
                                                Const(T.f32, c)], T.f32))
    assert folded.value == 2 ** -24


@given(st.fractions(min_value=-1e6, max_value=1e6))
@settings(max_examples=300, deadline=None)
def test_round_to_float_matches_numpy_f64_route(q):
    # float(q) is correctly rounded to f64; f64 -> f32 double rounding can only differ at ties
    got = round_to_float(q, T.f64)
    assert got == float(q)
