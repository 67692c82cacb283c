"""Printer/parser round trip: print(parse(print(f))) == print(f), on random and hand-written IR."""
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from pyptx import types as T
from pyptx.ir import (Block, Const, Function, Instr, IRError, Param, parse_function,
                      print_function, verify)

from ir_strategies import functions

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(functions())
def test_random_functions_round_trip(fn):
    verify(fn)
    text = print_function(fn)
    back = parse_function(text)
    verify(back)
    assert print_function(back) == text


def _const_fn(consts):
    fn = Function("c", params=[Param("p", T.PtrType("global", T.f32), 0)])
    b = Block("entry")
    fn.blocks.append(b)
    for c in consts:
        b.append(Instr("print", [c], None, {"fmt": "%f"}))
    b.append(Instr("ret", []))
    return fn


ODD = [(T.f32, -0.0), (T.f32, math.inf), (T.f32, -math.inf), (T.f32, float(np.float32(1e-45))),
       (T.f32, float(np.float32(0.1))), (T.f16, 6e-8 and float(np.float16(6e-8))),
       (T.f16, 65504.0), (T.f64, 5e-324), (T.f64, 0.1), (T.f64, -1.7976931348623157e308),
       (T.i64, -2 ** 63), (T.u64, 2 ** 64 - 1), (T.i8, -128), (T.bool_, True), (T.bool_, False)]


@pytest.mark.parametrize("t,v", ODD)
def test_odd_constants_exact(t, v):
    fn = _const_fn([Const(t, v)])
    back = parse_function(print_function(fn))
    got = back.blocks[0].instrs[0].operands[0]
    assert got.type == t
    assert repr(got.value) == repr(v)


@pytest.mark.parametrize("t,bits", [(T.f32, 0x7fc00123), (T.f64, 0x7ff8000000000abc),
                                    (T.f16, 0x7e01), (T.f32, 0xffc00000)])
def test_nan_payload_round_trips(t, bits):
    v = float(np.array(bits, dtype=f"u{t.dtype.itemsize}").view(t.dtype))
    fn = _const_fn([Const(t, v)])
    text = print_function(fn)
    assert hex(bits) in text
    got = parse_function(text).blocks[0].instrs[0].operands[0].value
    assert int(np.array(got).astype(t.dtype).view(f"u{t.dtype.itemsize}")) == bits


def test_attributes_locations_and_decls_round_trip():
    text = '''
kernel @k(%x: ptr.global<f32>, %x_shape0: i32)
    shared @tile: f32[256] align 16
    local @acc: i32[8] align 4
    const @taps: f32[2] align 16 data "0000803f000000c0"
    dynamic_shared
    attrs {fma = true, min_arch = 80, ratio = -0.0, source_file = "a\\\\b\\"c\\n\\u00e9"}
{
^entry:
  %0 = sreg {name = "ctaid.x"} : i32 loc(5:9)
  %1 = addr {space = "shared", symbol = "__dynamic_shared"} : ptr.shared<f32>
  %2 = gep %x, %0 : ptr.global<f32>
  %3 = load %2 {offset = -8} : f32 loc(6:1)
  print %3, %0 {fmt = "v=%f i=%d\\n\\t\\"q\\""}
  %4 = addr {space = "const", symbol = "taps"} : ptr.const<f32>
  %5 = load %4 {offset = 4} : f32
  br ^next(%3)
^next(%acc.4: f32):
  store %2, %acc.4 {offset = 4}
  ret
}
'''
    fn = parse_function(text)
    verify(fn)
    assert fn.dynamic_shared and fn.shared[0].count == 256 and fn.locals[0].align == 4
    assert fn.consts[0].data == np.array([1.0, -2.0], "<f4").tobytes()
    assert fn.attrs["source_file"] == 'a\\b"c\né' and fn.attrs["min_arch"] == 80
    assert repr(fn.attrs["ratio"]) == "-0.0"
    pr = fn.blocks[0].instrs[4]
    assert pr.attrs["fmt"] == 'v=%f i=%d\n\t"q"'
    assert fn.blocks[0].instrs[0].loc == (5, 9)
    assert fn.blocks[0].instrs[3].attrs["offset"] == -8
    assert fn.blocks[1].args[0].hint == "acc"
    out = print_function(fn)
    assert print_function(parse_function(out)) == out


def test_syntax_and_name_errors_are_ir_errors():
    with pytest.raises(IRError):
        parse_function("kernel @k() {\n^e:\n  %0 = add : \n}")
    with pytest.raises(IRError, match="undefined"):
        parse_function("kernel @k()\n{\n^e:\n  %0 = neg %9 : i32\n  ret\n}\n")
    with pytest.raises(IRError, match="unknown block"):
        parse_function("kernel @k()\n{\n^e:\n  br ^nowhere\n}\n")


def test_import_pyptx_does_not_import_lark():
    code = "import sys, pyptx, pyptx.ir, pyptx.passes; assert 'lark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=".")
