"""The streamed softmax (softmax_block_kernel with CHUNKS = 0): pass 1 stores e^(x − r) in `out`
against a per-thread reference r that moves when a chunk rises more than STREAM_HEADROOM above
it (rescaling what the thread already stored), pass 2 rescales `out` by one factor per thread.
These rows make the reference move (ramps, late spikes), stay put (flat rows), start masked
(-inf / -1e30 prefixes) or reach ±1e30; outputs are NaN-poisoned first, every row length is
tried aligned (VEC = 4) and misaligned (VEC = 1)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
import stdlib_kernels as sk
from stdlib_kernels.softmax import STREAM_HEADROOM
from test_stdlib_refs import poisoned, randn, rng, softmax_ref

RTOL, ATOL = 2e-5, 1e-10


def streamed(x, block=32):
    """softmax of x's rows through the streamed path (32 threads: many chunks per thread)."""
    out = poisoned(x.shape)
    n = x.shape[1]
    sk.softmax_block_kernel[x.shape[0], block](out, x, block, 4 if n % 4 == 0 else 1, 0)
    return out


@pytest.mark.parametrize("n", [1000, 1001, 1003])
def test_ramps_move_the_reference_every_chunk(n):
    """Rising by ~30 per chunk of a thread: every chunk moves r and rescales what was stored."""
    r = rng(n)
    x = np.stack([np.linspace(-300, 300, n), np.linspace(300, -300, n),
                  r.permutation(np.linspace(-300, 300, n))]).astype(np.float32)
    x += randn(r, 3, n, scale=0.5)
    assert 600 / n * 4 * 32 > STREAM_HEADROOM
    np.testing.assert_allclose(streamed(x), softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n", [1024, 1029])
def test_late_spikes_and_masked_prefixes(n):
    r = rng(7 + n)
    x = randn(r, 4, n, scale=2.0)
    x[0, n - 5] = 60.0                      # one late spike far above every reference
    x[1, : n // 2] = -np.inf                # masked first half (attention-style)
    x[2, : n // 2] = -1e30                  # the same with a finite mask value
    x[3, 1::7] += 40.0                      # every thread's references move once or twice
    got = streamed(x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, softmax_ref(x), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("n", [1000, 1001])
def test_extreme_magnitudes(n):
    r = rng(11 + n)
    x = np.concatenate([randn(r, 2, n, scale=1e30),
                        (r.choice([-80.0, 80.0], size=(1, n)) + r.uniform(-1, 1, (1, n))),
                        -80.0 - r.uniform(0, 1, (1, n))]).astype(np.float32)
    got = streamed(x)
    np.testing.assert_allclose(got, softmax_ref(x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n", [1000, 1001])
def test_rows_of_minus_flt_max_do_not_count_the_fill(n):
    """Every value −FLT_MAX: each output 1/n (the columns outside a partial chunk add nothing)."""
    x = np.full((5, n), np.finfo(np.float32).min, np.float32)
    np.testing.assert_allclose(streamed(x), np.full(x.shape, 1.0 / n), rtol=1e-5)


def test_in_place_on_the_same_array():
    x = randn(rng(3), 5, 1001, scale=30.0)
    want = softmax_ref(x)
    sk.softmax_block_kernel[5, 32](x, x, 32, 1, 0)
    np.testing.assert_allclose(x, want, rtol=RTOL, atol=ATOL)


def test_streamed_path_is_one_exp_per_element():
    """The IR of the streamed kernel calls exp inline: count the exp bodies (each clamps its
    argument to [−104, 89] once) — 4 per chunk in pass 1, 1 for a reference move and 1 per
    thread; the old two-pass scheme had 4 more for pass 2."""
    ptx = pyptx.compile(sk.softmax_block_kernel,
                        constexprs={"BLOCK": 1024, "VEC": 4, "CHUNKS": 0}).ptx
    clamps = sum(1 for line in ptx.splitlines() if "min.f32" in line and "0f42B20000" in line)
    assert clamps == 6


@settings(max_examples=8, deadline=None)
@given(n=st.integers(129, 700), scale=st.sampled_from([0.5, 5.0, 50.0]),
       seed=st.integers(0, 2**16))
def test_random_rows_any_length(n, scale, seed):
    x = randn(rng(seed), 3, n, scale=scale)
    np.testing.assert_allclose(streamed(x), softmax_ref(x), rtol=RTOL, atol=ATOL)
