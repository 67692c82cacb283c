"""Hand-built before/after checks for DCE, CFG simplification, CSE, LICM, FMA, addressing,
plus a numeric check of FMA contraction (pipeline speed: benchmarks/bench_stages.py)."""
from fractions import Fraction

import numpy as np

from pyptx import types as T
from pyptx.ir import parse_function, print_function, verify
from pyptx.passes import addressing, cse, dce, fma, licm, run_pipeline, simplifycfg

from ir_interp import nearest, run_function


def _run(pass_mod, text, **kw):
    fn = parse_function(text)
    verify(fn)
    pass_mod.run(fn, **kw)
    verify(fn)
    return fn


def _ops(block):
    return [i.op for i in block.instrs]


def _blk(fn, name):
    return next(b for b in fn.blocks if b.name == name)


LOOP = """kernel @k(%x: ptr.global<f32>, %n: i32, %a: i32)
{
^entry:
  br ^head(0:i32, 0:i32)
^head(%i.0: i32, %dead.1: i32):
  %2 = cmp %i.0, %n {pred = "lt"} : bool_
  cbr %2, ^body, ^exit
^body:
  %3 = sreg {name = "tid.x"} : i32
  %4 = mul %a, 4:i32 : i32
  %5 = add %4, %3 : i32
  %6 = div %a, %n : i32
  %7 = add %i.0, %5 : i32
  %8 = gep %x, %7 : ptr.global<f32>
  %9 = load %8 : f32
  store %8, %9
  %10 = add %dead.1, %6 : i32
  %11 = add %i.0, 1:i32 : i32
  br ^head(%11, %10)
^exit:
  %12 = mul %a, %a : i32
  ret
}
"""


def test_dce_removes_dead_cycles_args_and_unreachable_blocks():
    fn = _run(dce, LOOP)
    head = _blk(fn, "head")
    assert len(head.args) == 1                          # %dead was only used by itself
    assert "div" not in _ops(_blk(fn, "body"))          # only fed the dead arg
    assert _ops(_blk(fn, "exit")) == ["ret"]
    assert _blk(fn, "entry").instrs[-1].succs[0][1][0].value == 0
    fn2 = _run(dce, "kernel @k()\n{\n^e:\n  ret\n^dead:\n  br ^e\n}\n")
    assert [b.name for b in fn2.blocks] == ["e"]


def test_licm_hoists_invariants_but_not_int_division():
    fn = _run(licm, LOOP)
    names = [b.name for b in fn.blocks]
    assert "head.ph" not in names                       # ^entry already is a preheader
    entry_ops = _ops(_blk(fn, "entry"))
    assert entry_ops == ["sreg", "mul", "add", "br"]
    assert "div" in _ops(_blk(fn, "body")) and "gep" in _ops(_blk(fn, "body"))


def test_licm_creates_a_preheader():
    text = """kernel @k(%x: ptr.global<f32>, %n: i32, %c: bool_)
{
^entry:
  cbr %c, ^head(0:i32), ^head(1:i32)
^head(%i.0: i32):
  %1 = gep %x, %n : ptr.global<f32>
  store %1, 1.0:f32
  %2 = add %i.0, 1:i32 : i32
  %3 = cmp %2, %n {pred = "lt"} : bool_
  cbr %3, ^head(%2), ^exit
^exit:
  ret
}
"""
    fn = _run(licm, text)
    ph = _blk(fn, "head.ph")
    assert _ops(ph) == ["gep", "br"] and len(ph.args) == 1
    assert all(t is ph for t, _ in fn.entry.instrs[-1].succs)


def test_cse_across_blocks_and_commutative():
    text = """kernel @k(%a: i32, %b: i32, %c: bool_)
{
^entry:
  %0 = add %a, %b : i32
  cbr %c, ^t, ^f
^t:
  %1 = add %b, %a : i32
  %2 = mul %a, 3:i32 : i32
  print %1, %2 {fmt = ""}
  br ^j
^f:
  %3 = mul %a, 3:i32 : i32
  print %3 {fmt = ""}
  br ^j
^j:
  %4 = mul %a, 3:i32 : i32
  %5 = sub %a, %b : i32
  %6 = sub %b, %a : i32
  print %0, %4, %5, %6 {fmt = ""}
  ret
}
"""
    fn = _run(cse, text)
    t, f, j = _blk(fn, "t"), _blk(fn, "f"), _blk(fn, "j")
    assert _ops(t) == ["mul", "print", "br"]                 # a+b reused from ^entry
    assert t.instrs[1].operands[0] is fn.entry.instrs[0]
    assert _ops(f) == ["mul", "print", "br"]                 # sibling: not dominated by ^t
    assert _ops(j)[:3] == ["mul", "sub", "sub"]              # mul in j not dominated by t/f


def test_simplifycfg_merges_and_bypasses():
    text = """kernel @k(%a: i32, %c: bool_)
{
^entry:
  cbr %c, ^fwd(%a), ^other
^fwd(%v.0: i32):
  br ^join(%v.0)
^other:
  br ^join(7:i32)
^join(%x.1: i32):
  br ^tail
^tail:
  print %x.1 {fmt = "%d"}
  ret
}
"""
    fn = _run(simplifycfg, text)
    names = [b.name for b in fn.blocks]
    # ^other stays: bypassing it would give a cbr with one target and two argument lists
    assert names == ["entry", "other", "join"]
    term = fn.entry.instrs[-1]
    assert [t.name for t, _ in term.succs] == ["join", "other"]
    assert term.succs[0][1][0] is fn.params[0]
    assert _ops(_blk(fn, "join")) == ["print", "ret"]


def test_simplifycfg_trivial_args_and_same_target_cbr():
    text = """kernel @k(%a: i32, %c: bool_)
{
^entry:
  cbr %c, ^j(%a), ^j(%a)
^j(%x.0: i32):
  print %x.0 {fmt = "%d"}
  ret
}
"""
    fn = _run(simplifycfg, text)
    assert len(fn.blocks) == 1
    assert fn.entry.instrs[0].operands[0] is fn.params[0]


FMA_TEXT = """kernel @k(%a: f32, %b: f32, %c: f32, %i: i32)
{
^entry:
  %0 = mul %a, %b : f32
  %1 = add %c, %0 : f32
  %2 = mul %a, %c : f32
  %3 = sub %2, %b : f32
  %4 = mul %b, %c : f32
  %5 = sub %a, %4 : f32
  %6 = mul %a, %a : f32
  %7 = add %6, %b : f32
  %8 = mul %i, %i : i32
  %9 = add %8, 1:i32 : i32
  print %1, %3, %5, %7, %6, %9 {fmt = ""}
  ret
}
"""


def test_fma_contraction_shapes():
    fn = _run(fma, FMA_TEXT)
    ops = _ops(fn.entry)
    assert ops.count("fma") == 3 and ops.count("neg") == 2
    assert "add" in ops and ops.count("mul") == 2    # %6 has two uses; the int mul stays


def test_fma_contraction_numerics():
    rng = np.random.default_rng(1)
    fn = parse_function(FMA_TEXT)
    fma.run(fn)
    for _ in range(50):
        a, b, c = (float(v) for v in rng.standard_normal(3).astype(np.float32))
        trace, _ = run_function(fn, {"a": a, "b": b, "c": c, "i": 3}, {})
        got = trace[0][2]
        fa, fb, fc = Fraction(a), Fraction(b), Fraction(c)

        def bits(q):
            return int(np.array(nearest(q, T.f32)).view(np.uint32))
        assert got[:3] == (bits(fa * fb + fc), bits(fa * fc - fb), bits(fa - fb * fc))


def test_addressing_folds_constant_offsets():
    text = """kernel @k(%x: ptr.global<f32>, %y: ptr.global<f64>, %i: i32, %j: i64)
{
^entry:
  %0 = add %i, 3:i32 : i32
  %1 = gep %x, %0 : ptr.global<f32>
  %2 = load %1 : f32
  %3 = sub %j, 2:i64 : i64
  %4 = gep %y, %3 : ptr.global<f64>
  %5 = gep %4, 5:i32 : ptr.global<f64>
  %6 = load %5 {offset = 1} : f64
  %7 = gep %x, 4:i32 : ptr.global<f32>
  store %7, %2
  print %6 {fmt = ""}
  ret
}
"""
    fn = _run(addressing, text)
    dce.run(fn)
    cse.run(fn)
    verify(fn)
    loads = [i for i in fn.entry.instrs if i.op in ("load", "store")]
    assert loads[0].attrs["offset"] == 12
    assert loads[0].operands[0].operands[1] is fn.params[2]
    assert loads[1].attrs["offset"] == 1 + (-2 + 5) * 8
    assert loads[1].operands[0].operands[1] is fn.params[3]
    assert loads[2].operands[0] is fn.params[0] and loads[2].attrs["offset"] == 16
    mem = {"global": np.arange(64, dtype=np.float32).tobytes()}
    orig = parse_function(text)
    params = {"x": 0, "y": 64, "i": 5, "j": 6}
    assert run_function(orig, params, mem) == run_function(fn, params, mem)


def test_pipeline_levels():
    fn = parse_function(LOOP)
    run_pipeline(fn, 0, False)
    assert print_function(fn) == print_function(parse_function(LOOP))
    fn1 = parse_function(LOOP)
    run_pipeline(fn1, 1, False)
    verify(fn1)
    assert "sreg" in _ops(_blk(fn1, "body"))          # no LICM at -O1
    texts = [LOOP, FMA_TEXT] * 10
    fns = [parse_function(t) for t in texts]
    for f in fns:
        run_pipeline(f, 2, True)
    for f in fns:
        verify(f)


def test_cse_keeps_ops_that_differ_only_in_attributes_or_type():
    text = """kernel @k(%a: i32, %b: i32)
{
^entry:
  %0 = cmp %a, %b {pred = "lt"} : bool_
  %1 = cmp %a, %b {pred = "ge"} : bool_
  %2 = cvt %a : i64
  %3 = cvt %a : u64
  %4 = cmp %a, %b {pred = "lt"} : bool_
  print %0, %1, %2, %3, %4 {fmt = ""}
  ret
}
"""
    fn = _run(cse, text)
    pr = fn.entry.instrs[-2]
    assert _ops(fn.entry) == ["cmp", "cmp", "cvt", "cvt", "print", "ret"]
    assert pr.operands[4] is pr.operands[0]


def test_addressing_folds_every_address_operand():
    """atomic, ldmatrix and both cp_async addresses get their constant parts as byte offsets,
    and accesses that differ only in a constant share one base pointer."""
    text = """kernel @k(%x: ptr.global<i32>, %g: ptr.global<u16>, %i: i32)
    shared @smem0: u16[64] align 16
{
^entry:
  %s = addr {space = "shared", symbol = "smem0"} : ptr.shared<u16>
  %0 = add %i, 3:i32 : i32
  %1 = gep %x, %0 : ptr.global<i32>
  %2 = atomic %1, 7:i32 {kind = "add"} : i32
  %3 = add %i, 8:i32 : i32
  %4 = gep %s, %3 : ptr.shared<u16>
  %5 = gep %g, %0 : ptr.global<u16>
  cp_async %4, %5 {nbytes = 16}
  %6 = ldmatrix %4 {count = 1, trans = false} : u32x1
  %7 = gep %s, %i : ptr.shared<u16>
  %8 = ldmatrix %7 {count = 1, trans = false} : u32x1
  print %2 {fmt = ""}
  ret
}
"""
    fn = _run(addressing, text)
    cse.run(fn)
    dce.run(fn)
    verify(fn)
    by_op = {i.op: i for i in fn.entry.instrs}
    at, cp = by_op["atomic"], by_op["cp_async"]
    assert at.attrs["offset"] == 12 and at.operands[0].operands[1] is fn.params[2]
    assert cp.attrs["offset"] == 16 and cp.attrs["src_offset"] == 6
    lds = [i for i in fn.entry.instrs if i.op == "ldmatrix"]
    assert lds[0].attrs["offset"] == 16 and "offset" not in lds[1].attrs
    assert lds[0].operands[0] is lds[1].operands[0] is cp.operands[0]   # one base (CSE)
