"""Numba-CUDA parity intrinsics (frontend/parity.py): each run on the CPU executor against a
numpy reference, with random inputs and poisoned outputs, and each checked to lower to the PTX
instruction CUDA C uses for it."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import pyptx
from pyptx import f32, i32, u32, u64, f64

RNG = np.random.default_rng(7)
SHAPE = (3, 5)
SCALE = (2.0, -1.5)


def ptx_of(k, **kw):
    return pyptx.compile(k, **kw).ptx


def test_gridsize_size_tuples_and_dynamic_shared():
    @pyptx.kernel
    def k(out: f32[:, :], x: f32[:], sizes: i32[:]):
        buf = pyptx.shared.array(0, f32)
        tile = pyptx.shared.array(SHAPE, f32)
        t = pyptx.thread_idx.x
        i = pyptx.grid(1)
        buf[t] = x[i]
        tile[t % SHAPE[0], t % SHAPE[1]] = 1.0
        pyptx.syncthreads()
        if i < out.size:
            out[i // out.shape[1], i % out.shape[1]] = buf[t] * SCALE[0] + SCALE[1]
        if i == 0:
            sizes[0] = pyptx.gridsize(1)
            gx, gy = pyptx.gridsize(2)
            sizes[1] = gx * 1000 + gy
            sizes[2] = x.size
            sizes[3] = out.size
    x = RNG.random(96).astype(np.float32)
    out = np.full((8, 12), np.nan, np.float32)
    sizes = np.full(4, -1, np.int32)
    k[3, 32](out, x, sizes, shared_mem=32 * 4)
    np.testing.assert_array_equal(out.ravel(), x * np.float32(2.0) + np.float32(-1.5))
    np.testing.assert_array_equal(sizes, [96, 96 * 1000 + 1, 96, 96])
    assert "__dynamic_shared" in ptx_of(k)


@pyptx.kernel
def shape_at(out: i32[:], x: f32[:, :, :], n: i32):
    out[0] = x.shape[n]                                    # SHAPE_AT


@pyptx.kernel
def tuple_at(out: f32[:], n: i32):
    out[0] = SCALE[n]


def test_shape_and_tuples_indexed_at_run_time_work_like_python(cpu_device):
    """Numba-CUDA: negative indices count from the end; docs/decisions.md."""
    x = np.zeros((2, 3, 5), np.float32)
    out = np.full(1, -1, np.int32)
    for n in range(-3, 3):
        shape_at[1, 1](out, x, n)
        assert out[0] == x.shape[n], n
    outf = np.full(1, np.nan, np.float32)
    for n in range(-2, 2):
        tuple_at[1, 1](outf, n)
        assert outf[0] == np.float32(SCALE[n]), n


@pytest.mark.parametrize("n", [3, 5, -4, 2**31 - 1, -2**31])
def test_shape_indexed_out_of_range_at_run_time_faults(cpu_device, n):
    """Numba-CUDA raises IndexError (debug=True) or ends the thread: never a made-up size."""
    import inspect
    out = np.full(1, -1, np.int32)
    with pytest.raises(pyptx.MemoryFault, match="index out of range") as ei:
        shape_at[1, 1](out, np.zeros((2, 3, 5), np.float32), n)
    src, first = inspect.getsourcelines(shape_at.py_func)
    assert ei.value.source_line == first + next(i for i, l in enumerate(src) if "# SHAPE_AT" in l)
    assert ei.value.thread == (0, 0, 0) and out[0] == -1
    with pytest.raises(pyptx.MemoryFault, match="index out of range"):
        tuple_at[1, 1](np.zeros(1, np.float32), 2 if n > 0 else -3)


def test_shape_indexed_by_a_constant_out_of_range_is_a_compile_error():
    @pyptx.kernel
    def k(out: i32[:], x: f32[:]):
        out[0] = x.shape[1]
    with pytest.raises(pyptx.CompileError, match=r"x.shape\[1\] is out of range") as ei:
        pyptx.compile(k)
    assert ei.value.lineno and ei.value.offset


def test_run_time_index_check_folds_away_once_the_index_is_known():
    @pyptx.kernel
    def k(out: i32[:], x: f32[:, :]):
        for d in pyptx.static_range(2):
            out[d] = x.shape[d]
    assert "trap" not in ptx_of(k)
    assert "trap;" in ptx_of(shape_at)


def test_constant_tuple_holding_a_string_cannot_be_stored():
    BAD = (1, "two")

    @pyptx.kernel
    def k(x: f32[:], i: i32):
        x[0] = BAD[0]
        x[1] = BAD[i]
    with pytest.raises(pyptx.CompileError, match="numbers"):
        pyptx.compile(k)


def test_block_reductions_syncthreads_count_and_or():
    @pyptx.kernel
    def k(out: i32[:, :], x: f32[:], thr: f32):
        i = pyptx.grid(1)
        v = x[i]
        out[i, 0] = pyptx.syncthreads_count(v > thr)
        out[i, 1] = i32(pyptx.syncthreads_and(v > thr))
        out[i, 2] = i32(pyptx.syncthreads_or(v > thr))
    nb, tpb = 4, 96
    x = RNG.random(nb * tpb).astype(np.float32)
    x[tpb:2 * tpb] = 2.0                 # block 1: all above
    x[2 * tpb:3 * tpb] = -1.0            # block 2: none above
    out = np.full((nb * tpb, 3), -9, np.int32)
    k[nb, tpb](out, x, np.float32(0.5))
    above = (x > 0.5).reshape(nb, tpb)
    exp = np.stack([above.sum(1), above.all(1), above.any(1)], 1).astype(np.int32)
    np.testing.assert_array_equal(out.reshape(nb, tpb, 3), np.repeat(exp[:, None], tpb, 1))
    text = ptx_of(k)
    assert "bar.red.popc.u32" in text and "bar.red.and.pred" in text and "bar.red.or.pred" in text


def test_syncthreads_count_after_divergent_code():
    @pyptx.kernel
    def k(out: i32[:], x: i32[:]):
        i = pyptx.grid(1)
        v = x[i]
        if v % 3 == 0:
            v = v * 2
        out[i] = pyptx.syncthreads_count(v % 2 == 0)
    x = RNG.integers(-100, 100, 64).astype(np.int32)
    out = np.full(64, -9, np.int32)
    k[2, 32](out, x)
    v = np.where(x % 3 == 0, x * 2, x)
    exp = np.repeat([(v[:32] % 2 == 0).sum(), (v[32:] % 2 == 0).sum()], 32)
    np.testing.assert_array_equal(out, exp)


def _lane_groups(values, n_warps):
    """numpy reference of match.any over full warps: per lane, the mask of equal lanes."""
    out = np.zeros(values.size, np.uint32)
    for w in range(n_warps):
        seg = values[32 * w:32 * w + 32]
        for l in range(32):
            out[32 * w + l] = sum(1 << j for j in range(32) if seg[j] == seg[l])
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64])
def test_match_any_and_all(dtype):
    @pyptx.kernel
    def k(anym: u32[:], allm: u32[:], allp: i32[:], x):
        i = pyptx.grid(1)
        anym[i] = pyptx.match_any(x[i])
        m, p = pyptx.match_all(x[i])
        allm[i] = m
        allp[i] = i32(p)
    x = RNG.integers(0, 4, 96).astype(dtype)
    x[64:] = 3                                         # warp 2: all equal
    anym = np.zeros(96, np.uint32); allm = np.ones(96, np.uint32) * 7
    allp = np.full(96, -1, np.int32)
    k[1, 96](anym, allm, allp, x)
    np.testing.assert_array_equal(anym, _lane_groups(x, 3))
    uniform = np.repeat([len(set(x[32 * w:32 * w + 32])) == 1 for w in range(3)], 32)
    np.testing.assert_array_equal(allp, uniform.astype(np.int32))
    np.testing.assert_array_equal(allm, np.where(uniform, 0xFFFFFFFF, 0).astype(np.uint32))


def test_match_ptx_instructions():
    @pyptx.kernel
    def k(out: u32[:], x: i32[:], y: f64[:]):
        i = pyptx.grid(1)
        m, p = pyptx.match_all(y[i])
        out[i] = pyptx.match_any(x[i]) + m
    text = ptx_of(k)
    assert "match.any.sync.b32" in text and "match.all.sync.b64" in text


def test_activemask_lanemask_vote_uni_in_a_branch():
    @pyptx.kernel
    def k(act: u32[:], lt: u32[:], uni: i32[:], x: i32[:]):
        i = pyptx.grid(1)
        lt[i] = pyptx.lanemask_lt()
        if x[i] > 0:
            act[i] = pyptx.activemask()
            uni[i] = i32(pyptx.vote_uni(x[i] > 5))
    x = RNG.integers(-5, 10, 64).astype(np.int32)
    x[32:] = RNG.integers(6, 10, 32)                   # warp 1: all positive and > 5
    act = np.full(64, 7, np.uint32); lt = np.full(64, 7, np.uint32)
    uni = np.full(64, -1, np.int32)
    k[1, 64](act, lt, uni, x)
    lane = np.arange(64) % 32
    np.testing.assert_array_equal(lt, ((1 << lane) - 1).astype(np.uint32))
    for w in range(2):
        s = slice(32 * w, 32 * w + 32)
        pos = x[s] > 0
        mask = sum(1 << j for j in range(32) if pos[j])
        big = x[s][pos] > 5
        exp_uni = int(big.all() or not big.any())
        np.testing.assert_array_equal(act[s][pos], mask)
        np.testing.assert_array_equal(act[s][~pos], 7)
        np.testing.assert_array_equal(uni[s][pos], exp_uni)
    text = ptx_of(k)
    assert "%lanemask_lt" in text and "activemask.b32" in text and "vote.sync.uni.pred" in text


def test_atomic_inc_dec_wrap_around():
    @pyptx.kernel
    def k(c: u32[:], olds: u32[:], lim: u32):
        i = pyptx.grid(1)
        olds[i] = pyptx.atomic_inc(c, 0, lim)
        pyptx.atomic_dec(c, 1, lim)
    n, lim = 200, 7
    c = np.array([3, 2], np.uint32)
    olds = np.full(n, 99, np.uint32)
    k[4, 50](c, olds, np.uint32(lim))
    inc, dec = 3, 2
    seen = []
    for _ in range(n):
        seen.append(inc)
        inc = 0 if inc >= lim else inc + 1
        dec = lim if dec == 0 or dec > lim else dec - 1
    np.testing.assert_array_equal(c, [inc, dec])
    assert sorted(olds.tolist()) == sorted(seen)
    text = ptx_of(k)
    assert "atom.global.inc.u32" in text and "atom.global.dec.u32" in text


@pyptx.kernel
def _incdec64(c: u64[:], olds: u64[:], lims: u64[:]):
    i = pyptx.grid(1)
    if i < olds.shape[0]:
        j = i % 2
        if i % 3 == 0:
            olds[i] = pyptx.atomic_dec(c, 2 + j, lims[2 + j])
        else:
            olds[i] = pyptx.atomic_inc(c, j, lims[j])


def _orbit(kind, start, lim, n):
    """The values a u64 counter passes through under n sequential inc/dec (the old values)."""
    seen, v = [], start
    for _ in range(n):
        seen.append(v)
        if kind == "inc":
            v = 0 if v >= lim else v + 1
        else:
            v = lim if v == 0 or v > lim else v - 1
    return seen, v


_U64 = st.one_of(st.integers(0, 12), st.integers(2**64 - 12, 2**64 - 1),
                 st.integers(2**32 - 6, 2**32 + 6), st.integers(0, 2**64 - 1))


@given(st.lists(_U64, min_size=4, max_size=4), st.lists(_U64, min_size=4, max_size=4))
def test_atomic_inc_dec_u64_under_contention(starts, lims):
    """300 threads on four u64 counters (a CAS loop each): the final values and the multiset of
    returned old values match a sequential model, wrap-around included."""
    n = 300
    c = np.array(starts, np.uint64)
    olds = np.full(n, 0xDEAD, np.uint64)
    _incdec64[3, 128](c, olds, np.array(lims, np.uint64))
    i = np.arange(n)
    for slot in range(4):
        kind = "dec" if slot >= 2 else "inc"
        who = (i % 3 == 0) if kind == "dec" else (i % 3 != 0)
        who &= i % 2 == slot % 2
        seen, final = _orbit(kind, starts[slot], lims[slot], int(who.sum()))
        assert int(c[slot]) == final
        assert sorted(int(x) for x in olds[who]) == sorted(seen)
    text = ptx_of(_incdec64)
    assert "atom.global.cas.b64" in text and ".inc.u64" not in text and ".dec.u64" not in text


def test_atomic_inc_needs_u32():
    @pyptx.kernel
    def k(c: i32[:]):
        pyptx.atomic_inc(c, 0, 5)
    with pytest.raises(pyptx.CompileError, match="u32"):
        pyptx.compile(k)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.float32, np.float64])
def test_atomic_sub(dtype):
    @pyptx.kernel
    def k(acc, x, olds):
        i = pyptx.grid(1)
        olds[i] = pyptx.atomic_sub(acc, i % 3, x[i])
    x = (RNG.integers(1, 50, 90) if np.dtype(dtype).kind in "iu" else
         RNG.integers(1, 50, 90) / 4).astype(dtype)
    acc = np.array([5000, 4000, 3000], dtype)
    olds = np.zeros(90, dtype)
    k[3, 30](acc, x, olds)
    exp = np.array([5000, 4000, 3000], dtype) - np.array([x[j::3].sum() for j in range(3)],
                                                         dtype)
    np.testing.assert_array_equal(acc, exp)


def test_atomic_sub_is_an_add_of_the_negation():
    @pyptx.kernel
    def k(acc: f32[:], x: f32[:]):
        pyptx.atomic_sub(acc, 0, x[0])
    text = ptx_of(k)
    assert "neg.f32" in text and "atom.global.add.f32" in text


def test_atomic_nanmin_nanmax_ignore_nan():
    @pyptx.kernel
    def k(mx: f32[:], mn: f32[:], plain: f32[:], x: f32[:]):
        i = pyptx.grid(1)
        pyptx.atomic_nanmax(mx, i % 2, x[i])
        pyptx.atomic_nanmin(mn, i % 2, x[i])
        pyptx.atomic_max(plain, i % 2, x[i])
    x = RNG.standard_normal(64).astype(np.float32)
    x[::5] = np.nan
    mx = np.array([np.nan, -100], np.float32)
    mn = np.array([np.nan, 100], np.float32)
    plain = np.array([np.nan, -100], np.float32)
    k[2, 32](mx, mn, plain, x)
    np.testing.assert_array_equal(mx, [np.nanmax(x[0::2]), np.nanmax(x[1::2])])
    np.testing.assert_array_equal(mn, [np.nanmin(x[0::2]), min(100, np.nanmin(x[1::2]))])
    assert np.isnan(plain[0])              # atomic_max never replaces a NaN already stored
    assert plain[1] == np.nanmax(x[1::2])


def test_atomic_nanmax_on_ints_is_max():
    @pyptx.kernel
    def k(m: i32[:], x: i32[:]):
        pyptx.atomic_nanmax(m, 0, x[pyptx.grid(1)])
    x = RNG.integers(-1000, 1000, 64).astype(np.int32)
    m = np.array([-5000], np.int32)
    k[2, 32](m, x)
    assert m[0] == x.max()


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.int8,
                                   np.uint16])
def test_ffs(dtype):
    @pyptx.kernel
    def k(out: i32[:], x):
        i = pyptx.grid(1)
        out[i] = pyptx.ffs(x[i])
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
    x[:3] = [0, 1, info.min if info.min else info.max]
    out = np.full(64, -7, np.int32)
    k[1, 64](out, x)
    bits = 8 * np.dtype(dtype).itemsize
    u = x.astype(np.dtype(f"u{np.dtype(dtype).itemsize}")).astype(object)
    exp = [0 if v == 0 else next(b + 1 for b in range(bits) if (int(v) >> b) & 1) for v in u]
    np.testing.assert_array_equal(out, exp)


def test_ffs_lowers_to_brev_bfind():
    @pyptx.kernel
    def k(out: i32[:], x: u32[:]):
        out[0] = pyptx.ffs(x[0])
    text = ptx_of(k)
    assert "brev.b32" in text and "bfind.shiftamt.u32" in text


@pyptx.func
def _as_int(v: i32, w: f32):
    return v * 10 + i32(w)


def test_device_function_parameters_convert_like_numba():
    """A float into an int parameter truncates toward zero (Numba casts arguments to the
    declared signature); an int into a float parameter converts."""
    @pyptx.kernel
    def k(out: i32[:], x: f32[:], n: i32[:]):
        i = pyptx.grid(1)
        out[i] = _as_int(x[i], n[i])
    x = (RNG.standard_normal(64) * 50).astype(np.float32)
    n = RNG.integers(-9, 9, 64).astype(np.int32)
    out = np.full(64, -999, np.int32)
    k[1, 64](out, x, n)
    np.testing.assert_array_equal(out, np.trunc(x).astype(np.int32) * 10 + n)


def test_stdlib_math_in_a_kernel_means_pyptx_math():
    import math

    @pyptx.kernel
    def k(out: f32[:], y: f32[:], x: f32[:]):
        i = pyptx.grid(1)
        out[i] = math.atan2(y[i], x[i]) + math.erf(x[i]) + (1.0 if math.isnan(y[i]) else 0.0)
    x = RNG.standard_normal(64).astype(np.float32)
    y = RNG.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    k[1, 64](out, y, x)
    erf = np.array([math.erf(v) for v in x.astype(np.float64)])
    np.testing.assert_allclose(out, np.arctan2(y, x) + erf, rtol=1e-6, atol=1e-6)


def test_stdlib_math_function_pyptx_lacks_is_a_compile_error():
    import math

    @pyptx.kernel
    def k(out: f32[:], x: f32[:]):
        out[0] = math.gamma(x[0])
    with pytest.raises(pyptx.CompileError, match="not available in kernels"):
        pyptx.compile(k)
