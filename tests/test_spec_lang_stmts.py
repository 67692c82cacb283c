"""Statements (docs/language.md), end to end on the CPU executor against plain-Python references."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import make_kernel  # noqa: E402
from pyptx import bool_, constexpr, f32, f64, i32, i64, u32  # noqa: E402,F401

LIMIT = 5
SCALE = 2.5
FLAG = True
BIG = 2**40


@pyptx.kernel
def if_chain(o: i32[:], x: i32[:]):
    i = pyptx.grid(1)
    v = x[i]
    if v < -3:
        r = 1
    elif v < 0:
        r = 2
    elif v == 0:
        r = 3
    else:
        if v > 5:
            r = 4
        else:
            r = 5
    o[i] = r


def test_if_elif_else(cpu_device):
    x = np.arange(-8, 24, dtype=np.int32)
    o = np.full(32, -1, np.int32)
    if_chain[1, 32](o, x)
    want = [1 if v < -3 else 2 if v < 0 else 3 if v == 0 else 4 if v > 5 else 5 for v in x]
    np.testing.assert_array_equal(o, want)


@pyptx.kernel
def ranges(o: i32[:, :], a: i32, b: i32, c: i32):
    t = pyptx.thread_idx.x
    s = 0
    for k in range(a + t, b * 2 - t, c):       # computed bounds, any step
        s += k
    o[0, t] = s
    s = 0
    for k in range(b, a, -c):                  # negative step
        s += k * t
    o[1, t] = s
    s = 0
    for k in range(b):                         # one argument
        s += 1
    o[2, t] = s
    n = 0
    for k in range(t, -t - 5, -1):
        n += 1
    o[3, t] = n
    o[4, t] = k                                # loop variable keeps its last value


def test_for_range_forms(cpu_device):
    o = np.full((5, 8), -77, np.int32)
    ranges[1, 8](o, 2, 9, 3)
    for t in range(8):
        assert o[0, t] == sum(range(2 + t, 18 - t, 3))
        assert o[1, t] == sum(k * t for k in range(9, 2, -3))
        assert o[2, t] == 9
        assert o[3, t] == len(range(t, -t - 5, -1))
        assert o[4, t] == list(range(t, -t - 5, -1))[-1]


@pyptx.kernel
def range_step_param(o: i32[:], a: i32, b: i32, c: i32):
    s = 0
    n = 0
    for k in range(a, b, c):                    # step sign only known at run time
        s += k
        n += 1
    o[0] = s
    o[1] = n


@pytest.mark.parametrize("a,b,c", [(0, 10, 3), (10, 0, -3), (10, 0, 3), (0, 10, -1), (5, 5, 1),
                                   (-7, 7, 7), (7, -8, -5)])
def test_range_runtime_step(a, b, c, cpu_device):
    o = np.full(2, -99, np.int32)
    range_step_param[1, 1](o, a, b, c)
    assert list(o) == [sum(range(a, b, c)), len(range(a, b, c))]


@pyptx.kernel
def while_break_continue(o: i32[:, :], n: i32):
    t = pyptx.thread_idx.x
    k = 0
    s = 0
    while True:
        k += 1
        if k > n + t:
            break
        if k % 3 == 0:
            continue
        s += k
    o[0, t] = s
    # nested loops with break/continue in the inner one
    total = 0
    for a in range(5):
        for b in range(10):
            if b > a + t:
                break
            if (a + b) % 2 == 1:
                continue
            total += a * 10 + b
        if a == 3:
            continue
        total += 1000
    o[1, t] = total


def _wbc_ref(n, t):
    s = 0
    k = 0
    while True:
        k += 1
        if k > n + t:
            break
        if k % 3 == 0:
            continue
        s += k
    total = 0
    for a in range(5):
        for b in range(10):
            if b > a + t:
                break
            if (a + b) % 2 == 1:
                continue
            total += a * 10 + b
        if a == 3:
            continue
        total += 1000
    return s, total


def test_while_break_continue_nested(cpu_device):
    o = np.full((2, 8), -1, np.int32)
    while_break_continue[1, 8](o, 6)
    for t in range(8):
        assert tuple(o[:, t]) == _wbc_ref(6, t)


@pyptx.kernel
def early_return(o: i32[:], x: i32[:]):
    t = pyptx.thread_idx.x
    o[t] = -1
    for a in range(4):
        for b in range(4):
            if x[t] == a * 4 + b:
                o[t] = a * 100 + b
                return
    o[t] = 999


def test_return_inside_nested_loops(cpu_device):
    x = np.arange(-4, 28, dtype=np.int32)
    o = np.full(32, -5, np.int32)
    early_return[1, 32](o, x)
    want = [(v // 4) * 100 + v % 4 if 0 <= v < 16 else 999 for v in x]
    np.testing.assert_array_equal(o, want)


@pyptx.kernel
def tuples_swaps(o: f32[:, :], x: f32[:], y: f32[:]):
    i = pyptx.grid(1)
    a, b = x[i], y[i]
    if a > b:
        a, b = b, a                  # swap
    c, (d, e) = a + b, (a, b)
    p = q = a * 2.0                  # chained assignment
    o[0, i] = a
    o[1, i] = b
    o[2, i] = c
    o[3, i] = d - e
    o[4, i] = p + q


def test_tuple_unpacking_and_swap(cpu_device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(40).astype(np.float32)
    y = rng.standard_normal(40).astype(np.float32)
    o = np.full((5, 40), np.nan, np.float32)
    tuples_swaps[1, 40](o, x, y)
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    np.testing.assert_array_equal(o[0], lo)
    np.testing.assert_array_equal(o[1], hi)
    np.testing.assert_array_equal(o[2], lo + hi)
    np.testing.assert_array_equal(o[3], lo - hi)
    np.testing.assert_array_equal(o[4], lo * 2 + lo * 2)


@pyptx.kernel
def augassign(a: i32[:], f: f32[:, :], u: u32[:], x: f32[:]):
    i = pyptx.grid(1)
    a[i] += 3
    a[i] *= 2
    a[i] -= i
    a[i] //= 3
    a[i] %= 5
    a[i] <<= 2
    a[i] |= 1
    a[i] ^= 8
    a[i] &= 0xF
    a[i] >>= 1
    f[i, 1] += x[i]
    f[i, 0] /= 2
    f[i, 0] -= 1.5
    u[i] += 1                        # u32 stays u32 (wraps)
    s = 0.0
    s += x[i]
    s *= 3
    f[i, 2] = s


def test_augmented_assignment_on_elements(cpu_device):
    rng = np.random.default_rng(2)
    a = rng.integers(-100, 100, 32).astype(np.int32)
    f = rng.standard_normal((32, 3)).astype(np.float32)
    u = np.full(32, 0xFFFFFFFF, np.uint32)
    x = rng.standard_normal(32).astype(np.float32)
    wa, wf = a.copy(), f.copy()
    wa += 3
    wa *= 2
    wa -= np.arange(32, dtype=np.int32)
    wa //= 3
    wa %= 5
    wa <<= 2
    wa |= 1
    wa ^= 8
    wa &= 0xF
    wa >>= 1
    wf[:, 1] += x
    wf[:, 0] /= 2
    wf[:, 0] -= 1.5
    wf[:, 2] = x * np.float32(3)
    augassign[1, 32](a, f, u, x)
    np.testing.assert_array_equal(a, wa)
    np.testing.assert_array_equal(f, wf)
    np.testing.assert_array_equal(u, np.zeros(32, np.uint32))


@pyptx.kernel
def module_consts(o: f64[:], big: i64[:]):
    i = pyptx.thread_idx.x
    v = 0.0
    if FLAG:
        v = i * SCALE
    for k in range(LIMIT):
        v += 1
    o[i] = v
    big[i] = BIG + i64(i)             # BIG + i (an i32) would not fit: CompileError


def test_module_constants_frozen(cpu_device):
    global SCALE
    o = np.full(4, np.nan)
    big = np.zeros(4, np.int64)
    module_consts[1, 4](o, big)
    np.testing.assert_array_equal(o, np.arange(4) * np.float32(2.5) + 5)
    np.testing.assert_array_equal(big, 2**40 + np.arange(4))
    old = SCALE
    try:
        SCALE = 100.0                 # already compiled: the value was frozen
        module_consts[1, 4](o, big)
        np.testing.assert_array_equal(o, np.arange(4) * np.float32(2.5) + 5)
    finally:
        SCALE = old


@pyptx.kernel
def static_unroll(o: f32[:], x: f32[:, :], N: constexpr):
    i = pyptx.thread_idx.x
    acc = 0.0
    for k in pyptx.static_range(N):
        acc += x[i, k] * (k + 1)
    o[i] = acc


def test_static_range_unrolls(cpu_device):
    x = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)
    o = np.full(8, np.nan, np.float32)
    static_unroll[1, 8](o, x, 6)
    want = np.zeros(8, np.float32)
    for k in range(6):
        want = (want + x[:, k] * np.float32(k + 1)).astype(np.float32)
    np.testing.assert_allclose(o, want, rtol=1e-6)
    ptx = pyptx.compile(static_unroll, constexprs={"N": 6}).ptx
    body = ptx[ptx.index("{"):]
    assert "bra" not in body.replace("bra.uni", "").split("ret;")[0] or body.count("ld.global") >= 6
    assert body.count("ld.global") >= 6


def test_static_range_needs_constexpr():
    k = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def sr_bad(o: f32[:], n: i32):
            for k in pyptx.static_range(n):
                o[k] = 1.0
        """)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(k)


@pytest.mark.parametrize("stmt,phrase", [
    ("class A: pass", None), ("y = [1, 2]", None), ("y = {1: 2}", None), ("y = 'abc'", None),
    ("raise ValueError()", None), ("with open('f') as f:\n        pass", None),
    ("y = (v for v in range(3))", None), ("f = lambda v: v", None), ("global LIMIT", None),
    ("try:\n        pass\n    except Exception:\n        pass", None), ("import math", None),
    ("y = o.tolist()", None), ("assert n > 0", None), ("del n", None),
    ("y = n is None", None), ("y = b'x'", None), ("y = None + 1", None),
    ("y = [v for v in range(3)]", None), ("async def g(): pass", None),
])
def test_unsupported_statements_are_compile_errors(stmt, phrase):
    src = f"""
import pyptx
from pyptx import *
LIMIT = 4
def unsup(o: f32[:], n: i32):
    o[0] = 1.0
    {stmt}
"""
    k = make_kernel(src)
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(k)
    assert ei.value.lineno == 7, (ei.value.lineno, str(ei.value))


def test_keyword_only_params_and_defaults_are_compile_errors():
    k = make_kernel("""
        import pyptx
        from pyptx import *
        def kwo(o: f32[:], *, n: i32):
            o[0] = 1.0
        """)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(k)
    k2 = make_kernel("""
        import pyptx
        from pyptx import *
        def varargs(o: f32[:], *rest):
            o[0] = 1.0
        """)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(k2)


def test_recursion_and_closure_over_mutable_state_are_compile_errors():
    mod = make_kernel("""
        import pyptx
        from pyptx import *
        STATE = [1]
        @pyptx.func
        def fact(n: i32):
            if n <= 1:
                return 1
            return n * fact(n - 1)
        @pyptx.kernel
        def uses_fact(o: i32[:]):
            o[0] = fact(5)
        @pyptx.kernel
        def uses_state(o: i32[:]):
            o[0] = STATE[0]
        """, "uses_fact")
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(mod)
    assert "recurs" in str(ei.value).lower()
    import sys as _s
    st = getattr(_s.modules[mod.py_func.__module__], "uses_state")
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(st)
