"""Launch graphs on the CPU executor: `with pyptx.graph() as g:` records, `g.launch()` replays
the same launches (re-reading the same DeviceArrays) and gives what direct launches give."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32

pytestmark = pytest.mark.usefixtures("cpu_device")


@pytest.fixture
def cpu_device(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")


@pyptx.kernel
def axpy(out: f32[:], x: f32[:], a: f32, n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = a * x[i] + out[i]


@pyptx.kernel
def square_into(out: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * x[i]


def _step_direct(y, t, x, n):
    """The sequence the graph records, launched directly."""
    square_into[(n + 63) // 64, 64](t, x, n)
    axpy[(n + 63) // 64, 64](y, t, 0.5, n)
    axpy[(n + 63) // 64, 64](y, x, -2.0, n)


def test_replay_matches_direct_launches_and_sees_new_data():
    r = np.random.default_rng(0)
    n = 200
    x0, y0 = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    x, y = pyptx.to_device(x0), pyptx.to_device(y0)
    t = pyptx.to_device(np.full(n, np.nan, np.float32))
    with pyptx.graph() as g:
        _step_direct(y, t, x, n)
    assert g.launches == 3
    np.testing.assert_array_equal(y.copy_to_host(), y0)        # recorded, not run
    xd, yd = pyptx.to_device(x0), pyptx.to_device(y0)
    td = pyptx.to_device(np.full(n, np.nan, np.float32))
    for step in range(3):
        g.launch()
        _step_direct(yd, td, xd, n)
        np.testing.assert_array_equal(y.copy_to_host(), yd.copy_to_host())
        x1 = r.standard_normal(n).astype(np.float32)             # the host changes the input
        x.copy_from_host(x1)
        xd.copy_from_host(x1)
    want = y0.astype(np.float64)
    assert not np.allclose(y.copy_to_host(), want)


def test_stdlib_calls_replay_like_direct_calls():
    """A stdlib function called on device arrays inside a graph: its result array is filled
    by each replay, from the input's current contents."""
    import stdlib_kernels as sk
    r = np.random.default_rng(1)
    w = r.standard_normal(300).astype(np.float32)
    xd, wd = pyptx.to_device(np.full((4, 300), np.nan, np.float32)), pyptx.to_device(w)
    with pyptx.graph() as g:
        out = sk.rmsnorm(xd, wd)
    for _ in range(2):
        x = r.standard_normal((4, 300)).astype(np.float32)
        xd.copy_from_host(x)
        g.launch()
        np.testing.assert_array_equal(out.copy_to_host(), sk.rmsnorm(x, w))


def test_numpy_argument_inside_a_capture_is_a_launch_error():
    x = pyptx.to_device(np.ones(8, np.float32))
    host = np.zeros(8, np.float32)
    with pytest.raises(pyptx.LaunchError, match="argument 'out': a numpy array inside a "
                                                "pyptx.graph"):
        with pyptx.graph():
            square_into[1, 8](host, x, 8)
    assert not host.any()
    with pytest.raises(pyptx.LaunchError, match="argument 'x':.*a DLPack-only object inside"):
        with pyptx.graph():
            square_into[1, 8](x, _DLPackOnly(np.ones(8, np.float32)), 8)


class _DLPackOnly:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_nested_capture_is_an_error_and_the_outer_one_survives():
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    out = pyptx.to_device(np.zeros(8, np.float32))
    with pyptx.graph() as g:
        square_into[1, 8](out, x, 8)
        with pytest.raises(pyptx.LaunchError, match="nested"):
            with pyptx.graph():
                pass
    g.launch()
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(8) ** 2)


def test_an_exception_inside_the_block_discards_the_graph():
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    out = pyptx.to_device(np.zeros(8, np.float32))
    with pytest.raises(RuntimeError, match="boom"):
        with pyptx.graph() as g:
            square_into[1, 8](out, x, 8)
            raise RuntimeError("boom")
    with pytest.raises(pyptx.LaunchError, match="discarded"):
        g.launch()
    square_into[1, 8](out, x, 8)                 # launches run directly again
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(8) ** 2)


def test_bad_launch_inside_a_capture_raises_at_once_and_misuse_is_reported():
    x = pyptx.to_device(np.ones(8, np.float32))
    with pytest.raises(pyptx.LaunchError, match="argument 'n'"):
        with pyptx.graph():
            square_into[1, 8](x, x, 1.5)
    with pytest.raises(pyptx.LaunchError, match="stream="):
        with pyptx.graph():
            square_into[1, 8](x, x, 8, stream=0)
    g = pyptx.graph()
    with pytest.raises(pyptx.LaunchError, match="nothing was recorded"):
        g.launch()
    with g:
        pass
    g.launch()                                    # an empty graph replays nothing
    with pytest.raises(pyptx.LaunchError, match="records once"):
        with g:
            pass
    g.close()
    with pytest.raises(pyptx.LaunchError, match="closed"):
        g.launch()
