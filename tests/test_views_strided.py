"""Strided views in kernels (frontend/views.py): steps, columns, 2-D sub-blocks, views of views,
checked against numpy slicing on the CPU executor (hypothesis draws the (start, stop, step)
triples), plus the faults and CompileErrors at their edges."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import pyptx
from pyptx import f32, i32

RNG = np.random.default_rng(14)
N = 23


@pyptx.kernel
def _runtime_slice(out: f32[:], v: f32[:], lo: i32, hi: i32, k: i32):
    w = v[lo:hi:k]
    j = pyptx.grid(1)
    if j < len(w):
        out[j] = w[j]
    if j == 0:
        out[out.shape[0] - 1] = f32(w.size)


@pyptx.kernel
def _static_slice(out: f32[:], v: f32[:], S: pyptx.constexpr, E: pyptx.constexpr,
                  K: pyptx.constexpr):
    w = v[S:E:K]
    j = pyptx.grid(1)
    if j < len(w):
        out[j] = w[j]
    if j == 0:
        out[out.shape[0] - 1] = f32(w.shape[0])


def _check_1d(got, want):
    assert got[-1] == len(want)
    np.testing.assert_array_equal(got[:len(want)], want)
    assert np.isnan(got[len(want):-1]).all()          # nothing written past the view


@given(st.integers(0, N + 4), st.integers(0, N + 4), st.integers(1, 7))
def test_runtime_bounds_and_step_match_numpy(lo, hi, k):
    v = RNG.random(N).astype(np.float32) + 1
    out = np.full(N + 1, np.nan, np.float32)
    _runtime_slice[1, 32](out, v, lo, hi, k)
    _check_1d(out, v[lo:hi:k])


_BOUND = st.integers(-N - 3, N + 3)


@given(_BOUND, _BOUND, st.sampled_from([1, 2, 3, 5, -1, -2, -4]))
def test_literal_bounds_follow_numpy(start, stop, step):
    v = RNG.random(N).astype(np.float32) + 1
    out = np.full(N + 1, np.nan, np.float32)
    _static_slice[1, 32](out, v, start, stop, step)
    _check_1d(out, v[start:stop:step])


def _exec_kernel(src: str, name: str, **ns):
    import linecache
    fname = f"<strided-{abs(hash(src))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"f32": f32, "i32": i32, "pyptx": pyptx, **ns}
    exec(compile(src, fname, "exec"), ns)
    return ns[name]


@pytest.mark.parametrize("sl", ["::-1", ":", "::", "3:", ":-2", "::2", "-5::-2", ":4:-1",
                                "-1:-9:-3", "2::-1", ":100"])
def test_omitted_bounds_follow_numpy(sl):
    k = pyptx.kernel(_exec_kernel(
        f"def k(out: f32[:], v: f32[:]):\n"
        f"    w = v[{sl}]\n"
        f"    j = pyptx.grid(1)\n"
        f"    if j < len(w):\n"
        f"        out[j] = w[j]\n"
        f"    if j == 0:\n"
        f"        out[out.shape[0] - 1] = f32(w.size)\n", "k"))
    v = RNG.random(N).astype(np.float32) + 1
    out = np.full(N + 1, np.nan, np.float32)
    k[1, 32](out, v)
    _check_1d(out, eval(f"v[{sl}]"))


def test_runtime_step_not_positive_is_empty():
    v = RNG.random(N).astype(np.float32)
    for k in (0, -1):
        out = np.full(N + 1, np.nan, np.float32)
        _runtime_slice[1, 32](out, v, 0, N, k)
        assert out[-1] == 0 and np.isnan(out[:-1]).all()


@pyptx.func
def _total(r):
    s = f32(0)
    for k in range(r.size):
        s += r[k]
    return s


@pyptx.func
def _block_total(b: f32[:, :]):
    s = f32(0)
    for r in range(b.shape[0]):
        for c in range(b.shape[1]):
            s += b[r, c] * f32(r + 1)
    return s


@pyptx.kernel
def _two_d(out: f32[:, :], m: f32[:, :], r0: i32, r1: i32, c0: i32, c1: i32, k: i32):
    j = pyptx.grid(1)
    if j < m.shape[1]:
        col = m[:, j]
        out[j, 0] = _total(col)
        out[j, 1] = _block_total(m[r0:r1, c0:c1])
        out[j, 2] = _total(m[j % m.shape[0], c0:c1:k])
        vv = m[::2, 1:][1:, ::-1]                   # a view of a view
        out[j, 3] = _block_total(vv)
        out[j, 4] = f32(vv.shape[0] * 100 + vv.shape[1])
        out[j, 5] = f32(m[r0:r1, c0:c1].size)
        out[j, 6] = m[r0:r1, ::3][:, j % 3][0] if r1 > r0 and j % 3 < len(m[0, ::3]) else -1.0
        out[j, 7] = _total(m[::-1, j][1::2])


@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9),
       st.integers(1, 4))
def test_2d_views_match_numpy(r0, r1, c0, c1, k):
    rows, cols = 7, 8
    m = RNG.random((rows, cols)).astype(np.float32)
    out = np.full((cols, 8), np.nan, np.float32)
    _two_d[1, 32](out, m, r0, r1, c0, c1, k)
    weights = lambda b: (b * np.arange(1, b.shape[0] + 1, dtype=np.float32)[:, None]).sum()
    vv = m[::2, 1:][1:, ::-1]
    blk = m[r0:r1, c0:c1]
    exp = np.empty_like(out)
    for j in range(cols):
        exp[j] = [m[:, j].sum(), weights(blk), m[j % rows, c0:c1:k].sum(), weights(vv),
                  vv.shape[0] * 100 + vv.shape[1], blk.size,
                  m[r0:r1, ::3][:, j % 3][0] if r1 > r0 and j % 3 < len(m[0, ::3]) else -1.0,
                  m[::-1, j][1::2].sum()]
    np.testing.assert_allclose(out, exp, rtol=2e-6)


def test_writes_and_atomics_through_views():
    @pyptx.kernel
    def k(m: f32[:, :], hist: i32[:, :], j: i32):
        i = pyptx.grid(1)
        if i < m.shape[0]:
            col = m[:, j]
            col[i] = col[i] * 2.0                   # writes through a column
            m[i, ::3][0] = -1.0                     # and through a strided row
            pyptx.atomic_add(hist[:, 1], i % 3, 1)  # atomics on a column of a 2-D array
    m = RNG.random((9, 7)).astype(np.float32)
    hist = RNG.integers(1, 50, (4, 3)).astype(np.int32)
    exp_m, exp_h = m.copy(), hist.copy()
    exp_m[:, 4] *= 2
    exp_m[:, 0] = -1
    np.add.at(exp_h[:, 1], np.arange(9) % 3, 1)
    k[1, 32](m, hist, 4)
    np.testing.assert_array_equal(m, exp_m)
    np.testing.assert_array_equal(hist, exp_h)


def test_shared_memory_column():
    @pyptx.kernel
    def k(out: f32[:], x: f32[:, :]):
        tile = pyptx.shared.array((8, 4), f32)
        r, c = pyptx.thread_idx.y, pyptx.thread_idx.x
        tile[r, c] = x[r, c]
        pyptx.syncthreads()
        if r == 0:
            out[c] = _total(tile[1::3, c])          # compile-time strides: 12, folded
    x = RNG.random((8, 4)).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    k[1, (4, 8)](out, x)
    np.testing.assert_allclose(out, x[1::3].sum(0), rtol=1e-6)


def test_out_of_bounds_through_a_column_faults(cpu_device):
    @pyptx.kernel
    def k(out: f32[:], m: f32[:, :], n: i32):
        col = m[:, 1]
        out[0] = col[n]
    m = RNG.random((5, 4)).astype(np.float32)
    out = np.full(1, np.nan, np.float32)
    k[1, 1](out, m, 4)
    assert out[0] == m[4, 1]
    with pytest.raises(pyptx.MemoryFault):
        k[1, 1](out, m, 5)


def _muls(kernel) -> int:
    body = pyptx.compile(kernel).ptx.split("ld.param")[-1]
    return len([ln for ln in body.splitlines() if ln.strip().startswith("mul.lo")])


def test_contiguous_views_keep_stride_free_addressing():
    """A contiguous view (`v[lo:hi]`, `m[i, lo:hi]`) indexes like its parent with an offset, and
    a 2-D sub-block's inner index is added, not multiplied: as many multiplies as writing the
    offsets out by hand."""
    @pyptx.kernel
    def view(out: f32[:], v: f32[:], m: f32[:, :], lo: i32, hi: i32):
        i = pyptx.grid(1)
        out[i] = v[lo:hi][i] + m[2, lo:hi][i]

    @pyptx.kernel
    def by_hand(out: f32[:], v: f32[:], m: f32[:, :], lo: i32, hi: i32):
        i = pyptx.grid(1)
        out[i] = v[lo + i] + m[2, lo + i]

    @pyptx.kernel
    def block(out: f32[:], m: f32[:, :], r0: i32, c0: i32):
        i = pyptx.grid(1)
        out[i] = m[r0:, c0:][3, i]

    @pyptx.kernel
    def block_by_hand(out: f32[:], m: f32[:, :], r0: i32, c0: i32):
        i = pyptx.grid(1)
        out[i] = m[r0 + 3, c0 + i]
    assert _muls(view) == _muls(by_hand)
    assert _muls(block) <= _muls(block_by_hand) + 1      # + the one stride multiply


@pytest.mark.parametrize("expr,phrase", [
    ("y = v[::0]", "cannot be zero"), ("y = v[::1.5]", "integer"),
    ("y = pyptx.vload(m[:, 0], 0, 2)", "consecutive"),
    ("y = m[:, 0].view(pyptx.f16)", "strided view"),
    ("m[:, 0] = 1.0", "cannot assign to a slice"),
])
def test_strided_view_compile_errors(expr, phrase):
    k = _exec_kernel(f"def k(m: f32[:, :], v: f32[:]):\n    {expr}\n", "k")
    with pytest.raises(pyptx.CompileError, match=phrase) as ei:
        pyptx.compile(pyptx.kernel(k))
    assert ei.value.lineno == 2
