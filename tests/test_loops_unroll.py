"""Loop unrolling: `pyptx.range(..., unroll=N)` (frontend/unroll.py) and the optimiser's full
unrolling of short constant-trip loops (passes/unroll.py).

Semantics run on the CPU executor: one thread per case (start, trip count 0..20, step incl.
negative ones, a `continue` value, a `break` value, a `return` value), against the same loop run
by Python.  Outputs are poisoned before every launch.
"""
import builtins
from collections import Counter

import numpy as np
import pytest

import pyptx
from pyptx import CompileError
from pyptx.frontend import lower_kernel
from pyptx.ir import parse_function, print_function, verify
from pyptx.ir.analysis import DomTree, natural_loops
from pyptx.passes import run_pipeline

from kernel_factory import make_kernel

HIST = 24

CASES_SRC = """
import pyptx
from pyptx import i32, {t}, block_idx, block_dim, thread_idx

def loop_cases(out: i32[:, :], hist: {t}[:, :], starts: {t}[:], stops: {t}[:], steps: {t}[:],
               skips: {t}[:], breaks: {t}[:], rets: {t}[:], n: i32):
    c = block_idx.x * block_dim.x + thread_idx.x
    if c < n:
        skip = skips[c]
        brk = breaks[c]
        ret = rets[c]
        acc = 0
        cnt = 0
        v = starts[c] - starts[c]
        for v in pyptx.range(starts[c], stops[c], steps[c], unroll={n}):
            if v == skip:
                continue
            if v == ret:
                out[c, 3] = 777
                return
            acc = acc * 31 + i32(v)
            hist[c, cnt] = v
            cnt += 1
            if v == brk:
                break
        out[c, 0] = acc
        out[c, 1] = cnt
        out[c, 2] = i32(v)
"""


def _reference(start, stop, step, skip, brk, ret, dtype):
    out = [-1, -1, -1, -1]
    hist = []
    acc = np.int32(0)
    v = 0
    with np.errstate(over="ignore"):
        for v in range(start, stop, step):
            if v == skip:
                continue
            if v == ret:
                out[3] = 777
                return out, hist
            acc = np.int32(acc * np.int32(31) + np.int32(np.array(v).astype(dtype)))
            hist.append(v)
            if v == brk:
                break
    out[0], out[1], out[2] = int(acc), len(hist), int(np.array(v).astype(dtype).astype(np.int32))
    return out, hist


def _cases(rng, signed=True):
    rows = []
    steps = [1, 2, 3, -1, -2, -3] if signed else [1, 2, 3]
    for start in ([-3, 0, 5] if signed else [0, 5]):
        for trip in range(21):
            for step in steps:
                stop = start + trip * step - int(np.sign(step)) * int(rng.integers(0, abs(step)))
                if not signed and stop < 0:
                    continue
                vals = list(range(start, stop, step)) or [start]
                pick = lambda: int(rng.choice(vals)) if rng.random() < 0.3 else 200  # noqa: E731
                rows.append((start, stop, step, pick(), pick(), pick()))
    return rows


def _run_cases(device, n, tname, rows):
    dt = np.dtype(getattr(pyptx, tname).dtype)
    kern = pyptx.kernel(make_kernel(CASES_SRC.format(t=tname, n=n)))
    cols = [np.array([r[k] for r in rows], dtype=dt) for k in range(6)]
    m = len(rows)
    out = np.full((m, 4), -1, np.int32)
    hist = np.full((m, HIST), 99, dtype=dt)            # poison
    kern[(m + 63) // 64, 64](out, hist, *cols, m)
    for c, r in enumerate(rows):
        want, whist = _reference(*r, dt)
        assert list(out[c]) == want, f"case {r}: got {list(out[c])}, want {want}"
        assert list(hist[c, :len(whist)]) == whist, f"case {r}"
        assert (hist[c, len(whist):] == 99).all(), f"case {r} wrote past its iterations"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_unrolled_loops_match_python_with_break_continue_return(n, cpu_device):
    rng = np.random.default_rng(100 + n)
    _run_cases(cpu_device, n, "i32", _cases(rng))


@pytest.mark.parametrize("tname", ["u8", "i64", "u32"])
def test_unrolled_loops_of_other_integer_types(tname, cpu_device):
    rng = np.random.default_rng(7)
    rows = _cases(rng, signed=tname[0] == "i")
    _run_cases(cpu_device, 4, tname, [r for r in rows if r[0] % 2 == 0][:200])


EXTREME_SRC = """
import pyptx
from pyptx import i32

def extreme(out: i32[:], start: i32, stop: i32, step: i32):
    cnt = 0
    last = 0
    for v in pyptx.range(start, stop, step, unroll=4):
        cnt += 1
        last = v
    out[0] = cnt
    out[1] = last
"""


@pytest.mark.parametrize("start,stop,step", [
    (2**31 - 10, 2**31 - 1, 3), (-2**31, -2**31 + 9, 2), (2**31 - 1, -2**31, -2**30),
    (-5, 2**31 - 1, 2**30), (0, 2**31 - 1, 2**31 - 1)])
def test_trip_count_is_exact_at_the_ends_of_the_type(start, stop, step, cpu_device):
    out = np.full(2, -7, np.int32)
    pyptx.kernel(make_kernel(EXTREME_SRC))[1, 1](out, start, stop, step)
    vals = list(range(start, stop, step))
    assert list(out) == [len(vals), vals[-1] if vals else 0]


CONST_SRC = """
import pyptx
from pyptx import f32, i32

def const_bounds(out: f32[:], x: f32[:], K: pyptx.constexpr):
    acc = 0.0
    for k in pyptx.range(1, K, 2, unroll=4):
        acc = acc * 0.5 + x[k]
    out[0] = acc
    out[1] = f32(k)
"""


@pytest.mark.parametrize("K", [0, 1, 2, 9, 19, 40])
def test_constant_bounds_with_a_remainder(K, cpu_device):
    x = np.random.default_rng(K).standard_normal(64).astype(np.float32)
    out = np.full(2, np.nan, np.float32)
    kern = pyptx.kernel(make_kernel(CONST_SRC))
    kern[1, 1](out, x, K)
    acc = np.float32(0)
    k = 0
    for k in range(1, K, 2):
        acc = np.float32(acc * np.float32(0.5) + x[k])
    assert out[0] == acc and out[1] == k


# ---- IR shape ----------------------------------------------------------------------------------

def _lower(src, name, constexprs=None):
    from pyptx.compiler import resolve_param_types
    fn = make_kernel(src, name)
    fn = fn.py_func if hasattr(fn, "py_func") else fn
    out = lower_kernel(fn, resolve_param_types(fn), constexprs or {})
    verify(out)
    return out


def _loops(fn):
    return natural_loops(fn, DomTree(fn))


STORE_SRC = """
import pyptx
from pyptx import f32, i32

def copy4(out: f32[:], x: f32[:], n: i32):
    for i in pyptx.range(0, n, unroll=4):
        out[i] = x[i] * 2.0

def copy1(out: f32[:], x: f32[:], n: i32):
    for i in pyptx.range(0, n, unroll=1):
        out[i] = x[i] * 2.0

def copy_plain(out: f32[:], x: f32[:], n: i32):
    for i in range(0, n):
        out[i] = x[i] * 2.0
"""


def test_unroll_4_has_four_copies_in_the_main_loop_and_one_in_the_remainder():
    fn = _lower(STORE_SRC, "copy4")
    assert Counter(i.op for i in fn.instructions())["store"] == 5
    run_pipeline(fn, 2, True)
    verify(fn)
    loops = _loops(fn)
    assert len(loops) == 2
    stores = sorted(sum(i.op == "store" for b in body for i in b.instrs) for _, body in loops)
    assert stores == [1, 4]
    main = next(body for _, body in loops if sum(i.op == "store" for b in body
                                                 for i in b.instrs) == 4)
    offsets = sorted(i.attrs.get("offset", 0) for b in main for i in b.instrs if i.op == "store")
    assert offsets == [0, 4, 8, 12]            # one base address, immediate offsets
    text = print_function(fn)
    assert print_function(parse_function(text)) == text


def test_unroll_1_is_plain_range():
    a, b = _lower(STORE_SRC, "copy1"), _lower(STORE_SRC, "copy_plain")
    assert Counter(i.op for i in a.instructions()) == Counter(i.op for i in b.instructions())


def test_copies_on_the_cpu_executor(cpu_device):
    kern = pyptx.kernel(make_kernel(STORE_SRC, "copy4"))
    for n in (0, 1, 3, 4, 5, 17):
        x = np.random.default_rng(n).standard_normal(20).astype(np.float32)
        out = np.full(20, np.nan, np.float32)
        kern[1, 1](out, x, n)
        np.testing.assert_array_equal(out[:n], x[:n] * 2)
        assert np.isnan(out[n:]).all()


FULL_SRC = """
import pyptx
from pyptx import f32, i32

def short(out: f32[:], x: f32[:]):
    acc = 0.0
    for k in range(16):
        acc += x[k] * x[k + 1]
    out[0] = acc

def long(out: f32[:], x: f32[:]):
    acc = 0.0
    for k in range(200):
        acc += x[k] * x[k + 1]
    out[0] = acc

def nested(out: f32[:], x: f32[:]):
    acc = 0.0
    for j in range(3):
        for k in range(0, 10, 3):
            acc = acc * 0.5 + x[j * 10 + k]
    out[0] = acc
"""


@pytest.mark.parametrize("name,loops_left", [("short", 0), ("long", 1), ("nested", 0)])
def test_optimiser_fully_unrolls_short_constant_trip_loops(name, loops_left, cpu_device):
    fn = _lower(FULL_SRC, name)
    run_pipeline(fn, 2, True)
    verify(fn)
    assert len(_loops(fn)) == loops_left
    fn1 = _lower(FULL_SRC, name)
    run_pipeline(fn1, 1, True)
    assert len(_loops(fn1)) >= 1                    # only opt_level 2 unrolls
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    out = np.full(1, np.nan, np.float32)
    kern = pyptx.kernel(make_kernel(FULL_SRC, name), fma=False)
    kern[1, 1](out, x)
    acc = np.float32(0)
    if name == "nested":
        for j in range(3):
            for k in range(0, 10, 3):
                acc = np.float32(acc * np.float32(0.5) + x[j * 10 + k])
    else:
        for k in range(16 if name == "short" else 200):
            acc = np.float32(acc + x[k] * x[k + 1])
    assert out[0] == acc


# ---- the name and the errors ------------------------------------------------------------------

def test_star_import_does_not_shadow_builtin_range():
    ns: dict = {}
    exec("from pyptx import *", ns)
    assert ns.get("range", builtins.range) is builtins.range
    assert "range" not in pyptx.__all__
    assert pyptx.range.intrinsic == "range"


@pytest.mark.parametrize("loop,msg", [
    ("pyptx.range(n, unroll=0)", "unroll=N"),
    ("pyptx.range(n, unroll=n)", "compile-time int"),
    ("pyptx.range(n, unrol=2)", "no keyword 'unrol'"),
    ("pyptx.range(0, n, 1, step=2)", "step twice"),
    ("pyptx.range(0, n, 0, unroll=2)", "must not be zero"),
])
def test_bad_pyptx_range_calls_are_compile_errors(loop, msg):
    src = (f"import pyptx\nfrom pyptx import i32\n\ndef bad(out: i32[:], n: i32):\n"
           f"    for i in {loop}:\n        out[i] = i\n")
    with pytest.raises(CompileError, match=msg):
        pyptx.compile(pyptx.kernel(make_kernel(src)))


def test_pyptx_range_outside_a_for_is_a_compile_error():
    src = ("import pyptx\nfrom pyptx import i32\n\ndef bad(out: i32[:], n: i32):\n"
           "    r = pyptx.range(n)\n")
    with pytest.raises(CompileError, match="for i in pyptx.range"):
        pyptx.compile(pyptx.kernel(make_kernel(src)))


def test_step_keyword_and_constexpr_factor(cpu_device):
    src = ("import pyptx\nfrom pyptx import i32\n\n"
           "def kw(out: i32[:], n: i32, U: pyptx.constexpr):\n"
           "    for i in pyptx.range(n, step=1, unroll=U):\n        out[i] = i * 3\n")
    kern = pyptx.kernel(make_kernel(src))
    for u in (2, 5):
        out = np.full(9, -1, np.int32)
        kern[1, 1](out, 7, u)
        assert list(out) == [0, 3, 6, 9, 12, 15, 18, -1, -1]


# ---- a variable first assigned inside a loop, read after it ----------------------------------

AFTER_SRC = """
import pyptx
from pyptx import f32, i32

def after(out: f32[:], x: f32[:], n: i32):
    for i in range(n):
        t = x[i] * 2.0
    out[0] = t

def after_unrolled(out: f32[:], x: f32[:], n: i32):
    for i in pyptx.range(n, unroll=3):
        t = x[i] * 2.0
    out[0] = t
"""


@pytest.mark.parametrize("name", ["after", "after_unrolled"])
def test_value_from_the_last_iteration_or_zero_when_the_loop_never_ran(name, cpu_device):
    fn = _lower(AFTER_SRC, name)                 # SSA dominance holds (verify in _lower)
    run_pipeline(fn, 2, True)
    verify(fn)
    kern = pyptx.kernel(make_kernel(AFTER_SRC, name))
    x = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    for n, want in ((5, x[4] * 2), (1, x[0] * 2), (0, 0.0)):
        out = np.full(1, np.nan, np.float32)
        kern[1, 1](out, x, n)
        assert out[0] == np.float32(want)


ROW_SRC = """
import pyptx
from pyptx import f32, i32, thread_idx

def rows(out: f32[:, :], x: f32[:, :], n: i32):
    r = thread_idx.x
    t = pyptx.shared.array((4, 16), f32)
    t[r, 0] = 1.5
    t[r, 3] = 1.5
    pyptx.syncthreads()
    for j in pyptx.range(0, n, unroll=4):
        out[r, j] = x[r, j] * 2.0 + t[r, 0] + t[(r + 1) % 4, 3]
"""


def test_unrolled_copies_of_2d_accesses_share_one_address(cpu_device):
    fn = _lower(ROW_SRC, "rows")
    run_pipeline(fn, 2, True)
    verify(fn)
    main = max((body for _, body in _loops(fn)),
               key=lambda body: sum(i.op == "store" for b in body for i in b.instrs))
    mem = [i for b in main for i in b.instrs if i.op in ("load", "store")
           and i.operands[0].type.space == "global"]
    assert sorted(i.attrs.get("offset", 0) for i in mem if i.op == "store") == [0, 4, 8, 12]
    assert sorted(i.attrs.get("offset", 0) for i in mem if i.op == "load") == [0, 4, 8, 12]
    assert len({id(i.operands[0]) for i in mem if i.op == "load"}) == 1
    kern = pyptx.kernel(make_kernel(ROW_SRC))
    x = np.random.default_rng(5).standard_normal((4, 11)).astype(np.float32)
    for n in (0, 3, 9, 11):
        out = np.full((4, 11), np.nan, np.float32)
        kern[1, 4](out, x, n)
        h = np.float32(1.5)
        np.testing.assert_array_equal(out[:, :n], (x[:, :n] * np.float32(2) + h) + h)
        assert np.isnan(out[:, n:]).all()
