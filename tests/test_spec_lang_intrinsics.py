"""Intrinsics (docs/language.md), end to end on the CPU executor against numpy / plain Python."""
from __future__ import annotations

import os
import sys
import zlib
from collections import Counter

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import make_kernel  # noqa: E402
from pyptx import (block_dim, block_idx, bool_, constexpr, f16, f32, f64, grid_dim,  # noqa: E402,F401
                   i8, i32, i64, thread_idx, u8, u32, u64)

NPT = {"i8": np.int8, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
       "f16": np.float16, "f32": np.float32, "f64": np.float64}


# ---- indices -----------------------------------------------------------------------------------

@pyptx.kernel
def indices3d(o: i32[:, :]):
    gx = block_idx.x * block_dim.x + thread_idx.x
    gy = block_idx.y * block_dim.y + thread_idx.y
    gz = block_idx.z * block_dim.z + thread_idx.z
    lin = (gz * (grid_dim.y * block_dim.y) + gy) * (grid_dim.x * block_dim.x) + gx
    o[lin, 0] = thread_idx.x
    o[lin, 1] = thread_idx.y
    o[lin, 2] = thread_idx.z
    o[lin, 3] = block_idx.x
    o[lin, 4] = block_idx.y
    o[lin, 5] = block_idx.z
    o[lin, 6] = block_dim.x * 100 + block_dim.y * 10 + block_dim.z
    o[lin, 7] = grid_dim.x * 100 + grid_dim.y * 10 + grid_dim.z
    o[lin, 8] = pyptx.lane_id()
    o[lin, 9] = pyptx.WARP_SIZE


def test_indices_3d_grid(cpu_device):
    grid, block = (3, 2, 2), (4, 3, 5)
    n = 3 * 2 * 2 * 4 * 3 * 5
    o = np.full((n, 10), -1, np.int32)
    indices3d[grid, block](o)
    seen = set()
    for bz in range(2):
        for by in range(2):
            for bx in range(3):
                for tz in range(5):
                    for ty in range(3):
                        for tx in range(4):
                            gx, gy, gz = bx * 4 + tx, by * 3 + ty, bz * 5 + tz
                            lin = (gz * 6 + gy) * 12 + gx
                            tlin = (tz * 3 + ty) * 4 + tx
                            assert list(o[lin]) == [tx, ty, tz, bx, by, bz, 435, 322, tlin % 32, 32]
                            seen.add(lin)
    assert len(seen) == n


@pyptx.kernel
def grids(o1: i32[:], o2: i32[:, :]):
    i = pyptx.grid(1)
    o1[i] = i
    x, y = pyptx.grid(2)
    o2[y, x] = x * 1000 + y


def test_grid_1_and_2(cpu_device):
    o1 = np.full(6 * 16 * 4, -1, np.int32)
    o2 = np.full((4 * 4, 6 * 16), -1, np.int32)
    grids[(6, 4), (16, 4)](o1, o2)
    # grid(1) is the x index only
    xs = np.arange(96)
    assert set(o1[:96]) == set(xs)
    yy, xx = np.mgrid[0:16, 0:96]
    np.testing.assert_array_equal(o2, xx * 1000 + yy)


# ---- barriers and fences ---------------------------------------------------------------------

@pyptx.kernel
def barriers(o: f32[:], x: f32[:], T: constexpr):
    s = pyptx.shared.array(T, f32)
    t = thread_idx.x
    s[t] = x[block_idx.x * T + t]
    pyptx.syncthreads()
    v = s[T - 1 - t]
    pyptx.syncthreads()
    s[t] = v * 2.0
    pyptx.syncwarp()
    w = s[t ^ 1]
    pyptx.syncwarp(0xFFFFFFFF)
    pyptx.threadfence()
    o[block_idx.x * T + t] = w


def test_syncthreads_syncwarp_threadfence(cpu_device):
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    o = np.full(128, np.nan, np.float32)
    barriers[2, 64](o, x, 64)
    r = x.reshape(2, 64)[:, ::-1] * 2
    want = r[:, np.arange(64) ^ 1].reshape(-1)
    np.testing.assert_array_equal(o, want)
    ptx = pyptx.compile(barriers, constexprs={"T": 64}).ptx
    assert "bar.sync" in ptx or "barrier.sync" in ptx
    assert "bar.warp.sync" in ptx and "membar.gl" in ptx or "fence" in ptx


@pyptx.kernel
def partial_barrier(o: f32[:]):
    if thread_idx.x < 16:
        pyptx.syncthreads()
    o[thread_idx.x] = 1.0


def test_partial_barrier_is_launch_error(cpu_device):
    with pytest.raises(pyptx.LaunchError):
        partial_barrier[1, 64](np.zeros(64, np.float32))


# ---- shared / dynamic / local memory ----------------------------------------------------------

@pyptx.kernel
def shared_2d(o: f32[:, :], x: f32[:, :], TM: constexpr, TN: constexpr):
    tile = pyptx.shared.array((TM, TN + 1), f32)
    cnt = pyptx.shared.array(1, i32)
    r = thread_idx.y
    c = thread_idx.x
    if r == 0 and c == 0:
        cnt[0] = 0
    tile[r, c] = x[r, c]
    pyptx.syncthreads()
    pyptx.atomic_add(cnt, 0, 1)
    o[c, r] = tile[r, c]
    pyptx.syncthreads()
    if r == 0 and c == 0:
        o[0, 0] = cnt[0]


def test_shared_2d_tuple_shape(cpu_device):
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    o = np.full((8, 4), np.nan, np.float32)
    shared_2d[1, (8, 4)](o, x, 4, 8)
    want = x.T.copy()
    want[0, 0] = 32
    np.testing.assert_array_equal(o, want)
    res = pyptx.compile(shared_2d, constexprs={"TM": 4, "TN": 8}).ptx
    assert ".shared" in res


@pyptx.kernel
def dyn_shared(o: f64[:], x: f64[:]):
    s = pyptx.shared.dynamic(f64)
    t = thread_idx.x
    s[t] = x[t]
    pyptx.syncthreads()
    o[t] = s[block_dim.x - 1 - t] + 48.0


def test_shared_dynamic(cpu_device):
    x = np.random.default_rng(3).standard_normal(48)
    o = np.full(48, np.nan)
    dyn_shared[1, 48](o, x, shared_mem=48 * 8)
    np.testing.assert_array_equal(o, x[::-1] + 48)
    with pytest.raises(pyptx.MemoryFault):
        dyn_shared[1, 48](o, x, shared_mem=40 * 8)


@pyptx.kernel
def local_arr(o: i32[:], x: i32[:], N: constexpr):
    buf = pyptx.local.array(N, i32)
    m = pyptx.local.array((2, N), f32)
    t = pyptx.grid(1)
    for k in range(N):
        buf[k] = x[t] * k
        m[1, k] = f32(k)
    s = 0
    for k in range(N - 1, -1, -1):
        s = s * 3 + buf[k] + i32(m[1, k])
    o[t] = s


def test_local_array(cpu_device):
    x = np.arange(-16, 16, dtype=np.int32)
    o = np.zeros(32, np.int32)
    local_arr[1, 32](o, x, 5)
    want = []
    for v in x:
        s = 0
        for k in range(4, -1, -1):
            s = s * 3 + int(v) * k + k
        want.append(s)
    np.testing.assert_array_equal(o, want)


# ---- warp shuffles and votes --------------------------------------------------------------------

@pytest.mark.parametrize("t", ["i32", "u32", "i64", "u64", "f32", "f64"])
def test_shuffles(t, cpu_device):
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def shf_{t}(o: {t}[:, :], x: {t}[:]):
            i = pyptx.grid(1)
            v = x[i]
            ln = pyptx.lane_id()
            o[0, i] = pyptx.shfl_xor(v, 5)
            o[1, i] = pyptx.shfl_down(v, 3)
            o[2, i] = pyptx.shfl_up(v, 7)
            o[3, i] = pyptx.shfl_idx(v, (ln * 7 + 3) % 32)
            o[4, i] = pyptx.shfl_idx(v, 0)
        """)
    rng = np.random.default_rng(4)
    dt = np.dtype(NPT[t])
    n = 64
    x = (rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, n, dtype=dt, endpoint=True)
         if dt.kind in "iu" else rng.standard_normal(n).astype(dt) * 1e5)
    o = np.zeros((5, n), dt)
    k[1, n](o, x)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    np.testing.assert_array_equal(o[0], x[base + (lane ^ 5)])
    np.testing.assert_array_equal(o[1], x[base + np.where(lane + 3 < 32, lane + 3, lane)])
    np.testing.assert_array_equal(o[2], x[base + np.where(lane - 7 >= 0, lane - 7, lane)])
    np.testing.assert_array_equal(o[3], x[base + (lane * 7 + 3) % 32])
    np.testing.assert_array_equal(o[4], x[base])


@pytest.mark.parametrize("t", ["i8", "u8", "f16", "bool_"])
def test_shuffles_narrow_types_widen(t, cpu_device):
    """Beyond the documented 32/64-bit types: narrow types are shuffled through a 32-bit register and converted
    back (value-preserving), as Numba does for its shfl_sync on small ints (decisions.md)."""
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def shfn_{t}(o: {t}[:], x: {t}[:]):
            i = pyptx.grid(1)
            o[i] = pyptx.shfl_xor(x[i], 1)
        """)
    dt = np.dtype({"i8": np.int8, "u8": np.uint8, "f16": np.float16, "bool_": np.bool_}[t])
    rng = np.random.default_rng(5)
    x = (rng.random(32) < 0.5) if dt.kind == "b" else (
        rng.standard_normal(32).astype(dt) if dt.kind == "f" else
        rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 32, dtype=dt, endpoint=True))
    o = np.zeros(32, dt)
    k[1, 32](o, x)
    np.testing.assert_array_equal(o, x[np.arange(32) ^ 1])


@pyptx.kernel
def votes_divergent(o: u32[:, :], x: i32[:]):
    i = pyptx.grid(1)
    w = i // 32
    ln = pyptx.lane_id()
    p = x[i] > 0
    o[0, i] = u32(pyptx.vote_any(p))
    o[1, i] = u32(pyptx.vote_all(p))
    o[2, i] = pyptx.ballot(p)
    if ln % 3 != 0:                      # only 2/3 of the lanes vote
        o[3, i] = u32(pyptx.vote_any(p))
        o[4, i] = u32(pyptx.vote_all(p))
        o[5, i] = pyptx.ballot(p)


def test_votes_full_and_divergent(cpu_device):
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 4, 128).astype(np.int32)
    x[32:64] = 1                             # warp 1: all true
    x[64:96] = -1                            # warp 2: all false
    x[96:128:3] = -1                         # warp 3: false exactly where lanes don't vote
    x[97:128:3] = 1
    x[98:128:3] = 1
    o = np.full((6, 128), 0xDEAD, np.uint32)
    votes_divergent[2, 64](o, x)
    p = (x > 0).reshape(4, 32)
    bits = (1 << np.arange(32, dtype=np.uint64))
    active = np.arange(32) % 3 != 0
    for w in range(4):
        sl = slice(w * 32, w * 32 + 32)
        bal = int((p[w] * bits).sum())
        assert (o[0, sl] == int(p[w].any())).all()
        assert (o[1, sl] == int(p[w].all())).all()
        assert (o[2, sl] == bal).all()
        pa = p[w] & active
        assert (o[3, sl][active] == int(pa.any())).all(), w
        assert (o[4, sl][active] == int(p[w][active].all())).all(), w
        assert (o[5, sl][active] == int((pa * bits).sum())).all(), w
        assert (o[3:, sl][:, ~active] == 0xDEAD).all()
    # votes name the lanes that run them (activemask), not a full mask a branch would hang on
    assert "activemask.b32" in pyptx.compile(votes_divergent).ptx


# ---- atomics --------------------------------------------------------------------------------

ATOMIC_SRC = """
import pyptx
from pyptx import *
@pyptx.kernel
def atom_{kind}_{t}_{space}(a: {t}[:, :], old: {t}[:], v: {t}[:]):
    i = pyptx.grid(1)
    if {shared}:
        s = pyptx.shared.array((2, 3), {t})
        if thread_idx.x == 0:
            s[1, 2] = a[1, 2]
        pyptx.syncthreads()
        old[i] = pyptx.atomic_{kind}(s, (1, 2), v[i])
        pyptx.syncthreads()
        if thread_idx.x == 0:
            a[1, 2] = s[1, 2]
    else:
        old[i] = pyptx.atomic_{kind}(a, (1, 2), v[i])
"""


def _serial_consistent(kind, init, vals, olds, final, dt):
    """Is there an order of the operations whose old values are `olds` and ends at `final`?
    (Depth-first over the operations whose old value equals the current one; equal values are
    interchangeable, and an op that leaves the value unchanged is always safe to take first.)"""
    op = {"add": lambda a, b: a + b, "min": min, "max": max, "exch": lambda a, b: b,
          "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[kind]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    olds = olds.tolist()
    vals = vals.tolist()
    init, final = init.item(), final.item()
    if kind == "exch":        # a chain init -> v_a -> v_b ...: a multiset identity suffices
        return Counter(olds) + Counter([final]) == Counter([init]) + Counter(vals)
    mask = None
    if dt.kind in "iu":       # unsigned bit patterns of the element width
        mask = (1 << (8 * dt.itemsize)) - 1
    signed = dt.kind == "i"

    def sval(v):              # the signed value of a bit pattern (for min/max)
        return v - (1 << (8 * dt.itemsize)) if signed and v >> (8 * dt.itemsize - 1) else v

    def apply(a, b):
        if kind in ("min", "max") and mask is not None:
            return a if op(sval(a), sval(b)) == sval(a) else b
        return op(a, b)

    def canon(v):
        return v & mask if mask is not None else v

    pending = Counter((canon(o), canon(v)) for o, v in zip(olds, vals))

    def dfs(cur):
        if not pending:
            return cur == canon(final)
        cands = sorted({v for (o, v), c in pending.items() if o == cur and c},
                       key=lambda v: canon(apply(cur, v)) != cur)
        for v in cands:
            pending[(cur, v)] -= 1
            if not pending[(cur, v)]:
                del pending[(cur, v)]
            ok = dfs(canon(apply(cur, v)))
            pending[(cur, v)] += 1
            if ok:
                return True
        return False
    return dfs(canon(init))


def _vals(kind, dt, n, rng):
    if kind in ("and", "or", "xor"):
        bits = dt.itemsize * 8
        v = np.array([1 << (k % bits) for k in range(n)], dtype=np.uint64).astype(dt)
        if kind == "and":
            v = ~v
        return v
    if dt.kind == "f":
        return rng.choice(np.arange(-200, 200), n, replace=False).astype(dt) * dt.type(0.5)
    if kind == "add":
        return rng.integers(0 if dt.kind == "u" else -100, 100, n).astype(dt)
    return rng.choice(np.arange(1, 10**4), n, replace=False).astype(dt) * \
        (dt.type(1) if dt.kind == "u" else np.where(rng.random(n) < 0.5, -1, 1).astype(dt))


ATOMIC_CASES = [(k, t, sp) for k in ("add", "min", "max", "exch") for t in
                ("i32", "u32", "i64", "u64", "f32", "f64") for sp in ("global", "shared")] + \
               [(k, t, sp) for k in ("and", "or", "xor") for t in ("i32", "u32", "i64", "u64")
                for sp in ("global", "shared")]


@pytest.mark.parametrize("kind,t,space", ATOMIC_CASES,
                         ids=[f"{k}-{t}-{s}" for k, t, s in ATOMIC_CASES])
def test_atomics_contention(kind, t, space, cpu_device):
    k = make_kernel(ATOMIC_SRC.format(kind=kind, t=t, space=space,
                                      shared="True" if space == "shared" else "False"))
    dt = np.dtype(NPT[t])
    rng = np.random.default_rng(zlib.crc32(f"{kind}{t}{space}".encode()))
    n = 64 if space == "shared" else 96
    vals = _vals(kind, dt, n, rng)
    init = {"add": 7, "min": 5000, "max": -5000 if dt.kind != "u" else 3, "exch": 11,
            "and": -1 if dt.kind == "i" else np.iinfo(dt).max if dt.kind == "u" else 0,
            "or": 0, "xor": 0x55}[kind]
    a = np.zeros((2, 3), dt)
    a[:] = dt.type(init)
    a0 = a.copy()
    old = np.zeros(n, dt)
    k[n // 32 if space == "global" else 1, 32 if space == "global" else n](a, old, vals)
    final = a[1, 2]
    assert (a.reshape(-1)[:5] == a0.reshape(-1)[:5]).all()     # other elements untouched
    if dt.kind in "iu":        # compare bit patterns of the wrapped values
        u = np.dtype(f"u{dt.itemsize}")
        assert _serial_consistent(kind, np.array(init).astype(dt).view(u)[()].astype(np.uint64),
                                  vals.view(u).astype(np.uint64), old.view(u).astype(np.uint64),
                                  np.uint64(final.view(u)) if False else
                                  np.array(final).view(u).astype(np.uint64)[()], dt), (old, final)
    else:                      # halves and small sums: exact in f32/f64
        assert _serial_consistent(kind, np.float64(init), vals.astype(np.float64),
                                  old.astype(np.float64), np.float64(final), dt), (old, final)
    ref = {"add": lambda: dt.type(init) + vals.sum(dtype=dt), "min": lambda: min(init, vals.min()),
           "max": lambda: max(init, vals.max()),
           "and": lambda: np.bitwise_and.reduce(np.append(vals, dt.type(init))),
           "or": lambda: np.bitwise_or.reduce(np.append(vals, dt.type(init))),
           "xor": lambda: np.bitwise_xor.reduce(np.append(vals, dt.type(init))),
           "exch": lambda: final}[kind]()
    with np.errstate(over="ignore"):
        assert final == dt.type(ref)


@pyptx.kernel
def cas_race(a: i32[:], old: i32[:], counter: u64[:]):
    i = pyptx.grid(1)
    old[i] = pyptx.atomic_cas(a, 0, 0, i + 1)      # exactly one thread wins
    # a CAS loop: every thread increments the counter once
    while True:
        c = counter[0]
        if pyptx.atomic_cas(counter, 0, c, c + 1) == c:
            break


def test_atomic_cas(cpu_device):
    a = np.zeros(1, np.int32)
    old = np.full(64, -1, np.int32)
    counter = np.zeros(1, np.uint64)
    cas_race[2, 32](a, old, counter)
    assert (old == 0).sum() == 1
    winner = int(np.flatnonzero(old == 0)[0])
    assert a[0] == winner + 1
    assert (old[old != 0] == winner + 1).all()
    assert counter[0] == 64


@pyptx.kernel
def atomic_1d_return(a: u32[:], old: u32[:], f: f32[:], fold: f32[:]):
    i = pyptx.grid(1)
    old[i] = pyptx.atomic_add(a, i % 4, u32(1))
    fold[i] = pyptx.atomic_add(f, 0, 0.25)


def test_atomic_add_1d_counters(cpu_device):
    a = np.zeros(4, np.uint32)
    old = np.zeros(128, np.uint32)
    f = np.zeros(1, np.float32)
    fold = np.full(128, np.nan, np.float32)
    atomic_1d_return[4, 32](a, old, f, fold)
    np.testing.assert_array_equal(a, [32] * 4)
    for r in range(4):
        assert sorted(old[r::4]) == list(range(32))
    assert f[0] == 32.0
    assert sorted(fold) == [k * 0.25 for k in range(128)]


@pytest.mark.parametrize("t", ["i8", "u16", "f16", "bool_"])
def test_atomics_on_narrow_types_are_compile_errors(t):
    k = make_kernel(f"""
        import pyptx
        from pyptx import *
        @pyptx.kernel
        def atom_narrow_{t}(a: {t}[:]):
            pyptx.atomic_add(a, 0, a[1])
        """)
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(k)


# ---- math ---------------------------------------------------------------------------------------

def _ulp_diff(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    it = np.int32 if a.dtype == np.float32 else np.int64
    ai = a.view(it).astype(np.int64)
    bi = b.view(it).astype(np.int64)
    ai = np.where(ai < 0, np.iinfo(it).min - ai, ai)
    bi = np.where(bi < 0, np.iinfo(it).min - bi, bi)
    return np.abs(ai - bi)


MATH1 = {"exp": (np.exp, -80, 80), "exp2": (np.exp2, -120, 120), "log": (np.log, 1e-30, 1e30),
         "log2": (np.log2, 1e-30, 1e30), "sqrt": (np.sqrt, 0, 1e30),
         "sin": (np.sin, -1e5, 1e5), "cos": (np.cos, -1e5, 1e5), "tanh": (np.tanh, -20, 20),
         "floor": (np.floor, -1e6, 1e6), "ceil": (np.ceil, -1e6, 1e6), "fabs": (np.fabs, -1e6, 1e6),
         "rsqrt": (lambda x: 1 / np.sqrt(x), 1e-30, 1e30)}


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_math_functions(t, cpu_device):
    names = list(MATH1)
    body = "\n".join(f"    o[{k}, i] = pyptx.math.{nm}(x[{k}, i])" for k, nm in enumerate(names))
    k = make_kernel(f"""
import pyptx
from pyptx import *
@pyptx.kernel
def math_{t}(o: {t}[:, :], x: {t}[:, :], a: {t}[:], b: {t}[:], c: {t}[:], o2: {t}[:, :]):
    i = pyptx.grid(1)
{body}
    o2[0, i] = pyptx.math.fma(a[i], b[i], c[i])
    o2[1, i] = min(a[i], b[i])
    o2[2, i] = max(a[i], b[i], c[i])
    o2[3, i] = abs(a[i])
""")
    dt = np.dtype(NPT[t])
    rng = np.random.default_rng(7)
    n = 256
    x = np.stack([(np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if lo > 0 else
                   rng.uniform(lo, hi, n)) for (_, lo, hi) in MATH1.values()]).astype(dt)
    a, b, c = (rng.standard_normal(n).astype(dt) for _ in range(3))
    o = np.full((len(names), n), np.nan, dt)
    o2 = np.full((4, n), np.nan, dt)
    k[n // 64, 64](o, x, a, b, c, o2)
    for r, nm in enumerate(names):
        want = MATH1[nm][0](x[r]).astype(dt)
        tol = {"sqrt": 0, "floor": 0, "ceil": 0, "fabs": 0, "rsqrt": 2}.get(nm, 2)
        d = _ulp_diff(o[r], want)
        assert d.max() <= tol, (nm, t, d.max(), x[r][d.argmax()], o[r][d.argmax()],
                                want[d.argmax()])
    exact = (a.astype(np.longdouble) * b + c)
    np.testing.assert_array_equal(o2[0], exact.astype(dt)) if t == "f32" else \
        np.testing.assert_allclose(o2[0], a * b + c, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(o2[1], np.minimum(a, b))
    np.testing.assert_array_equal(o2[2], np.maximum(np.maximum(a, b), c))
    np.testing.assert_array_equal(o2[3], np.abs(a))


def test_fast_math_loosely(cpu_device):
    names = ["exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sqrt"]
    body = "\n".join(f"    o[{k}, i] = pyptx.math.fast_{nm}(x[i])" for k, nm in enumerate(names))
    k = make_kernel(f"""
import pyptx
from pyptx import *
@pyptx.kernel
def fastmath(o: f32[:, :], x: f32[:], r: f32[:]):
    i = pyptx.grid(1)
{body}
    r[i] = pyptx.math.fast_rcp(x[i])
""")
    x = np.random.default_rng(8).uniform(0.1, 4, 128).astype(np.float32)
    o = np.full((len(names), 128), np.nan, np.float32)
    r = np.full(128, np.nan, np.float32)
    k[2, 64](o, x, r)
    for j, nm in enumerate(names):
        np.testing.assert_allclose(o[j], getattr(np, nm)(x), rtol=2e-3, atol=1e-5, err_msg=nm)
    np.testing.assert_allclose(r, 1 / x, rtol=1e-5)
    assert ".approx" in pyptx.compile(k).ptx


@pyptx.kernel
def bitops(o: i32[:, :], o64: i64[:, :], ob: u32[:], od: i32[:], odu: u32[:], x: u32[:],
           y: i64[:], b8: i8[:]):
    i = pyptx.grid(1)
    o[0, i] = pyptx.popc(x[i])
    o[1, i] = pyptx.clz(x[i])
    o[2, i] = pyptx.popc(y[i])
    o[3, i] = pyptx.clz(y[i])
    o[4, i] = pyptx.popc(b8[i])
    o[5, i] = pyptx.clz(b8[i])
    ob[i] = pyptx.brev(x[i])
    o64[0, i] = pyptx.brev(y[i])
    od[i] = pyptx.dp4a(i32(x[i]), i32(y[i]), 5)
    odu[i] = pyptx.dp4a(x[i], u32(y[i]), u32(7))


def _bits(v, nbits):
    return [(int(v) >> k) & 1 for k in range(nbits)]


def test_popc_clz_brev_dp4a(cpu_device):
    rng = np.random.default_rng(9)
    n = 64
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0xFFFFFFFF]
    y = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    y[:2] = [0, -1]
    b8 = rng.integers(-128, 128, n).astype(np.int8)
    o = np.full((6, n), -1, np.int32)
    o64 = np.zeros((1, n), np.int64)
    ob = np.zeros(n, np.uint32)
    od = np.zeros(n, np.int32)
    odu = np.zeros(n, np.uint32)
    bitops[1, n](o, o64, ob, od, odu, x, y, b8)
    for j in range(n):
        xu, yu, bu = int(x[j]), int(y[j]) & (2**64 - 1), int(b8[j]) & 0xFF
        assert o[0, j] == bin(xu).count("1")
        assert o[1, j] == 32 - xu.bit_length()
        assert o[2, j] == bin(yu).count("1")
        assert o[3, j] == 64 - yu.bit_length()
        assert o[4, j] == bin(bu).count("1")
        assert o[5, j] == 8 - bu.bit_length()
        assert ob[j] == int(format(xu, "032b")[::-1], 2)
        assert int(o64[0, j]) & (2**64 - 1) == int(format(yu, "064b")[::-1], 2)
        xa = np.array([xu], np.uint32).view(np.int8).astype(int)
        ya = np.array([yu & 0xFFFFFFFF], np.uint32).view(np.int8).astype(int)
        assert od[j] == np.int32(np.int64((xa * ya).sum() + 5).astype(np.int32))
        xa = np.array([xu], np.uint32).view(np.uint8).astype(int)
        ya = np.array([yu & 0xFFFFFFFF], np.uint32).view(np.uint8).astype(int)
        assert odu[j] == (int((xa * ya).sum()) + 7) & 0xFFFFFFFF


# ---- device functions ---------------------------------------------------------------------------

@pyptx.func
def sq(v: f32):
    return v * v


@pyptx.func
def divmod_pair(a: i32, b: i32):
    return a // b, a % b


@pyptx.func
def sumsq_and_max(a: f32, b: f32) -> f32:
    return sq(a) + sq(b)


@pyptx.func
def early(a: i32):
    if a < 0:
        return -1
    for k in range(a):
        if k * k > a:
            return k
    return 100


@pyptx.kernel
def uses_funcs(o: f32[:], q: i32[:], r: i32[:], e: i32[:], x: f32[:], y: f32[:], a: i32[:],
               b: i32[:]):
    i = pyptx.grid(1)
    o[i] = sumsq_and_max(x[i], y[i])
    q[i], r[i] = divmod_pair(a[i], b[i])
    e[i] = early(a[i])


def test_device_functions(cpu_device):
    rng = np.random.default_rng(10)
    n = 64
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = rng.integers(-30, 30, n).astype(np.int32)
    b = rng.integers(1, 7, n).astype(np.int32) * np.where(rng.random(n) < 0.5, -1, 1).astype(np.int32)
    o = np.full(n, np.nan, np.float32)
    q, r, e = (np.full(n, -999, np.int32) for _ in range(3))
    uses_funcs[1, n](o, q, r, e, x, y, a, b)
    np.testing.assert_allclose(o, x * x + y * y, rtol=1e-6)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)

    def early_ref(v):
        if v < 0:
            return -1
        for k in range(v):
            if k * k > v:
                return k
        return 100
    np.testing.assert_array_equal(e, [early_ref(int(v)) for v in a])


def test_func_return_annotation_checked():
    k = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.func
        def bad_ret(v: f32) -> i32:
            return v * 2.0
        @pyptx.kernel
        def calls_bad_ret(o: f32[:]):
            o[0] = bad_ret(o[1])
        """, "calls_bad_ret")
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(k)
    assert ei.value.lineno in (5, 6, 7, 10)


def test_func_param_annotation_converts_like_numba():
    """A float into an i32 parameter truncates toward zero, as Numba's typed signatures do
    (docs/decisions.md); a non-number is still a CompileError."""
    k = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.func
        def takes_i32(v: i32):
            return v + 1
        @pyptx.kernel
        def calls_takes_i32(o: f64[:]):
            o[0] = takes_i32(o[1])
            o[2] = takes_i32(o[3])
        """, "calls_takes_i32")
    o = np.array([np.nan, 7.9, np.nan, -3.7])
    k[1, 1](o)
    assert o[0] == 8.0 and o[2] == -2.0
    bad = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.func
        def takes_i32(v: i32):
            return v + 1
        @pyptx.kernel
        def passes_array(o: f64[:]):
            o[0] = takes_i32(o)
        """, "passes_array")
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(bad)


def test_mutual_recursion_is_compile_error():
    k = make_kernel("""
        import pyptx
        from pyptx import *
        @pyptx.func
        def ping(n: i32):
            return pong(n - 1) if n > 0 else 0
        @pyptx.func
        def pong(n: i32):
            return ping(n - 1) + 1
        @pyptx.kernel
        def pingpong(o: i32[:]):
            o[0] = ping(4)
        """, "pingpong")
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(k)
    assert "recurs" in str(ei.value).lower()


# ---- print ---------------------------------------------------------------------------------------

@pyptx.kernel
def printing(x: i32[:], f: f32[:], u: u8[:], b: bool_[:], h: f16[:], d: i64[:]):
    t = thread_idx.x
    if t == 1:
        print("hello", x[t], f[t], u[t])
        print(b[t], h[t], d[t])
        print("only a string")
        print()


def test_print_scalars_and_strings(capfd, cpu_device):
    printing[1, 4](np.array([3, -7, 9, 1], np.int32), np.array([0, 1.5, 2, 3], np.float32),
                   np.array([1, 250, 3, 4], np.uint8), np.array([0, 1, 0, 1], np.bool_),
                   np.array([0, -0.5, 0, 0], np.float16), np.array([0, -2**40, 0, 0], np.int64))
    out = capfd.readouterr().out.splitlines()
    assert out[0] == "hello -7 1.500000 250"
    assert out[1] in ("1 -0.500000 -1099511627776", "True -0.500000 -1099511627776")
    assert out[2] == "only a string"
    assert out[3] == ""
    assert len(out) == 4


@pyptx.kernel
def shfl_divergent(o: i32[:], x: i32[:]):
    i = pyptx.grid(1)
    if pyptx.lane_id() < 16:             # full-mask shuffle in a branch half the warp takes
        o[i] = pyptx.shfl_xor(x[i], 1)


def test_full_mask_shuffle_under_divergence_runs(cpu_device):
    """Undefined on the GPU (the mask names lanes that never arrive); the executor runs it with
    the lanes that are there instead of crashing (it raised TypeError from _force_warp_sync)."""
    x = np.arange(32, dtype=np.int32)
    o = np.full(32, -1, np.int32)
    shfl_divergent[1, 32](o, x)
    np.testing.assert_array_equal(o[:16], x[:16] ^ 1)
    assert (o[16:] == -1).all()
