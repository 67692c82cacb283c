"""Strength reduction of `//` and `%` (passes/strength.py, passes/ranges.py).

Semantics: kernels computing `x // K`, `x % K` (K a compile-time constant: powers of two, other
positive and negative constants, 0, +-1) and `x // d`, `x % d` (runtime d) run on the CPU
executor against numpy's floor_divide / remainder, for every integer dtype, with random inputs
covering negative values and the extremes.  IR: the rewrites happen (and only where exact).
"""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyptx
from pyptx import types as T
from pyptx.frontend import lower_kernel
from pyptx.ir import parse_function, print_function, verify
from pyptx.passes import run_pipeline, strength

from kernel_factory import make_kernel

INT_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]

SRC = """
import pyptx
from pyptx import {t}, i32, block_idx, block_dim, thread_idx

def divmod_kernel(q: {t}[:], r: {t}[:], qd: {t}[:], rd: {t}[:], x: {t}[:], d: {t}[:], n: i32,
                  K: pyptx.constexpr):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        v = x[i]
        q[i] = v // K
        r[i] = v % K
        qd[i] = v // d[i]
        rd[i] = v % d[i]
"""


def _dtype(tname):
    return getattr(T, tname).dtype          # numpy's "i8" would mean int64


def _divisor_choices(tname):
    info = np.iinfo(_dtype(tname))
    top = info.bits - 1 if info.min < 0 else info.bits
    pos = [1 << k for k in range(top)] + [3, 5, 7, 10, 100, int(info.max)]
    neg = [-1, -2, -3, -8, -(1 << (top - 1)), int(info.min)] if info.min < 0 else []
    return sorted({v for v in pos + neg + [0] if info.min <= v <= info.max})


@st.composite
def _cases(draw):
    tname = draw(st.sampled_from(INT_TYPES))
    k = draw(st.sampled_from(_divisor_choices(tname)))
    return tname, k, draw(st.integers(0, 2**32 - 1))


def _random(rng, tname, n):
    dt = _dtype(tname)
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt)
    x[:6] = [info.min, info.max, 0, 1, info.max // 2, info.min + 1]
    return x


@settings(max_examples=settings().max_examples)
@given(_cases())
def test_floor_div_mod_by_constants_and_runtime_values_match_numpy(case):
    tname, k, seed = case
    rng = np.random.default_rng(seed)
    n = 100
    x = _random(rng, tname, n)
    d = _random(rng, tname, n)
    dt = _dtype(tname)
    d[6:12] = [0, 1, 2, 8, 3, 7]
    if tname[0] == "i":
        x[7], d[7] = np.iinfo(dt).min, -1                  # MIN // -1 wraps to MIN
    outs = [np.full(n, 0x5A, dtype=dt) for _ in range(4)]    # poisoned
    kern = pyptx.kernel(make_kernel(SRC.format(t=tname)))
    with pyptx_cpu():
        kern[(n + 31) // 32, 32](*outs, x, d, n, k)
    with np.errstate(all="ignore"):
        kk = np.array(k).astype(dt)
        want = [np.floor_divide(x, kk), np.remainder(x, kk), np.floor_divide(x, d),
                np.remainder(x, d)]
    for got, ref, what in zip(outs, want, ["x // K", "x % K", "x // d", "x % d"]):
        np.testing.assert_array_equal(got, ref, err_msg=f"{what} for {tname}, K={k}")


class pyptx_cpu:
    """Run launches on the CPU executor inside a hypothesis test (no function fixtures)."""

    def __enter__(self):
        import os
        self.old = os.environ.get("PYPTX_DEVICE")
        os.environ["PYPTX_DEVICE"] = "cpu"

    def __exit__(self, *exc):
        import os
        if self.old is None:
            os.environ.pop("PYPTX_DEVICE", None)
        else:
            os.environ["PYPTX_DEVICE"] = self.old


INDEX_SRC = """
import pyptx
from pyptx import i32, block_idx, block_dim, thread_idx

def index_kernel(q: i32[:], r: i32[:], s: i32[:], x: i32[:, :], n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        j = i + x.shape[1]
        q[i] = j // 3
        r[i] = j % 10
        acc = 0
        for t in range(0, i, 2):
            acc += t // 4 + t % 8 + (t * 3) // 5
        s[i] = acc
"""


def test_nonnegative_index_arithmetic_on_the_cpu_executor(cpu_device):
    kern = pyptx.kernel(make_kernel(INDEX_SRC))
    n = 77
    x = np.ones((2, 5), np.int32)
    outs = [np.full(n, -7, np.int32) for _ in range(3)]
    kern[(n + 31) // 32, 32](*outs, x, n)
    i = np.arange(n)
    j = i + 5
    np.testing.assert_array_equal(outs[0], j // 3)
    np.testing.assert_array_equal(outs[1], j % 10)
    want = [sum(t // 4 + t % 8 + (t * 3) // 5 for t in range(0, v, 2)) for v in range(n)]
    np.testing.assert_array_equal(outs[2], want)


# ---- IR-level: which rewrite happens ------------------------------------------------------------

def _lower(src, name):
    from pyptx.compiler import resolve_param_types
    fn = make_kernel(src, name)
    fn = fn.py_func if hasattr(fn, "py_func") else fn
    out = lower_kernel(fn, resolve_param_types(fn), {})
    verify(out)
    return out


def _ops(fn):
    return Counter(i.op for i in fn.instructions())


POW2_SRC = """
from pyptx import i32, i8, u64, thread_idx

def pow2(out: i32[:], o8: i8[:], o64: u64[:], a: i32, b: i8, c: u64):
    out[0] = a // 16
    out[1] = a % 16
    o8[0] = b // 4
    o8[1] = b % 64
    o64[0] = c // 1024
    o64[1] = c % 1024
    out[2] = thread_idx.x // 3
    out[3] = thread_idx.x % 3
    out[4] = a // 3
"""


def test_powers_of_two_become_shifts_and_masks_for_any_sign():
    fn = _lower(POW2_SRC, "pow2")
    assert _ops(fn)["floordiv"] == 5 and _ops(fn)["floormod"] == 4
    run_pipeline(fn, 2, True)
    verify(fn)
    c = _ops(fn)
    assert "floordiv" not in c and "floormod" not in c
    assert c["shr"] == 3 and c["and"] == 3
    # thread_idx.x is >= 0: `// 3` and `% 3` are plain div/rem, no floor fix-up; `a // 3` (a of
    # unknown sign) keeps exactly one fix-up select
    assert c["div"] == 2 and c["rem"] == 2 and c["select"] == 1
    shr = [i for i in fn.instructions() if i.op == "shr"]
    assert sorted(i.operands[1].value for i in shr) == [2, 4, 10]


def test_opt_level_0_expands_without_sign_facts_and_keeps_exactness():
    fn = _lower(POW2_SRC, "pow2")
    run_pipeline(fn, 0)
    verify(fn)
    c = _ops(fn)
    assert "floordiv" not in c and "floormod" not in c
    assert c["select"] == 3          # the three non-power-of-two divisions keep their fix-ups


def test_div_rem_by_power_of_two_of_a_nonnegative_value_become_shift_and_mask():
    from ptx_ir_helpers import FnBuilder
    b = FnBuilder("k")
    out = b.ptr("out", T.i32)
    n = b.param("n", T.i32)
    tid = b.op("sreg", [], T.i32, name="tid.x")
    q = b.op("div", [tid, b.c(T.i32, 8)], T.i32)
    r = b.op("rem", [tid, b.c(T.i32, 8)], T.i32)
    q2 = b.op("div", [n, b.c(T.i32, 8)], T.i32)          # n may be negative: left alone
    for k, v in enumerate([q, r, q2]):
        b.op("store", [b.op("gep", [out, b.c(T.i32, k)], out.type), v], None)
    b.ret()
    fn = b.fn
    verify(fn)
    assert strength.run(fn)
    verify(fn)
    assert [q.op, r.op, q2.op] == ["shr", "and", "div"]
    assert not strength.run(fn)


LOOP_SRC = """
from pyptx import i32, thread_idx

def loop(out: i32[:], a: i32, n: i32):
    acc = 0
    for t in range(n):
        acc += a // 7 + a % 7 + (a + t) % 3
    out[thread_idx.x] = acc
"""


def test_licm_hoists_division_by_a_constant_and_the_ir_round_trips():
    fn = _lower(LOOP_SRC, "loop")
    text = print_function(fn)
    assert "floordiv" in text and print_function(parse_function(text)) == text
    run_pipeline(fn, 2, True)
    verify(fn)
    loop_blocks = [b for b in fn.blocks if b.name.startswith(("body", "next", "for"))]
    in_loop = Counter(i.op for b in loop_blocks for i in b.instrs)
    assert in_loop["rem"] == 1           # only (a + t) % 3 depends on t
    assert in_loop["div"] == 0
    text = print_function(fn)
    assert print_function(parse_function(text)) == text


@pytest.mark.parametrize("tname", ["i32", "u32"])
def test_constant_divisors_fold(tname):
    t = getattr(T, tname)
    from pyptx.passes.evaluate import evaluate
    from pyptx.ir import Const
    for a in (-7, 7, 0) if t.is_signed else (7, 0, 2**32 - 1):
        for b in (2, -2, 0, 3) if t.is_signed else (2, 0, 3):
            qa = evaluate("floordiv", t, {}, [Const(t, a), Const(t, b)])
            ra = evaluate("floormod", t, {}, [Const(t, a), Const(t, b)])
            assert (qa, ra) == ((a // b, a % b) if b else (0, 0))
