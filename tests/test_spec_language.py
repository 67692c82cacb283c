"""Types, promotion and casts, end to end: real kernels on the CPU executor vs numpy.

Each test compiles a kernel defined in this file (or made from source by kernel_factory), runs it
with random inputs and NaN/sentinel-poisoned outputs, and compares with numpy.  The §2.2
statements live in test_spec_lang_stmts.py, the §2.3 intrinsics in test_spec_lang_intrinsics.py.
"""
from __future__ import annotations

import os
import re
import sys
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import make_kernel  # noqa: E402
from pyptx import (bool_, constexpr, f16, f32, f64, i8, i16, i32, i64, u8, u16,  # noqa: E402,F401
                   u32, u64)

SCALARS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "bool_"]
NP = {n: np.dtype({"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                   "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
                   "f32": "float32", "f64": "float64", "bool_": "bool"}[n]) for n in SCALARS}


def rand(rng, dt, n, lo=None, hi=None):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = info.min if lo is None else lo
        hi = info.max if hi is None else hi
        return rng.integers(lo, hi, n, dtype=dt, endpoint=True)
    lo = -100 if lo is None else lo
    hi = 100 if hi is None else hi
    return rng.uniform(lo, hi, n).astype(dt)


def poison(dt, shape):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return np.full(shape, np.nan, dt)
    if dt.kind == "b":
        return np.ones(shape, dt)          # callers store a mix of True/False over it
    return np.full(shape, 0x5A, dt) if dt.itemsize == 1 else np.full(shape, -7 if dt.kind == "i" else 77, dt)


# ---- 2.1 scalars and arrays of every type ---------------------------------------------------

@pytest.mark.parametrize("t", SCALARS)
def test_copy_every_scalar_type_array_and_param(t, cpu_device):
    """`T[:]` arrays and scalar params of every type: out[i] = x[i]; out2[i] = s (a launch scalar)."""
    k = make_kernel(f"""
        import pyptx
        from pyptx import {t}
        @pyptx.kernel
        def copy_{t}(out: {t}[:], out2: {t}[:], x: {t}[:], s: {t}, n: pyptx.i32):
            i = pyptx.grid(1)
            if i < n:
                out[i] = x[i]
                out2[i] = s
        """)
    rng = np.random.default_rng(1)
    dt = NP[t]
    n = 77
    x = rand(rng, dt, n)
    out = poison(dt, n + 3)
    out2 = poison(dt, n + 3)
    s = dt.type(1 if dt.kind != "b" else False) if dt.kind != "f" else dt.type(-2.5)
    k[2, 64](out, out2, x, s, n)
    np.testing.assert_array_equal(out[:n], x)
    np.testing.assert_array_equal(out2[:n], np.full(n, s, dt))
    np.testing.assert_array_equal(out[n:], poison(dt, 3))       # nothing written past n


@pytest.mark.parametrize("t", [t for t in SCALARS if t != "bool_"])  # bool+bool: test_bool_arrays
def test_scalar_param_type_in_arithmetic(t, cpu_device):
    """A scalar parameter has exactly its numpy type: x[i] + s promotes like numpy."""
    k = make_kernel(f"""
        import pyptx
        from pyptx import {t}
        @pyptx.kernel(fma=False)
        def addp_{t}(out: {t}[:], x: {t}[:], s: {t}):
            i = pyptx.grid(1)
            out[i] = x[i] + s
        """)
    rng = np.random.default_rng(2)
    dt = NP[t]
    x = rand(rng, dt, 64)
    s = rand(rng, dt, 1)[0]
    out = poison(dt, 64)
    k[1, 64](out, x, s)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, (x + s).astype(dt))


@pyptx.kernel
def bool_ops(o_and: bool_[:], o_or: bool_[:], o_xor: bool_[:], o_not: bool_[:], o_cmp: bool_[:],
             o_int: i32[:], a: bool_[:], b: bool_[:], x: i32[:]):
    i = pyptx.grid(1)
    o_and[i] = a[i] & b[i]
    o_or[i] = a[i] | b[i]
    o_xor[i] = a[i] ^ b[i]
    o_not[i] = not a[i]
    o_cmp[i] = x[i] > 0
    o_int[i] = a[i] + x[i]


def test_bool_arrays(cpu_device):
    rng = np.random.default_rng(3)
    n = 64
    a, b = rng.random(n) < 0.5, rng.random(n) < 0.5
    x = rng.integers(-5, 5, n).astype(np.int32)
    outs = [np.zeros(n, np.bool_) if j % 2 else np.ones(n, np.bool_) for j in range(5)]
    oi = np.full(n, -99, np.int32)
    bool_ops[1, n](*outs, oi, a, b, x)
    np.testing.assert_array_equal(outs[0], a & b)
    np.testing.assert_array_equal(outs[1], a | b)
    np.testing.assert_array_equal(outs[2], a ^ b)
    np.testing.assert_array_equal(outs[3], ~a)
    np.testing.assert_array_equal(outs[4], x > 0)
    np.testing.assert_array_equal(oi, a + x)
    # stored as one byte 0/1
    assert set(np.unique(outs[0].view(np.uint8))) <= {0, 1}


@pyptx.kernel(fma=False)
def f16_math(o_add: f16[:], o_mul: f16[:], o_div: f16[:], o_lit: f16[:], o_mix: f32[:],
             o_cmp: bool_[:], a: f16[:], b: f16[:], c: f32[:]):
    i = pyptx.grid(1)
    o_add[i] = a[i] + b[i] - a[i] * b[i]
    o_mul[i] = a[i] * b[i]
    o_div[i] = a[i] / b[i]
    o_lit[i] = a[i] * 2.0 + 1          # weak literals keep f16
    o_mix[i] = a[i] + c[i]             # f16 + f32 -> f32
    o_cmp[i] = a[i] < b[i]


def test_f16_arithmetic(cpu_device):
    rng = np.random.default_rng(4)
    n = 96
    a = rng.uniform(-8, 8, n).astype(np.float16)
    b = rng.uniform(0.5, 8, n).astype(np.float16)
    c = rng.uniform(-8, 8, n).astype(np.float32)
    outs = [np.full(n, np.nan, np.float16) for _ in range(4)] + [np.full(n, np.nan, np.float32),
                                                                np.zeros(n, np.bool_)]
    f16_math[2, 48](*outs, a, b, c)
    np.testing.assert_array_equal(outs[0], a + b - a * b)
    np.testing.assert_array_equal(outs[1], a * b)
    np.testing.assert_array_equal(outs[2], a / b)
    np.testing.assert_array_equal(outs[3], a * np.float16(2.0) + np.float16(1))
    np.testing.assert_array_equal(outs[4], a + c)
    np.testing.assert_array_equal(outs[5], a < b)


# ---- n-d arrays ---------------------------------------------------------------------------

@pyptx.kernel
def nd3(out: f64[:, :, :], x: f64[:, :, :], shp: i32[:]):
    i = block_idx_x()
    j = pyptx.thread_idx.y
    k = pyptx.thread_idx.x
    if i < x.shape[0] and j < x.shape[1] and k < x.shape[2]:
        out[i, j, k] = x[i, j, k] * 2.0 + i * 100 + j * 10 + k
    if i == 0 and j == 0 and k == 0:
        shp[0] = x.shape[0]
        shp[1] = x.shape[1]
        shp[2] = x.shape[2]
        shp[3] = len(x)


@pyptx.func
def block_idx_x():
    return pyptx.block_idx.x


def test_3d_arrays_shape_len(cpu_device):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 7))
    out = np.full_like(x, np.nan)
    shp = np.full(4, -1, np.int32)
    nd3[4, (8, 6)](out, x, shp)
    ii, jj, kk = np.meshgrid(np.arange(3), np.arange(5), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(out, x * 2.0 + ii * 100 + jj * 10 + kk)
    np.testing.assert_array_equal(shp, [3, 5, 7, 3])


@pyptx.kernel
def nd2_rowmajor(out: i16[:, :], x: i16[:, :]):
    i = pyptx.block_idx.x
    j = pyptx.thread_idx.x
    if j < x.shape[1]:
        out[i, j] = x[i, x.shape[1] - 1 - j]


def test_2d_row_major_i16(cpu_device):
    x = np.arange(6 * 11, dtype=np.int16).reshape(6, 11)
    out = np.full_like(x, -1)
    nd2_rowmajor[6, 16](out, x)
    np.testing.assert_array_equal(out, x[:, ::-1])


# ---- .view ---------------------------------------------------------------------------------

@pyptx.kernel
def view_f32_as_u32(out: u32[:, :], x: f32[:, :], shp: i32[:]):
    v = x.view(u32)
    i = pyptx.block_idx.x
    j = pyptx.thread_idx.x
    if j < v.shape[1]:
        out[i, j] = v[i, j]
    shp[0] = v.shape[0]
    shp[1] = v.shape[1]


@pyptx.kernel
def view_u8_as_u32(out: u32[:, :], x: u8[:, :], shp: i32[:]):
    v = x.view(u32)                  # last dim shrinks by 4
    i = pyptx.block_idx.x
    j = pyptx.thread_idx.x
    if j < v.shape[1]:
        out[i, j] = v[i, j]
    shp[0] = v.shape[0]
    shp[1] = v.shape[1]


@pyptx.kernel
def view_f64_as_i16(out: i16[:], x: f64[:], shp: i32[:]):
    v = x.view(i16)                  # last dim grows by 4
    j = pyptx.grid(1)
    if j < len(v):
        out[j] = v[j]
    shp[0] = len(v)
    v[0] = v[0]


def test_view_same_size(cpu_device):
    x = np.random.default_rng(6).standard_normal((3, 5)).astype(np.float32)
    out = np.zeros((3, 5), np.uint32)
    shp = np.full(2, -1, np.int32)
    view_f32_as_u32[3, 8](out, x, shp)
    np.testing.assert_array_equal(out, x.view(np.uint32))
    np.testing.assert_array_equal(shp, [3, 5])


def test_view_smaller_to_larger(cpu_device):
    x = np.random.default_rng(7).integers(0, 256, (3, 12), dtype=np.uint8)
    out = np.zeros((3, 3), np.uint32)
    shp = np.full(2, -1, np.int32)
    view_u8_as_u32[3, 8](out, x, shp)
    np.testing.assert_array_equal(out, x.view(np.uint32))
    np.testing.assert_array_equal(shp, [3, 3])


def test_view_larger_to_smaller(cpu_device):
    x = np.random.default_rng(8).standard_normal(5)
    out = np.full(20, 7, np.int16)
    shp = np.full(1, -1, np.int32)
    view_f64_as_i16[1, 32](out, x, shp)
    np.testing.assert_array_equal(out, x.view(np.int16))
    np.testing.assert_array_equal(shp, [20])


# ---- 64-bit offsets, negative index ------------------------------------------------------------

@pyptx.kernel
def big2d(out: f32[:, :], i: i32, j: i32):
    out[i, j] = 1.0


@pyptx.kernel
def big3d(out: f32[:, :, :], i: i32, j: i32, k: i32):
    out[i, j, k] = 1.0


def _has_wide_offset(ptx: str) -> bool:
    return bool(re.search(r"\b(mul\.wide\.[su]32|mad\.wide\.[su]32|mul\.lo\.[su]64|"
                          r"mad\.lo\.[su]64|cvt\.[su]64\.[su]32)", ptx))


@pytest.mark.parametrize("k", [big2d, big3d], ids=["2d", "3d"])
def test_nd_offsets_are_64_bit(k):
    """An n-d element offset (i*shape1 + j ...) is computed in 64 bits: no 32-bit mul.lo of the
    row index by a shape feeds an address."""
    ptx = pyptx.compile(k).ptx
    assert _has_wide_offset(ptx), ptx
    body = ptx[ptx.index("{"):]
    for m in re.finditer(r"mul\.lo\.[su]32\s+(%r\d+),", body):
        reg = m.group(1)
        # a 32-bit product may exist only if it is never widened into an address
        assert not re.search(rf"cvt\.[su]64\.[su]32\s+%rd\d+,\s*{re.escape(reg)};", body), body


def test_offset_past_2_31_elements_on_cpu(cpu_device):
    """The executor computes the same 64-bit address: a [70000, 40000] view (2.8e9 elements)
    can't be allocated here, so check the faulting address of a just-out-of-bounds store."""
    small = np.zeros((4, 4), np.float32)
    big2d[1, 1](small, 3, 3)
    assert small[3, 3] == 1.0
    with pytest.raises(pyptx.MemoryFault):
        big2d[1, 1](small, 4, 0)


@pyptx.kernel
def neg_index(out: f32[:], x: f32[:], k: i32):
    out[0] = x[k]


@pyptx.kernel
def neg_index2(out: f32[:, :], k: i32):
    out[1, k] = 5.0


def test_negative_index_is_out_of_bounds(cpu_device):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(1, np.float32)
    neg_index[1, 1](out, x, 3)
    assert out[0] == 3
    with pytest.raises(pyptx.MemoryFault):
        neg_index[1, 1](out, x, -1)
    with pytest.raises(pyptx.MemoryFault):
        neg_index[1, 1](out, x, 8)


def test_negative_index_nd_outside_buffer_faults(cpu_device):
    """A negative n-d index whose flat offset leaves the buffer faults.  (out[1, -1] lands on
    out[0, 3] in flat memory: like compute-sanitizer, the executor checks the buffer, not each
    index; docs/decisions.md.)"""
    out = np.zeros((2, 4), np.float32)
    neg_index2[1, 1](out, 2)
    assert out[1, 2] == 5.0
    with pytest.raises(pyptx.MemoryFault):
        neg_index2[1, 1](out, -5)      # before the buffer


# ---- constexpr ------------------------------------------------------------------------------

@pyptx.kernel
def cexpr(out: f32[:], N: constexpr, SCALE: constexpr, FLAG: constexpr):
    i = pyptx.thread_idx.x
    acc = 0.0
    for k in pyptx.static_range(N):
        acc += k
    if FLAG:
        acc = -acc
    out[i] = acc * SCALE + i


def _cexpr_ref(n, scale, flag):
    acc = float(sum(range(n)))
    acc = -acc if flag else acc
    return np.float32(acc) * np.float32(scale) + np.arange(8, dtype=np.float32)


def test_constexpr_launch_specialize_compile(cpu_device):
    out = np.full(8, np.nan, np.float32)
    cexpr[1, 8](out, 4, 1.5, False)
    np.testing.assert_array_equal(out, _cexpr_ref(4, 1.5, False))
    cexpr[1, 8](out, 5, 2.0, True)
    np.testing.assert_array_equal(out, _cexpr_ref(5, 2.0, True))
    sk = cexpr.specialize(N=3, SCALE=0.5, FLAG=True)
    out[:] = np.nan
    sk[1, 8](out)
    np.testing.assert_array_equal(out, _cexpr_ref(3, 0.5, True))
    a = pyptx.compile(cexpr, constexprs={"N": 3, "SCALE": 0.5, "FLAG": True}).ptx
    b = pyptx.compile(cexpr, constexprs={"N": 4, "SCALE": 0.5, "FLAG": True}).ptx
    assert a != b
    assert a == pyptx.compile(cexpr, constexprs={"N": 3, "SCALE": 0.5, "FLAG": True}).ptx


# ---- NumPy-2 promotion, weak literals --------------------------------------------------------

PROMO_CASES = [
    # (a type, b type or literal source, op)
    ("i8", "1", "+"), ("i8", "1", "*"), ("i8", "1", "-"), ("u8", "1", "+"), ("i16", "3", "//"),
    ("u16", "3", "%"), ("u8", "2", "<<"), ("i8", "1", ">>"), ("u32", "5", "&"), ("i8", "5", "|"),
    ("i16", "5", "^"), ("f16", "2.0", "*"), ("f16", "2", "+"), ("f16", "0.5", "-"),
    ("f16", "3.0", "/"), ("f32", "1", "+"), ("f32", "1e-3", "*"), ("i64", "1", "+"),
    ("u64", "1", "+"), ("i8", "i16", "+"), ("i32", "f32", "+"), ("i16", "f16", "*"),
    ("i8", "f16", "+"), ("u32", "i32", "+"), ("u64", "i64", "+"), ("u8", "i8", "-"),
    ("i64", "f32", "*"), ("u16", "f16", "+"), ("f16", "f32", "+"), ("f32", "f64", "*"),
    ("bool_", "i8", "+"), ("bool_", "f16", "*"), ("u8", "u16", "*"), ("i32", "1.5", "*"),
    ("u8", "2.0", "+"), ("bool_", "1.5", "+"), ("i8", "-1", "*"),
]


@pytest.mark.parametrize("ta,b,op", PROMO_CASES, ids=[f"{a}{o}{b}" for a, b, o in PROMO_CASES])
def test_numpy2_promotion(ta, b, op, cpu_device):
    """`out[i] = a[i] OP b` with out typed as numpy's result: exact values and exact result type
    (checked by also storing into an f64 array, which would differ if pyptx computed wider)."""
    lit = b not in NP
    rng = np.random.default_rng(9)
    da = NP[ta]
    n = 64
    a = rand(rng, da, n, *( (-20, 20) if da.kind in "iu" and op in "+*-" and False else (None, None)))
    if op in ("<<", ">>"):
        a = rand(rng, da, n, 0 if da.kind == "u" else -50, 50)
    if lit:
        bval = eval(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rt = np.result_type(da, type(bval)) if not isinstance(bval, int) or True else None
            rt = (np.zeros(1, da) + bval).dtype if op not in ("<<", ">>") else da
        expr_b = b
        bnp = bval
    else:
        db = NP[b]
        rt = np.result_type(da, db)
        bnp = rand(rng, db, n)
        if op in ("//", "%"):
            bnp[bnp == 0] = 1
        expr_b = "b[i]"
    rt_name = [k for k, v in NP.items() if v == rt][0]
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel(fma=False)
        def promo(out: {rt_name}[:], wide: f64[:], a: {ta}[:], b: {b if not lit else 'i32'}[:]):
            i = pyptx.grid(1)
            r = a[i] {op} {expr_b}
            out[i] = r
            wide[i] = r
        """)
    out = poison(rt, n)
    wide = np.full(n, np.nan)
    bb = bnp if not lit else np.zeros(n, np.int32)
    k[1, n](out, wide, a, bb)
    pyop = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
            "//": np.floor_divide, "%": np.remainder, "<<": np.left_shift, ">>": np.right_shift,
            "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[op]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lit:
            want = pyop(a, bnp)
            if op in ("<<", ">>"):
                want = pyop(a, np.array(bnp, da))
        else:
            want = pyop(a, bnp)
    assert want.dtype == rt, (want.dtype, rt)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(wide, want.astype(np.float64))


@pyptx.kernel
def lit_types(o_f: u32[:], o_i: i64[:], o_big: i64[:], n: i32):
    b = 2147483647
    c = 2147483648               # does not fit i32: i64
    o_f[0] = pyptx.bitcast(0.1, u32)        # a float literal on its own is f32
    o_i[0] = n + 1               # i32 arithmetic wraps
    for k in range(n - 2147483645):  # a weak-literal local that changes at run time is i32
        b += 1
    o_i[1] = b
    o_i[2] = 2147483647 + 1      # literal-only arithmetic is exact (folded like Python)
    o_big[0] = c + 1


def test_literal_defaults(cpu_device):
    o_f = np.zeros(1, np.uint32)
    o_i = np.zeros(3, np.int64)
    o_big = np.zeros(1, np.int64)
    lit_types[1, 1](o_f, o_i, o_big, 2**31 - 1)
    assert o_f[0] == np.float32(0.1).view(np.uint32)
    assert o_i[0] == np.iinfo(np.int32).min
    assert o_i[1] == np.iinfo(np.int32).min + 1
    assert o_i[2] == 2**31
    assert o_big[0] == 2147483649


@pyptx.kernel
def local_type(o1: f32[:], o2: f64[:], x: f32[:], y: i8[:]):
    s = 0
    for k in range(4):
        s += x[k]
    o1[0] = s
    o2[0] = s            # stored as f32 value, converted
    t = 0
    t += y[0]            # t is i8 (weak 0): wraps
    t += y[1]
    o2[1] = t


def test_one_type_per_local(cpu_device):
    x = np.array([0.1, 0.2, 0.3, 1e-8], np.float32)
    y = np.array([100, 100], np.int8)
    o1 = np.full(1, np.nan, np.float32)
    o2 = np.full(2, np.nan)
    local_type[1, 1](o1, o2, x, y)
    s = np.float32(0)
    for v in x:
        s = np.float32(s + v)
    assert o1[0] == s and o2[0] == np.float64(s)
    assert o2[1] == np.int8(-56)


def test_local_type_is_f32_in_ir():
    ptx = pyptx.compile(local_type).ptx
    assert "add.rn.f64" not in ptx and "add.f64" not in ptx


# ---- integer arithmetic -----------------------------------------------------------------------

INT_T = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]


@pytest.mark.parametrize("t", INT_T)
def test_int_ops_wrap_floor_shift_bitwise(t, cpu_device):
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def intops_{t}(o: {t}[:, :], odiv: f64[:], a: {t}[:], b: {t}[:], s: {t}[:]):
            i = pyptx.grid(1)
            x = a[i]
            y = b[i]
            o[0, i] = x + y
            o[1, i] = x - y
            o[2, i] = x * y
            o[3, i] = x // y
            o[4, i] = x % y
            o[5, i] = x << s[i]
            o[6, i] = x >> s[i]
            o[7, i] = x & y
            o[8, i] = x | y
            o[9, i] = x ^ y
            o[10, i] = ~x
            o[11, i] = -x
            o[12, i] = abs(x)
            o[13, i] = min(x, y)
            o[14, i] = max(x, y)
            odiv[i] = x / y
        """)
    rng = np.random.default_rng(10)
    dt = NP[t]
    n = 128
    a = rand(rng, dt, n)
    b = rand(rng, dt, n)
    a[:8] = rand(rng, dt, 8, -9 if dt.kind == "i" else 0, 9)
    b[:8] = rand(rng, dt, 8, -4 if dt.kind == "i" else 1, 4)
    b[b == 0] = 3
    if dt.kind == "i":
        a[8], b[8] = np.iinfo(dt).min, -1            # MIN // -1 wraps
    s = rng.integers(0, dt.itemsize * 8, n).astype(dt)
    o = poison(dt, (15, n))
    odiv = np.full(n, np.nan)
    k[2, 64](o, odiv, a, b, s)
    with np.errstate(all="ignore"):
        want = [a + b, a - b, a * b, a // b, a % b, a << s, a >> s, a & b, a | b, a ^ b, ~a,
                -a, np.abs(a), np.minimum(a, b), np.maximum(a, b)]
    for r, w in enumerate(want):
        np.testing.assert_array_equal(o[r], w.astype(dt), err_msg=f"row {r}")
    # `/` on ints: both converted to f32, divided in f32 (docs/decisions.md)
    np.testing.assert_array_equal(odiv, (a.astype(np.float32) / b.astype(np.float32)).astype(np.float64))


@pyptx.kernel
def int_div_type(o: f32[:], a: i32[:], b: i32[:]):
    i = pyptx.grid(1)
    q = a[i] / b[i]
    o[i] = q + 0.0


def test_int_true_division_is_f32():
    ptx = pyptx.compile(int_div_type).ptx
    assert "div.rn.f32" in ptx and "f64" not in ptx


@pyptx.kernel
def cmp_chain(o: bool_[:, :], x: i32[:], f: f32[:], n: i32):
    i = pyptx.grid(1)
    o[0, i] = 0 <= x[i] < n
    o[1, i] = x[i] < n > 3 >= x[i]
    o[2, i] = f[i] == f[i]
    o[3, i] = f[i] != f[i]
    o[4, i] = f[i] < 0.5 <= f[i] + 1
    o[5, i] = not (x[i] > 2 or x[i] < -2)
    o[6, i] = x[i] != 0 and f[i] >= 0


def test_comparisons_and_chains(cpu_device):
    rng = np.random.default_rng(11)
    x = rng.integers(-6, 12, 64).astype(np.int32)
    f = rng.uniform(-1, 1, 64).astype(np.float32)
    f[::7] = np.nan
    o = np.ones((7, 64), np.bool_)
    o[::2] = False
    cmp_chain[1, 64](o, x, f, 6)
    np.testing.assert_array_equal(o[0], (0 <= x) & (x < 6))
    np.testing.assert_array_equal(o[1], (x < 6) & (6 > 3) & (3 >= x))
    np.testing.assert_array_equal(o[2], f == f)
    np.testing.assert_array_equal(o[3], f != f)
    np.testing.assert_array_equal(o[4], (f < 0.5) & (np.float32(0.5) <= f + np.float32(1)))
    np.testing.assert_array_equal(o[5], ~((x > 2) | (x < -2)))
    np.testing.assert_array_equal(o[6], (x != 0) & (f >= 0))


# ---- short circuit and conditional expressions protect loads -----------------------------------

@pyptx.kernel
def sc_and(o: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n and x[i] > 0.0:
        o[i] = 1.0
    elif i >= n or x[i] <= 0.0:
        o[i] = 2.0


@pyptx.kernel
def sc_ifexp(o: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    v = x[i] if i < n else -1.0
    w = -2.0 if i >= n else x[n - 1 - i] * 2.0
    o[i] = v + w


@pyptx.kernel
def sc_value(o: i32[:], x: i32[:], n: i32):
    i = pyptx.grid(1)
    a = (i < n and x[i]) or 7            # value of and/or: Python semantics
    o[i] = a


def test_short_circuit_guards_load(cpu_device):
    x = np.random.default_rng(12).uniform(-1, 1, 40).astype(np.float32)
    o = np.full(64, np.nan, np.float32)
    sc_and[1, 64](o, x, 40)
    np.testing.assert_array_equal(o, np.concatenate([np.where(x > 0, 1, 2), np.full(24, 2)]))
    o[:] = np.nan
    sc_ifexp[1, 64](o, x, 40)
    want = np.full(64, -3.0, np.float32)
    want[:40] = x + x[::-1] * np.float32(2)
    np.testing.assert_array_equal(o, want)


def test_and_or_value_semantics(cpu_device):
    x = np.array([0, 5, -3, 0, 9], np.int32)
    o = np.full(8, -99, np.int32)
    sc_value[1, 8](o, x, 5)           # used to give 1 everywhere (a bool_), not the operand
    want = [(i < 5 and int(x[i])) or 7 for i in range(8)]
    np.testing.assert_array_equal(o, [int(w) for w in want])


# ---- casts ------------------------------------------------------------------------------------

@pytest.mark.parametrize("src", INT_T + ["bool_"])
def test_int_to_int_casts_wrap_like_astype(src, cpu_device):
    dsts = INT_T + ["f16", "f32", "f64"]
    body = "\n".join(f"    o_{d}[i] = pyptx.{d}(x[i])" for d in dsts)
    params = ", ".join(f"o_{d}: {d}[:]" for d in dsts)
    k = make_kernel(f"""
import pyptx
from pyptx import *
@pyptx.kernel
def casts_{src}({params}, x: {src}[:]):
    i = pyptx.grid(1)
{body}
""")
    rng = np.random.default_rng(13)
    x = rand(rng, NP[src], 64)
    outs = [poison(NP[d], 64) for d in dsts]
    k[1, 64](*outs, x)
    for d, o in zip(dsts, outs):
        np.testing.assert_array_equal(o, x.astype(NP[d]), err_msg=f"{src} -> {d}")


def _ref_f2i(x, dt):
    info = np.iinfo(dt)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))
    t = np.where(np.isnan(t), 0, t)
    out = np.clip(t, info.min, info.max).astype(dt)
    out[t >= float(info.max)] = info.max            # float(max) rounds up past the range
    out[t <= float(info.min)] = info.min
    return out


@pytest.mark.parametrize("src", ["f16", "f32", "f64"])
def test_float_casts_trunc_saturate_nan(src, cpu_device):
    dsts = INT_T + ["f16", "f32", "f64", "bool_"]
    body = "\n".join(f"    o_{d}[i] = pyptx.{d}(x[i])" for d in dsts)
    params = ", ".join(f"o_{d}: {d}[:]" for d in dsts)
    k = make_kernel(f"""
import pyptx
from pyptx import *
@pyptx.kernel
def fcasts_{src}({params}, x: {src}[:]):
    i = pyptx.grid(1)
{body}
""")
    dt = NP[src]
    rng = np.random.default_rng(14)
    x = np.concatenate([rng.uniform(-300, 300, 40), [np.nan, np.inf, -np.inf, -0.0, 0.7, -0.7,
                                                     1e30, -1e30, 65504, 3e9, -3e9, 2.5, -2.5,
                                                     255.9, 256.0, -1.0, 1e19, 2e19, 4e9],
                        rng.uniform(-1e6, 1e6, 5)])
    with np.errstate(all="ignore"):
        x = x.astype(dt)
    n = len(x)
    outs = [poison(NP[d], n) for d in dsts]
    k[1, n](*outs, x)
    for d, o in zip(dsts, outs):
        ddt = NP[d]
        if ddt.kind in "iu":
            want = _ref_f2i(x, ddt)
        else:
            with np.errstate(all="ignore"):
                want = x.astype(ddt)
        np.testing.assert_array_equal(o, want, err_msg=f"{src} -> {d}")


@pyptx.kernel
def bitcasts(o_u: u32[:], o_f: f32[:], o_i64: i64[:], o_h: u16[:], o_f16: f16[:], x: f32[:],
             d: f64[:], h: f16[:], hb: u16[:]):
    i = pyptx.grid(1)
    u = pyptx.bitcast(x[i], u32)
    o_u[i] = u
    o_f[i] = pyptx.bitcast(u ^ 0x80000000, f32)
    o_i64[i] = pyptx.bitcast(d[i], i64)
    o_h[i] = pyptx.bitcast(h[i], u16)
    o_f16[i] = pyptx.bitcast(hb[i], f16)


def test_bitcast(cpu_device):
    rng = np.random.default_rng(15)
    x = rng.standard_normal(32).astype(np.float32)
    d = rng.standard_normal(32)
    h = rng.standard_normal(32).astype(np.float16)
    hb = rng.integers(0, 0x7C00, 32).astype(np.uint16)
    o_u = np.zeros(32, np.uint32)
    o_f = np.full(32, np.nan, np.float32)
    o_i = np.zeros(32, np.int64)
    o_h = np.zeros(32, np.uint16)
    o_f16 = np.full(32, np.nan, np.float16)
    bitcasts[1, 32](o_u, o_f, o_i, o_h, o_f16, x, d, h, hb)
    np.testing.assert_array_equal(o_u, x.view(np.uint32))
    np.testing.assert_array_equal(o_f, -x)
    np.testing.assert_array_equal(o_i, d.view(np.int64))
    np.testing.assert_array_equal(o_h, h.view(np.uint16))
    np.testing.assert_array_equal(o_f16, hb.view(np.float16))


def test_bitcast_size_mismatch_is_compile_error():
    k = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def bad_bitcast(o: u64[:], x: f32[:]):
            o[0] = pyptx.bitcast(x[0], u64)
        """)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(k)


@pytest.mark.parametrize("elem", ["i8", "u8", "i16", "u32", "i64", "u64", "f16", "f32", "bool_"])
def test_store_converts_to_element_type(elem, cpu_device):
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def store_{elem}(o1: {elem}[:], o2: {elem}[:], o3: {elem}[:], x: f64[:], y: i64[:]):
            i = pyptx.grid(1)
            o1[i] = x[i]
            o2[i] = y[i]
            o3[i] = 3
        """)
    rng = np.random.default_rng(16)
    dt = NP[elem]
    x = rng.uniform(-100, 100, 32)
    if dt.kind == "u":
        x = np.abs(x)
    y = rng.integers(-(2**40), 2**40, 32)
    o1, o2, o3 = poison(dt, 32), poison(dt, 32), poison(dt, 32)
    k[1, 32](o1, o2, o3, x, y)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w1 = np.empty(32, dt)
        w1[:] = x if dt.kind not in "iu" else _ref_f2i(x, dt)
        w2 = y.astype(dt)
    np.testing.assert_array_equal(o1, w1)
    np.testing.assert_array_equal(o2, w2)
    np.testing.assert_array_equal(o3, np.full(32, 3, dt))


# ---- fma=False is bit-identical to numpy ----------------------------------------------------------

@pytest.mark.parametrize("t", ["f16", "f32", "f64"])
def test_fma_false_bit_identical(t, cpu_device):
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel(fma=False)
        def ieee_{t}(o: {t}[:, :], a: {t}[:], b: {t}[:], c: {t}[:]):
            i = pyptx.grid(1)
            o[0, i] = a[i] + b[i]
            o[1, i] = a[i] - b[i]
            o[2, i] = a[i] * b[i]
            o[3, i] = a[i] / b[i]
            o[4, i] = a[i] * b[i] + c[i]
            o[5, i] = c[i] - a[i] * b[i]
            o[6, i] = (a[i] + b[i]) * c[i] - a[i] / c[i]
        """)
    ks = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel(fma=False)
        def ieee_sqrt_{t}(o: {t}[:], a: {t}[:]):
            i = pyptx.grid(1)
            o[i] = pyptx.math.sqrt(a[i])
        """)
    dt = NP[t]
    rng = np.random.default_rng(17)
    n = 256
    scale = 4 if t == "f16" else 1e3
    a, b, c = (rng.uniform(-scale, scale, n).astype(dt) for _ in range(3))
    b[:4] = [0, -0.0, np.inf, np.nan]
    a[4:8] = [0, np.inf, -np.inf, 1e-5]
    o = np.full((7, n), np.nan, dt)
    k[4, 64](o, a, b, c)
    with np.errstate(all="ignore"):
        want = [a + b, a - b, a * b, a / b, a * b + c, c - a * b, (a + b) * c - a / c]
    for r, w in enumerate(want):
        np.testing.assert_array_equal(o[r].view(f"u{dt.itemsize}")[~np.isnan(w)],
                                      w.view(f"u{dt.itemsize}")[~np.isnan(w)], err_msg=f"row {r}")
        assert np.isnan(o[r][np.isnan(w)]).all()
    sa = np.abs(rng.standard_normal(n) * scale).astype(dt)
    sa[:3] = [0, np.inf, -1]
    os_ = np.full(n, 7, dt)
    ks[4, 64](os_, sa)
    with np.errstate(all="ignore"):
        w = np.sqrt(sa)
    np.testing.assert_array_equal(os_[~np.isnan(w)], w[~np.isnan(w)])
    assert np.isnan(os_[np.isnan(w)]).all()
