"""Contiguous sub-arrays in kernels (strided ones: test_views_strided.py) (frontend/views.py): rows, `a[s:e]`, `a[i, s:e]`, passed to
device functions, checked against numpy slicing on the CPU executor."""
import numpy as np
import pytest

import pyptx
from pyptx import f32, i32

RNG = np.random.default_rng(5)


@pyptx.func
def _dot(a, b):
    s = 0.0
    for k in range(len(a)):
        s += a[k] * b[k]
    return s


@pyptx.func
def _total(r: f32[:]):
    s = 0.0
    for k in range(r.size):
        s += r[k]
    return s


@pyptx.kernel
def _views(out: f32[:, :], m: f32[:, :], v: f32[:], t: f32[:, :, :], lo: i32, hi: i32):
    i = pyptx.grid(1)
    if i < m.shape[0]:
        row = m[i]
        out[i, 0] = _dot(row, v)
        out[i, 1] = _total(m[i, lo:hi])
        out[i, 2] = _total(v[i:])
        out[i, 3] = f32(len(m[lo:hi]))
        sub = m[1:]
        out[i, 4] = sub[0, i]
        out[i, 5] = t[i][1][2]
        out[i, 6] = _total(t[i, 1])
        out[i, 7] = _total(v[3:1000])
        out[i, 8] = _total(v[hi:lo])           # empty when hi > lo
        out[i, 9] = f32(m[i:].size)


@pytest.mark.parametrize("lo,hi", [(2, 5), (0, 6), (4, 2), (1, 99)])
def test_views_match_numpy(lo, hi):
    m = RNG.random((6, 6)).astype(np.float32)
    v = RNG.random(6).astype(np.float32)
    t = RNG.random((6, 3, 4)).astype(np.float32)
    out = np.full((6, 10), np.nan, np.float32)
    _views[1, 32](out, m, v, t, lo, hi)
    exp = np.stack([m @ v, m[:, lo:hi].sum(1), [v[i:].sum() for i in range(6)],
                    np.full(6, len(m[lo:hi])), m[1, :], t[:, 1, 2], t[:, 1].sum(1),
                    np.full(6, v[3:].sum()), np.full(6, v[hi:lo].sum()),
                    [m[i:].size for i in range(6)]], 1)
    np.testing.assert_allclose(out, exp, rtol=1e-6)


def test_shared_row_view():
    @pyptx.kernel
    def k(out: f32[:], x: f32[:, :]):
        tile = pyptx.shared.array((4, 8), f32)
        r, c = pyptx.thread_idx.y, pyptx.thread_idx.x
        tile[r, c] = x[r, c]
        pyptx.syncthreads()
        if c == 0:
            out[r] = _total(tile[r, 1:7])
    x = RNG.random((4, 8)).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    k[1, (8, 4)](out, x)
    np.testing.assert_allclose(out, x[:, 1:7].sum(1), rtol=1e-6)


@pytest.mark.parametrize("expr,phrase", [
    ("m[0] = 1.0", "cannot assign to a slice"), ("y = v[::0]", "zero"),
    ("y = v[1.0:]", "integer"),
])
def test_unsupported_views_are_compile_errors(expr, phrase):
    import linecache
    src = f"def k(m: f32[:, :], v: f32[:]):\n    {expr}\n"
    fname = f"<views-{abs(hash(expr))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"f32": f32}
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(pyptx.CompileError, match=phrase) as ei:
        pyptx.compile(pyptx.kernel(ns["k"]))
    assert ei.value.lineno == 2
