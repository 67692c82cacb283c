"""DSL kernels covering every language feature (docs/language.md), each with a numpy reference.

`CASES` lists (kernel, make_args(rng) -> (launch grid, block, args, shared_mem), reference(args)
-> {arg index: expected array}, compare kwargs).  tests/test_frontend_semantics.py runs them on the
CPU executor; the same table can be run on a GPU.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import (block_dim, block_idx, bool_, constexpr, f16, f32, f64, i8, i32, i64, thread_idx,
                   u8, u32)

TILE = 8            # module-level constant, frozen at compile time


@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


@pyptx.func
def warp_sum(v: f32):
    off = 16
    while off > 0:
        v += pyptx.shfl_down(v, off)
        off //= 2
    return v


@pyptx.kernel
def row_sum_shfl(out: f32[:], x: f32[:, :]):
    """One warp per row: strided partial sums, then a shuffle reduction."""
    row = block_idx.x
    s = 0
    for j in range(thread_idx.x, x.shape[1], 32):
        s += x[row, j]
    s = warp_sum(s)
    if pyptx.lane_id() == 0:
        out[row] = s


@pyptx.kernel
def block_scan(out: i32[:], x: i32[:], N: constexpr):
    """Inclusive Hillis-Steele scan in shared memory, barriers inside a loop."""
    buf = pyptx.shared.array(N, i32)
    t = thread_idx.x
    buf[t] = x[t]
    pyptx.syncthreads()
    d = 1
    while d < N:
        v = buf[t - d] if t >= d else 0
        pyptx.syncthreads()
        buf[t] += v
        pyptx.syncthreads()
        d *= 2
    out[t] = buf[t]


@pyptx.kernel
def histogram(hist: u32[:], x: u8[:], n: i32):
    local_hist = pyptx.shared.array(16, u32)
    t = thread_idx.x
    if t < 16:
        local_hist[t] = 0
    pyptx.syncthreads()
    i = pyptx.grid(1)
    while i < n:
        pyptx.atomic_add(local_hist, i32(x[i]) % 16, 1)
        i += block_dim.x * pyptx.grid_dim.x
    pyptx.syncthreads()
    if t < 16:
        pyptx.atomic_add(hist, t, local_hist[t])


@pyptx.kernel
def loops_break_continue(out: i32[:], n: i32):
    t = pyptx.grid(1)
    total = 0
    k = 0
    while True:
        k += 1
        if k > n:
            break
        if k % 3 == 0:
            continue
        total += k * t
    for j in range(10, 0, -2):
        if j == 4:
            continue
        total -= j
    out[t] = total


@pyptx.kernel
def transpose(out: f32[:, :], x: f32[:, :], T: constexpr):
    tile = pyptx.shared.array((T, T + 1), f32)
    bx, by = block_idx.x * T, block_idx.y * T
    tx, ty = thread_idx.x, thread_idx.y
    r, c = by + ty, bx + tx
    if r < x.shape[0] and c < x.shape[1]:
        tile[ty, tx] = x[r, c]
    pyptx.syncthreads()
    r2, c2 = bx + ty, by + tx
    if r2 < out.shape[0] and c2 < out.shape[1]:
        out[r2, c2] = tile[tx, ty]


@pyptx.kernel
def half_math(out: f16[:], x: f16[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * 2.0 + pyptx.math.sqrt(x[i])


@pyptx.kernel
def py_divmod(q: i32[:], r: i32[:], a: i32[:], b: i32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pyptx.kernel
def float_divmod(q: f32[:], r: f32[:], a: f32[:], b: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pyptx.kernel
def guarded(out: f32[:], x: f32[:], n: i32):
    """The guards must prevent out-of-bounds loads (the executor would fault)."""
    i = pyptx.grid(1)
    v = x[i] if i < n else -1.0
    ok = i < n and x[i] > 0.5
    if i < out.shape[0]:
        out[i] = v + (10.0 if ok else 0.0)


@pyptx.kernel
def dyn_shared_reverse(out: f32[:], x: f32[:]):
    buf = pyptx.shared.dynamic(f32)
    t = thread_idx.x
    buf[t] = x[t]
    pyptx.syncthreads()
    out[t] = buf[block_dim.x - 1 - t]


@pyptx.kernel
def votes(anys: u8[:], alls: u8[:], ballots: u32[:], x: i32[:]):
    t = thread_idx.x
    p = x[t] > 0
    w = t // 32
    b = pyptx.ballot(p)
    a = pyptx.vote_any(p)
    al = pyptx.vote_all(p)
    if t % 32 == 0:
        ballots[w] = b
        anys[w] = a
        alls[w] = al


@pyptx.func
def minmax(a: f32, b: f32):
    if a < b:
        return a, b
    return b, a


@pyptx.kernel
def tuples(lo: f32[:], hi: f32[:], x: f32[:], y: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        a, b = minmax(x[i], y[i])
        a, b = b, a
        lo[i], hi[i] = b, a


@pyptx.kernel
def unrolled(out: f32[:], x: f32[:, :]):
    i = pyptx.grid(1)
    if i < x.shape[0]:
        acc = 0.0
        for k in pyptx.static_range(TILE):
            acc += x[i, k] * (k + 1)
        out[i] = acc


@pyptx.kernel
def printer(x: i32[:]):
    t = thread_idx.x
    if t < 2:
        print("t", t, "x", x[t], 1.5 * f32(t))


@pyptx.kernel
def casts(out_i: i32[:], out_u8: u8[:], out_f: f64[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out_i[i] = i32(x[i])
        out_u8[i] = u8(i32(x[i]))
        out_f[i] = f64(x[i]) / 3 + i64(i) * 2


@pyptx.kernel
def float_atomic_minmax(out: f32[:], x: f32[:]):
    t = pyptx.grid(1)
    pyptx.atomic_min(out, 0, x[t])
    pyptx.atomic_max(out, 1, x[t])


def _rng_f32(rng, n, lo=-10, hi=10):
    return rng.uniform(lo, hi, n).astype(np.float32)


def _divmod_args(rng):
    a = rng.integers(-50, 50, 64).astype(np.int32)
    b = rng.integers(-7, 8, 64).astype(np.int32)
    a[:2] = [np.iinfo(np.int32).min, 7]
    b[:2] = [-1, 0]
    return a, b


def _ref_divmod(a, b):
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b), np.remainder(a, b)


def cases():
    """[(name, kernel, args_fn(rng) -> (grid, block, args, shared_mem), ref(args) -> dict)]"""
    out = []

    def add(name, kernel, args_fn, ref, **tol):
        out.append((name, kernel, args_fn, ref, tol))

    add("saxpy", saxpy,
        lambda r: (2, 64, [np.full(100, np.nan, np.float32), _rng_f32(r, 100), _rng_f32(r, 100),
                           np.float32(2.5), 100], 0),
        # fma=True (the default) rounds a*x+y once: compare with the exact value rounded once
        lambda a: {0: (np.float64(a[3]) * a[1].astype(np.float64) + a[2]).astype(np.float32)},
        rtol=1e-6, atol=1e-7)
    add("row_sum_shfl", row_sum_shfl,
        lambda r: (5, 32, [np.zeros(5, np.float32), _rng_f32(r, 5 * 70).reshape(5, 70)], 0),
        lambda a: {0: a[1].sum(axis=1)}, rtol=1e-4, atol=1e-4)
    add("block_scan", block_scan.specialize(N=64),
        lambda r: (1, 64, [np.zeros(64, np.int32), r.integers(-100, 100, 64).astype(np.int32)], 0),
        lambda a: {0: np.cumsum(a[1]).astype(np.int32)})
    add("histogram", histogram,
        lambda r: (2, 64, [np.zeros(16, np.uint32), r.integers(0, 256, 500).astype(np.uint8), 500], 0),
        lambda a: {0: np.bincount(a[1] % 16, minlength=16).astype(np.uint32)})

    def ref_loops(a):
        n = a[1]
        t = np.arange(64)
        total = sum(k for k in range(1, n + 1) if k % 3) * t
        return {0: (total - (10 + 8 + 6 + 2)).astype(np.int32)}
    add("loops", loops_break_continue, lambda r: (1, 64, [np.zeros(64, np.int32), 11], 0), ref_loops)
    add("transpose", transpose.specialize(T=8),
        lambda r: ((3, 2), (8, 8), [np.zeros((20, 13), np.float32), _rng_f32(r, 13 * 20).reshape(13, 20)], 0),
        lambda a: {0: a[1].T})
    add("half_math", half_math,
        lambda r: (1, 64, [np.zeros(50, np.float16), r.uniform(0, 4, 50).astype(np.float16), 50], 0),
        lambda a: {0: (a[1] * np.float16(2.0) + np.sqrt(a[1])).astype(np.float16)})
    add("py_divmod", py_divmod,
        lambda r: (1, 64, [np.zeros(64, np.int32), np.zeros(64, np.int32), *_divmod_args(r), 64], 0),
        lambda a: dict(zip((0, 1), _ref_divmod(a[2], a[3]))))
    add("float_divmod", float_divmod,
        lambda r: (1, 64, [np.zeros(64, np.float32), np.zeros(64, np.float32), _rng_f32(r, 64),
                           _rng_f32(r, 64, 0.5, 3) * np.where(r.random(64) < 0.5, -1, 1).astype(np.float32), 64], 0),
        lambda a: dict(zip((0, 1), _ref_divmod(a[2], a[3]))), rtol=1e-5, atol=1e-5)

    def ref_guarded(a):
        x, n = a[1], a[2]
        o = np.full(a[0].shape, -1.0, np.float32)
        o[:n] = x[:n] + np.where(x[:n] > 0.5, 10.0, 0.0)
        return {0: o}
    add("guarded", guarded, lambda r: (1, 64, [np.zeros(64, np.float32), r.random(40).astype(np.float32), 40], 0),
        ref_guarded)
    add("dyn_shared", dyn_shared_reverse,
        lambda r: (1, 32, [np.zeros(32, np.float32), _rng_f32(r, 32)], 32 * 4),
        lambda a: {0: a[1][::-1]})

    def ref_votes(a):
        p = (a[3] > 0).reshape(2, 32)
        bal = (p * (1 << np.arange(32, dtype=np.uint64))).sum(axis=1).astype(np.uint32)
        return {0: p.any(axis=1).astype(np.uint8), 1: p.all(axis=1).astype(np.uint8), 2: bal}
    add("votes", votes,
        lambda r: (1, 64, [np.zeros(2, np.uint8), np.zeros(2, np.uint8), np.zeros(2, np.uint32),
                           np.concatenate([r.integers(-5, 5, 32), np.ones(32)]).astype(np.int32)], 0),
        ref_votes)
    add("tuples", tuples,
        lambda r: (1, 64, [np.zeros(50, np.float32), np.zeros(50, np.float32), _rng_f32(r, 50),
                           _rng_f32(r, 50), 50], 0),
        lambda a: {0: np.minimum(a[2], a[3]), 1: np.maximum(a[2], a[3])})
    add("unrolled", unrolled,
        lambda r: (1, 32, [np.zeros(20, np.float32), _rng_f32(r, 20 * TILE).reshape(20, TILE)], 0),
        lambda a: {0: (a[1] * np.arange(1, TILE + 1, dtype=np.float32)).sum(axis=1)}, rtol=1e-5, atol=1e-5)

    def ref_casts(a):
        x = a[3]
        xi = x.astype(np.int32)
        return {0: xi, 1: xi.astype(np.uint8), 2: x.astype(np.float64) / 3 + np.arange(len(x)) * 2}
    add("casts", casts,
        lambda r: (1, 64, [np.zeros(40, np.int32), np.zeros(40, np.uint8), np.zeros(40, np.float64),
                           _rng_f32(r, 40, -300, 300), 40], 0),
        ref_casts, rtol=1e-12)
    add("float_atomic_minmax", float_atomic_minmax,
        lambda r: (2, 64, [np.array([1e30, -1e30], np.float32), _rng_f32(r, 128)], 0),
        lambda a: {0: np.array([a[1].min(), a[1].max()], np.float32)})
    return out


__all__ = ["cases", "printer", "bool_", "i8"]
