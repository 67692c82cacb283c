"""Float `//` and `%`: bit for bit numpy's np.floor_divide / np.remainder (npy_divmod on top of an
exact fmod; f16 computed in f32 and rounded, as numpy does), and mathlib.fmod_f32/f64 against
np.fmod.  Inputs: random bit patterns (every exponent, denormals, inf, nan), a grid of specials,
huge and tiny quotients, mixed int/float operands and literals, and a hypothesis test.
NaNs compare equal to NaNs whatever their payload; everything else compares as bits.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyptx
from kernel_factory import make_kernel

UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
NUMPY_OP = {"%": np.remainder, "//": np.floor_divide}


def _kernel(expr: str, ta: str, tb: str, to: str, fma: bool = False):
    src = f"""
import pyptx
from pyptx import f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from pyptx import mathlib


def divmod_kernel(out: {to}[:], a: {ta}[:], b: {tb}[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = {expr}
"""
    return pyptx.kernel(make_kernel(src), fma=fma)


def _run(k, a, b, out_dtype):
    out = np.zeros(len(a), out_dtype)
    k[(len(a) + 127) // 128, 128](out, a, b, len(a))
    return out


def assert_same_bits(got, want, a, b):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    u = UINT[got.dtype.itemsize]
    ok = (got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(a[j], b[j], got[j], want[j]) for j in bad[:6]]


def random_bits(rng, dt, n):
    """Uniformly random bit patterns: every exponent, denormals, infs and NaNs."""
    u = UINT[np.dtype(dt).itemsize]
    return rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dt)


def specials(dt):
    fi = np.finfo(dt)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 0.1, 7.5,
            360.0, float(fi.max), -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal),
            -float(fi.smallest_subnormal), float(fi.smallest_subnormal) * 3, float(fi.eps)]
    with np.errstate(all="ignore"):
        return np.array(vals, dt)


def inputs(dt, seed, n=1500):
    """Pairs (a, b): random bits, the specials grid, and huge/tiny ratios with related values."""
    rng = np.random.default_rng(seed)
    a, b = random_bits(rng, dt, n), random_bits(rng, dt, n)
    s = specials(dt)
    ga, gb = (x.ravel() for x in np.meshgrid(s, s))
    fi = np.finfo(dt)
    with np.errstate(all="ignore"):
        # huge quotients: a near max, b near the smallest denormal, and the other way round
        big = (rng.uniform(0.5, 1.0, n // 4) * float(fi.max)).astype(dt)
        tiny = (rng.integers(1, 2000, n // 4) * float(fi.smallest_subnormal)).astype(dt)
        # integer-valued and near-multiple operands (exact-zero remainders, quotients near .5)
        ia = rng.integers(-1000, 1000, n // 4).astype(dt)
        ib = rng.choice(np.array([-7, -2, -1, 1, 2, 3, 5, 8], dt), n // 4)
        m = (ib * rng.integers(-300, 300, n // 4)).astype(dt)
        wa = rng.standard_normal(n // 4).astype(dt) * dt(10.0)
        wb = np.where(rng.random(n // 4) < 0.5, dt(1), dt(-1)) * rng.uniform(0.01, 3, n // 4)
    a = np.concatenate([a, ga, big, -big, tiny, ia, m, wa, np.abs(wa)]).astype(dt)
    b = np.concatenate([b, gb, tiny, tiny, big, ib, ib, wb.astype(dt), wb.astype(dt)]).astype(dt)
    return a, b


@pytest.mark.parametrize("fma", [False, True], ids=["nofma", "fma"])
@pytest.mark.parametrize("op", ["%", "//"])
@pytest.mark.parametrize("ty", list(FLOATS))
def test_same_type_matches_numpy(ty, op, fma, device):
    dt = FLOATS[ty]
    a, b = inputs(dt, seed=list(FLOATS).index(ty) * 2 + (op == "%"))
    k = _kernel(f"a[i] {op} b[i]", ty, ty, ty, fma=fma)
    got = _run(k, a, b, dt)
    with np.errstate(all="ignore"):
        want = NUMPY_OP[op](a, b)
    assert_same_bits(got, want, a, b)


@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_fmod_matches_numpy(ty, device):
    dt = FLOATS[ty]
    a, b = inputs(dt, seed=11)
    k = _kernel(f"mathlib.fmod_{ty}(a[i], b[i])", ty, ty, ty)
    got = _run(k, a, b, dt)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)
    assert_same_bits(got, want, a, b)


def _int_values(rng, name, n):
    name = pyptx.types.scalar(name).dtype
    info = np.iinfo(name)
    edge = [v for v in (0, 1, -1, 2, int(info.min), int(info.max), int(info.max) - 1)
            if info.min <= v <= info.max]
    r = rng.integers(info.min, info.max, n, dtype=name, endpoint=True)
    return np.concatenate([r, np.array(edge, dtype=name)])


MIXED = [("i8", "f16"), ("f16", "i8"), ("i16", "f32"), ("i32", "f32"), ("u8", "f32"),
         ("i64", "f64"), ("f64", "u64"), ("f32", "i32"), ("u16", "f16")]


@pytest.mark.parametrize("op", ["%", "//"])
@pytest.mark.parametrize("ta,tb", MIXED)
def test_mixed_int_float_matches_numpy(ta, tb, op, device):
    rng = np.random.default_rng(5)

    def vals(t, n):
        if t in FLOATS:
            return np.concatenate([random_bits(rng, FLOATS[t], n // 2), specials(FLOATS[t]),
                                   rng.uniform(-50, 50, n // 2).astype(FLOATS[t])])
        return _int_values(rng, t, n)
    a, b = vals(ta, 600), vals(tb, 600)
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    with np.errstate(all="ignore"):
        want = NUMPY_OP[op](a, b)
    to = {np.float16: "f16", np.float32: "f32", np.float64: "f64"}[want.dtype.type]
    got = _run(_kernel(f"a[i] {op} b[i]", ta, tb, to), a, b, want.dtype)
    assert_same_bits(got, want, a, b)


LITERALS = [-0.5, 0.5, 2.0, -3.0, 0.1, 1e-30, 0.0, -0.0, 1e30]


@pytest.mark.parametrize("op", ["%", "//"])
@pytest.mark.parametrize("ta", ["i8", "i32", "f16", "f32", "f64"])
def test_literal_divisor_matches_numpy(ta, op, device):
    """`a[i] % (-0.5)` with an i8 `a` was +0.0 where numpy says -0.0 (a found hypothesis case)."""
    rng = np.random.default_rng(9)
    a = (_int_values(rng, ta, 200) if ta not in FLOATS else
         np.concatenate([random_bits(rng, FLOATS[ta], 200), specials(FLOATS[ta])]))
    for lit in LITERALS:
        with np.errstate(all="ignore"):
            want = NUMPY_OP[op](a, lit)
        to = {np.float16: "f16", np.float32: "f32", np.float64: "f64"}[want.dtype.type]
        k = _kernel(f"a[i] {op} ({lit!r})", ta, ta, to)
        got = _run(k, a, a, want.dtype)
        assert_same_bits(got, want, a, np.full(len(a), lit))


def test_remainder_zero_sign_regression(cpu_device):
    a = np.array([3, -3, 0, 1, -128], np.int8)
    k = _kernel("a[i] % (-0.5)", "i8", "i8", "f64")
    with np.errstate(all="ignore"):
        want = np.remainder(a, -0.5)
    got = _run(k, a, a, want.dtype)
    assert np.signbit(got).all()
    assert_same_bits(got, want, a, a)


_floats = {ty: st.floats(width=np.dtype(dt).itemsize * 8, allow_nan=True, allow_infinity=True,
                         allow_subnormal=True) for ty, dt in FLOATS.items()}


@st.composite
def _case(draw):
    ty = draw(st.sampled_from(list(FLOATS)))
    pairs = draw(st.lists(st.tuples(_floats[ty], _floats[ty]), min_size=1, max_size=40))
    return ty, pairs


@given(case=_case(), op=st.sampled_from(["%", "//"]))
def test_hypothesis_matches_numpy(case, op, cpu_device):
    ty, pairs = case
    dt = FLOATS[ty]
    a = np.array([p[0] for p in pairs], dt)
    b = np.array([p[1] for p in pairs], dt)
    with np.errstate(all="ignore"):
        want = NUMPY_OP[op](a, b)
    got = _run(_kernel(f"a[i] {op} b[i]", ty, ty, ty), a, b, dt)
    assert_same_bits(got, want, a, b)
