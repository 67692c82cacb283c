"""`pyptx.reduce_add/min/max/and/or/xor(v)`: warp reductions over the lanes that execute them
together (PTX redux.sync, sm_80+; CUDA's `__reduce_*_sync(__activemask(), v)`).  The worked
example of docs/architecture.md, "Adding an intrinsic": five places, nothing else.  Checked
against numpy per warp, with whole warps, a partial last warp and a divergent branch."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import i32, u32

MODES = ("add", "min", "max", "and", "or", "xor")
NP = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
      "or": np.bitwise_or, "xor": np.bitwise_xor}


def _kernel(mode, odd_only):
    fn = getattr(pyptx, f"reduce_{mode}")

    @pyptx.kernel
    def k(out: i32[:], x: i32[:], n: i32, ODD: pyptx.constexpr):
        i = pyptx.grid(1)
        if i < n:
            if ODD:
                if i % 2 == 1:
                    out[i] = fn(x[i])
            else:
                out[i] = fn(x[i])
    return k


def _want(mode, x, lanes_of):
    out = np.full(x.size, -7, np.int64)
    for w in range(0, x.size, 32):
        idx = [i for i in range(w, min(w + 32, x.size)) if lanes_of(i)]
        if idx:
            r = NP[mode].reduce(x[idx].astype(np.int64))
            out[idx] = ((r + 2**31) % 2**32) - 2**31 if mode == "add" else r
    return out.astype(np.int32)


@pytest.mark.parametrize("odd", [False, True], ids=["all lanes", "odd lanes"])
@pytest.mark.parametrize("mode", MODES)
def test_signed_reductions_match_numpy(monkeypatch, mode, odd):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    rng = np.random.default_rng(7)
    n = 70                                             # two warps and a partial third
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    out = np.full(n, -7, np.int32)
    _kernel(mode, odd)[1, 96](out, x, n, odd)
    np.testing.assert_array_equal(out, _want(mode, x, (lambda i: i % 2 == 1) if odd else
                                             (lambda i: True)))


def test_unsigned_min_max_compare_unsigned(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")

    @pyptx.kernel
    def k(lo: u32[:], hi: u32[:], x: u32[:]):
        i = pyptx.thread_idx.x
        lo[i] = pyptx.reduce_min(x[i])
        hi[i] = pyptx.reduce_max(x[i])
    x = np.arange(32, dtype=np.uint32)
    x[5] = 0xFFFFFFF0                                  # > every other value as unsigned
    lo, hi = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
    k[1, 32](lo, hi, x)
    assert (lo == 0).all() and (hi == 0xFFFFFFF0).all()
    ptx = pyptx.compile(k, arch="sm_80").ptx
    assert "redux.sync.min.u32" in ptx and "redux.sync.max.u32" in ptx


def test_errors_say_what_to_do_instead():
    @pyptx.kernel
    def f(out: pyptx.f32[:], x: pyptx.f32[:]):
        out[0] = pyptx.reduce_add(x[0])
    with pytest.raises(pyptx.CompileError, match="32-bit integer.*shfl_xor"):
        pyptx.compile(f)

    @pyptx.kernel
    def g(out: i32[:], x: i32[:]):
        out[0] = pyptx.reduce_add(x[0])
    with pytest.raises(pyptx.CompileError, match="redux.sync"):
        pyptx.compile(g, arch="sm_75")                  # redux.sync needs sm_80
