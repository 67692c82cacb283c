"""The frontend's IR for every language construct: ops present, CFG shape, types, metadata.

Every lowered function also passes the IR verifier.  (Semantics are checked end to end in
tests/test_frontend_semantics.py.)
"""
from __future__ import annotations

import os
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import load_module  # noqa: E402
from pyptx import types as T  # noqa: E402
from pyptx.compiler import resolve_param_types  # noqa: E402
from pyptx.frontend import lower_kernel  # noqa: E402
from pyptx.ir import verify  # noqa: E402

HEAD = ("import pyptx\nfrom pyptx import thread_idx, block_idx, block_dim, grid_dim, WARP_SIZE\n"
        "from pyptx import f32, i32, u32, i64, u64, f16, f64, "
        "i8, u8, i16, bool_, constexpr\nSCALE = 3\n")


def lower(src: str, constexprs=None, name="k"):
    mod = load_module(HEAD + src)
    fn = getattr(mod, name)
    fn = fn.py_func if hasattr(fn, "py_func") else fn
    out = lower_kernel(fn, resolve_param_types(fn), constexprs or {})
    verify(out)
    return out


def ops(fn) -> Counter:
    return Counter(i.op for i in fn.instructions())


def stores(fn):
    return [i for i in fn.instructions() if i.op == "store"]


def stored_type(fn, k=0):
    return stores(fn)[k].operands[1].type


def test_saxpy_params_signature_and_metadata():
    fn = lower("""
def k(out: f32[:, :], x: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i, 0] = a * x[i]
""")
    assert [p.name for p in fn.params] == ["out", "out_shape0", "out_shape1", "x", "x_shape0",
                                           "a", "n"]
    assert fn.params[0].type == T.PtrType("global", T.f32)
    assert fn.attrs["written_params"] == {"out"}
    sig = fn.attrs["signature"]
    assert [(s.name, s.kind, s.ndim, s.writable) for s in sig] == [
        ("out", "array", 2, True), ("x", "array", 1, False), ("a", "scalar", 0, False),
        ("n", "scalar", 0, False)]
    assert fn.attrs["uses_printf"] is False
    first = fn.attrs["first_line"]
    assert all(i.loc is not None and i.loc[0] >= first for i in fn.instructions())
    assert any("out[i, 0]" in t for t in fn.attrs["source_lines"].values())
    c = ops(fn)
    assert c["sreg"] == 3 and c["cbr"] == 1 and c["ret"] == 1 and c["store"] == 1


def test_2d_index_is_64bit():
    fn = lower("def k(x: f32[:, :], i: i32, j: i32):\n    x[i, j] = 1.0\n")
    gep = [i for i in fn.instructions() if i.op == "gep"][0]
    assert gep.operands[1].type == T.i64


def test_1d_index_stays_i32_and_u32_widens():
    fn = lower("def k(x: f32[:], i: i32, j: u32):\n    x[i] = x[j]\n")
    geps = [i for i in fn.instructions() if i.op == "gep"]
    assert sorted(g.operands[1].type.name for g in geps) == ["i32", "i64"]


@pytest.mark.parametrize("expr,want", [
    ("h * 2.0", "f16"), ("h + n", "f64"), ("n + 1", "i32"), ("n / 2", "f32"), ("b8 + 1", "i8"),
    ("u + n", "i64"), ("n // 2", "i32"), ("h * h", "f16"), ("f32(n) * 2", "f32"),
    ("n << 2", "i32"), ("(n > 1) + (n > 2)", "bool_"), ("-n", "i32"), ("abs(h)", "f16"),
    ("max(n, 2.5)", "f64"), ("pyptx.math.exp(h)", "f16"), ("pyptx.math.exp(n)", "f64"),
    ("pyptx.math.sqrt(d)", "f64"), ("pyptx.popc(u)", "i32"), ("pyptx.ballot(n > 0)", "u32"),
    ("SCALE * n", "i32"), ("(1 + 2) if n else 0", "i32"), ("(1.5 * 2) if n else 0", "f32"),
    ("2**40 if n else 0", "i64"), ("True if n else False", "bool_"),
])
def test_promotion_follows_numpy2(expr, want):
    fn = lower(f"def k(out: f64[:], h: f16, n: i32, u: u32, b8: i8, d: f64):\n"
               f"    v = {expr}\n    out[0] = v\n")
    st = stores(fn)[0]
    src = st.operands[1]
    # the stored value is converted to f64; look through the cvt
    if src.op == "cvt" if hasattr(src, "op") else False:
        src = src.operands[0]
    assert src.type.name == want


def test_local_has_one_type_accumulator():
    fn = lower("""
def k(out: f16[:], x: f16[:], n: i32):
    s = 0
    for i in range(n):
        s += x[i]
    out[0] = s
""")
    loop_args = [a for b in fn.blocks for a in b.args]
    assert any(a.type == T.f16 for a in loop_args)
    assert not any(a.type in (T.f32, T.f64) for a in loop_args)
    assert stored_type(fn) == T.f16 and "cvt" not in ops(fn)


def test_accumulator_promoted_by_later_assignment():
    fn = lower("""
def k(out: f32[:], x: f32[:], n: i32):
    s = 0
    for i in range(n):
        s = s + x[i]
    out[0] = s
""")
    assert [a.type for b in fn.blocks for a in b.args if a.hint == "s"] == [T.f32]


def test_constant_local_stays_compile_time():
    fn = lower("""
def k(out: f32[:], n: i32):
    TILE = 16
    buf = pyptx.shared.array((TILE, TILE), f32)
    for i in range(n):
        buf[i, 0] = 1.0
    out[0] = buf[1, 1]
""")
    assert fn.shared[0].count == 256


def test_break_continue_blocks():
    fn = lower("""
def k(out: i32[:], n: i32):
    t = 0
    for i in range(n):
        if i == 3:
            continue
        if i > 7:
            break
        t += i
    out[0] = t
""")
    c = ops(fn)
    assert c["cbr"] == 3 and c["ret"] == 1
    assert len(fn.blocks) >= 7


def test_loop_variable_keeps_last_value():
    fn = lower("""
def k(out: i32[:], n: i32):
    i = -1
    for i in range(n):
        pass
    out[0] = i
""")
    assert stored_type(fn) == T.i32
    assert isinstance(stores(fn)[0].operands[1], pyptx.ir.BlockArg)


def test_negative_and_unknown_step():
    fn = lower("def k(out: i32[:], n: i32, s: i32):\n    for i in range(n, 0, -1):\n"
               "        out[i] = i\n    for j in range(0, n, s):\n        out[j] = j\n")
    preds = [i.attrs["pred"] for i in fn.instructions() if i.op == "cmp"]
    assert preds[0] == "gt" and {"lt", "gt"} <= set(preds[1:])


def test_static_range_unrolls():
    fn = lower("""
def k(out: f32[:], N: constexpr):
    for j in pyptx.static_range(N):
        out[j] = j * 2.0
""", {"N": 5})
    sts = stores(fn)
    assert len(sts) == 5 and "cbr" not in ops(fn)
    assert [s.operands[1].value for s in sts] == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_constexpr_if_is_folded():
    src = """
def k(out: f32[:], FAST: constexpr):
    if FAST:
        out[0] = pyptx.math.fast_exp(out[0])
    else:
        out[0] = pyptx.math.sqrt(out[0])
"""
    assert "approx" in ops(lower(src, {"FAST": True}))
    c = ops(lower(src, {"FAST": False}))
    assert "approx" not in c and c["sqrt"] == 1 and "cbr" not in c


def test_short_circuit_guards_load():
    fn = lower("def k(out: f32[:], x: f32[:], n: i32, i: i32):\n"
               "    if i < n and x[i] > 0:\n        out[0] = 1.0\n")
    load = [i for i in fn.instructions() if i.op == "load"][0]
    first_cmp = [i for i in fn.instructions() if i.op == "cmp"][0]
    assert load.block is not first_cmp.block     # the load only runs after the guard


def test_ifexp_evaluates_one_side():
    fn = lower("def k(out: f32[:], x: f32[:], n: i32, i: i32):\n"
               "    out[0] = x[i] if i < n else 0.0\n")
    load = [i for i in fn.instructions() if i.op == "load"][0]
    assert load.block is not fn.entry and "select" not in ops(fn)


def test_chained_comparison_and_not():
    fn = lower("def k(out: bool_[:], i: i32, n: i32):\n    out[0] = not (0 <= i < n)\n")
    assert ops(fn)["cmp"] == 2 and stored_type(fn) == T.bool_


def test_bare_return_goes_to_single_exit():
    fn = lower("""
def k(out: f32[:], n: i32):
    if n < 0:
        return
    for i in range(n):
        if i == 5:
            return
        out[i] = 1.0
""")
    assert ops(fn)["ret"] == 1


def test_python_floor_division_and_modulo_ops():
    from pyptx.passes import strength
    fn = lower("def k(out: i32[:], a: i32, b: i32):\n    out[0] = a // b\n    out[1] = a % b\n")
    c = ops(fn)
    assert c["floordiv"] == 1 and c["floormod"] == 1 and "div" not in c
    strength.run(fn, use_ranges=False)          # what the backend gets: PTX's div/rem + fix-ups
    c = ops(fn)
    assert c["div"] == 1 and c["rem"] == 1 and c["select"] >= 4 and "floordiv" not in c
    fn = lower("def k(out: u32[:], a: u32):\n    out[0] = a // 8\n    out[1] = a % 8\n")
    strength.run(fn, use_ranges=False)
    c = ops(fn)
    assert "select" not in c and c["shr"] == 1 and c["and"] == 1 and "div" not in c


def test_float_floor_division():
    c = ops(lower("def k(out: f32[:], a: f32, b: f32):\n    out[0] = a // b\n"))
    assert c["floor"] == 1 and c["div"] == 1


def test_power_by_squaring():
    assert ops(lower("def k(out: f32[:], a: f32):\n    out[0] = a ** 5\n"))["mul"] == 3


def test_shared_local_dynamic_memory():
    fn = lower("""
def k(out: f32[:]):
    s = pyptx.shared.array((4, 8), f32)
    l = pyptx.local.array(3, i32)
    d = pyptx.shared.dynamic(f32)
    s[1, 2] = 1.0
    l[0] = 2
    d[5] = 3.0
    out[0] = s[1, 2] + l[0] + d[5]
""")
    assert [(m.elem, m.count) for m in fn.shared] == [(T.f32, 32)]
    assert [(m.elem, m.count) for m in fn.locals] == [(T.i32, 3)]
    assert fn.dynamic_shared
    syms = {i.attrs["symbol"] for i in fn.instructions() if i.op == "addr"}
    assert "__dynamic_shared" in syms and len(syms) == 3
    assert fn.attrs["written_params"] == {"out"}


def test_view_reinterprets():
    fn = lower("def k(x: f32[:], out: i32[:]):\n    v = x.view(u8)\n    out[0] = len(v)\n"
               "    out[1] = i32(v[3])\n")
    assert any(i.op == "bitcast" and i.type == T.PtrType("global", T.u8)
               for i in fn.instructions())


def test_writes_through_view_and_device_function_are_tracked():
    fn = lower("""
@pyptx.func
def put(a, i: i32, v):
    a[i] = v

def k(x: f32[:], y: f32[:], z: u32[:]):
    put(x, 0, 1.0)
    w = y.view(u32)
    pyptx.atomic_add(w, 0, 1)
    q = z[0]
""")
    assert fn.attrs["written_params"] == {"x", "y"}
    assert [s.writable for s in fn.attrs["signature"]] == [True, True, False]


def test_atomics_and_float_minmax_cas_loop():
    fn = lower("""
def k(a: i32[:], f: f32[:], s: f32[:, :]):
    old = pyptx.atomic_add(a, 0, 1)
    pyptx.atomic_max(a, 1, old)
    pyptx.atomic_cas(a, 2, 0, 5)
    pyptx.atomic_min(f, 0, 1.5)
    pyptx.atomic_add(s, (1, 2), 1)
""")
    kinds = [i.attrs["kind"] for i in fn.instructions() if i.op == "atomic"]
    assert kinds == ["add", "max", "cas", "cas", "add"]
    assert ops(fn)["cbr"] == 2


def test_warp_intrinsics():
    fn = lower("""
def k(out: f32[:], b: u8[:], n: i32):
    v = out[0]
    v += pyptx.shfl_xor(v, 16) + pyptx.shfl_down(v, 1) + pyptx.shfl_up(v, 1) + pyptx.shfl_idx(v, 0)
    w = pyptx.shfl_xor(b[0], 1)
    out[1] = v + w
    if pyptx.vote_any(v > 0) and pyptx.vote_all(n > 0):
        out[0] = f32(pyptx.ballot(n > 1))
    pyptx.syncwarp()
    pyptx.syncthreads()
    pyptx.threadfence()
""")
    modes = [i.attrs["mode"] for i in fn.instructions() if i.op in ("shfl", "vote")]
    assert Counter(modes) == Counter(["bfly", "down", "up", "idx", "bfly", "any", "all", "ballot"])
    shfl_b = [i for i in fn.instructions() if i.op == "shfl"][4]
    assert shfl_b.type == T.i32
    c = ops(fn)
    assert c["barrier"] == 1 and c["syncwarp"] == 1 and c["fence"] == 1


def test_bit_intrinsics_and_bitcast():
    fn = lower("""
def k(out: i32[:], u: u32, x: f32):
    out[0] = pyptx.popc(u) + pyptx.clz(u8(u)) + i32(pyptx.brev(u))
    out[1] = pyptx.dp4a(i32(u), i32(u), 0)
    out[2] = pyptx.bitcast(x, i32)
""")
    c = ops(fn)
    assert c["popc"] == c["clz"] == c["brev"] == c["dp4a"] == 1 and c["bitcast"] == 1


def test_grid_and_indices():
    fn = lower("def k(out: i32[:, :]):\n    i, j = pyptx.grid(2)\n    out[i, j] = pyptx.lane_id()"
               " + thread_idx.z + grid_dim.y + WARP_SIZE\n")
    names = [i.attrs["name"] for i in fn.instructions() if i.op == "sreg"]
    assert {"ctaid.x", "ntid.y", "tid.y", "laneid", "tid.z", "nctaid.y"} <= set(names)


def test_device_function_tuple_and_multiple_returns():
    fn = lower("""
@pyptx.func
def sort2(a: f32, b: f32):
    if a > b:
        return b, a
    return a, b

@pyptx.func
def clamp(v, lo, hi) -> f32:
    return min(max(v, lo), hi)

def k(out: f32[:], x: f32, y: f32):
    lo, hi = sort2(x, y)
    out[0] = clamp(lo, 0, 1)
    out[1] = hi
""")
    joins = [b for b in fn.blocks if len(b.args) == 2]
    assert joins and all(a.type == T.f32 for a in joins[0].args)
    assert stored_type(fn, 0) == T.f32


def test_device_function_annotation_converts_same_kind():
    fn = lower("""
@pyptx.func
def half(v: f32):
    return v * 0.5

def k(out: f64[:], d: f64):
    out[0] = half(d)
""")
    assert any(i.op == "cvt" and i.type == T.f32 for i in fn.instructions())


def test_math_uses_mathlib_and_fast_variants():
    c = ops(lower("def k(out: f32[:], x: f32):\n    out[0] = pyptx.math.exp(x)\n"))
    assert "approx" not in c and sum(c.values()) > 10            # inlined mathlib code
    c = ops(lower("def k(out: f32[:], x: f32):\n    out[0] = pyptx.math.fast_exp(x) + "
                  "pyptx.math.fast_rsqrt(x) + pyptx.math.fma(x, x, 1.0) + pyptx.math.floor(x)\n"))
    assert c["approx"] == 2 and c["fma"] == 1 and c["floor"] == 1
    c = ops(lower("def k(out: f32[:], x: f32):\n    out[0] = pyptx.math.rsqrt(x)\n"))
    assert "approx" not in c and c["sqrt"] == 1 and c["rcp"] == 1     # accurate: no .approx


def test_print_format():
    fn = lower("def k(n: i32, u: u64, x: f32, b: bool_):\n    print('n =', n, u, x, b, 7, '%')\n")
    pr = [i for i in fn.instructions() if i.op == "print"][0]
    assert pr.attrs["fmt"] == "n = %d %lu %f %d 7 %%\n"
    assert fn.attrs["uses_printf"]


def test_casts():
    fn = lower("def k(out: f64[:], x: f32, n: i32):\n    out[0] = f64(i8(x)) + float(n) + int(x)"
               " + u8(n)\n")
    tys = [i.type.name for i in fn.instructions() if i.op == "cvt"]
    assert {"i8", "f32", "i32", "u8"} <= set(tys)


def test_tuple_unpacking_swap_in_loop():
    fn = lower("""
def k(out: i32[:], n: i32):
    a, b = 0, 1
    for i in range(n):
        a, b = b, a + b
    out[0] = a
""")
    head = [b for b in fn.blocks if len(b.args) == 3][0]
    assert all(a.type == T.i32 for a in head.args)


def test_module_constants_and_closure_constants():
    fn = lower("def k(out: i32[:]):\n    out[0] = SCALE * 2\n")
    assert stores(fn)[0].operands[1].value == 6
