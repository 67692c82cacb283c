"""stdlib functions on device-resident arrays (`pyptx.DeviceArray` in, DeviceArray out), their
capture in a launch graph, `add`, and `DeviceArray.reshape` (CPU executor)."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from test_stdlib_paged import make, paged_ref
from test_stdlib_refs import randn, rmsnorm_ref, rng, rope_ref

pytestmark = pytest.mark.usefixtures("cpu_device")


@pytest.fixture
def cpu_device(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")


def dev(a):
    return pyptx.to_device(a)


@pytest.mark.parametrize("n", [1, 7, 1000, 1024])
def test_add(n):
    r = rng(n)
    a, b = randn(r, n), randn(r, n)
    np.testing.assert_array_equal(sk.add(a, b), a + b)
    got = sk.add(dev(a.reshape(1, -1)), dev(b.reshape(1, -1)))
    assert isinstance(got, pyptx.DeviceArray) and got.shape == (1, n)
    np.testing.assert_array_equal(got.copy_to_host().reshape(-1), a + b)
    with pytest.raises(ValueError, match="b must have shape"):
        sk.add(a, b[:-1] if n > 1 else randn(r, 2))
    with pytest.raises(TypeError, match="b must be float32"):
        sk.add(a, b.astype(np.float64))


def test_device_arrays_in_and_out_match_numpy():
    r = rng(11)
    x, w = randn(r, 3, 64), randn(r, 64)
    got = sk.rmsnorm(dev(x), dev(w))
    assert isinstance(got, pyptx.DeviceArray)
    np.testing.assert_array_equal(got.copy_to_host(), sk.rmsnorm(x, w))
    x3, pos = randn(r, 2, 4, 16), np.array([3, 17], np.int32)
    got = sk.rope(dev(x3), dev(pos))
    np.testing.assert_allclose(got.copy_to_host(), rope_ref(x3, pos, 1e4, "neox"), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(TypeError, match="positions must be int32"):
        sk.rope(dev(x3), dev(pos.astype(np.int64)))
    with pytest.raises(TypeError, match="weight must be float32"):
        sk.rmsnorm(dev(x), dev(w.astype(np.float64)))


def test_a_decode_like_step_captured_in_a_graph_replays_like_numpy_calls():
    """norm → rope → paged scatter → paged attention → residual on device arrays, recorded once
    and replayed over several tokens while the host updates input, position, slot and length."""
    r = rng(12)
    ps, heads, hd, max_pages = 8, 2, 16, 3
    _, kp, vp, bt, _ = make(r, 1, heads, heads, hd, ps, max_pages, [0])
    kp[:] = np.nan                                            # pages are written before read
    vp[:] = np.nan
    w = randn(r, heads * hd)

    def step(x, w, pos, slots, lens, kpages, vpages, table):
        q = sk.rope(sk.rmsnorm(x, w).reshape(1, heads, hd), pos)
        sk.paged_kv_scatter(q, q, kpages, vpages, slots)     # k = v = q: enough to compare
        att = sk.paged_attention(q, kpages, vpages, table, lens)
        return sk.add(att.reshape(1, heads * hd), x)

    x_d, w_d = dev(np.zeros((1, heads * hd), np.float32)), dev(w)
    pos_d, slot_d, len_d = (dev(np.zeros(1, np.int32)) for _ in range(3))
    kp_d, vp_d, bt_d = dev(kp), dev(vp), dev(bt)        # uploads happen before the capture
    with pyptx.graph() as g:
        out_d = step(x_d, w_d, pos_d, slot_d, len_d, kp_d, vp_d, bt_d)
    assert g.launches == 5
    for t in range(12):
        x = randn(r, 1, heads * hd)
        slot = np.array([bt[0, t // ps] * ps + t % ps], np.int32)
        pos, lens = np.array([t], np.int32), np.array([t + 1], np.int32)
        want = step(x, w, pos, slot, lens, kp, vp, bt)
        for d, v in ((x_d, x), (pos_d, pos), (slot_d, slot), (len_d, lens)):
            d.copy_from_host(v)
        g.launch()
        np.testing.assert_array_equal(out_d.copy_to_host(), want)
    np.testing.assert_array_equal(kp_d.copy_to_host(), kp)
    q = sk.rope(sk.rmsnorm(x, w).reshape(1, heads, hd), pos)
    np.testing.assert_allclose(want - x, paged_ref(q, kp, vp, bt, lens).reshape(1, -1),
                               rtol=1e-4, atol=1e-5)


def test_device_array_reshape_is_a_view():
    a = dev(np.arange(12, dtype=np.float32))
    b = a.reshape(3, -1)
    assert b.shape == (3, 4) and isinstance(b, pyptx.DeviceArray)
    b.copy_from_host(np.full((3, 4), 2, np.float32))
    np.testing.assert_array_equal(a.copy_to_host(), np.full(12, 2, np.float32))
    for bad in ((5, -1), (-1, -1), (13,)):
        with pytest.raises(ValueError, match="reshape"):
            a.reshape(*bad)


def test_rmsnorm_matches_reference_on_device():
    r = rng(13)
    x, w = randn(r, 2, 300), randn(r, 300)
    np.testing.assert_allclose(sk.rmsnorm(dev(x), dev(w)).copy_to_host(), rmsnorm_ref(x, w, 1e-6),
                               rtol=1e-5, atol=1e-6)


def test_softmax_on_device_and_row_slices():
    from test_stdlib_refs import softmax_ref
    r = rng(14)
    x = randn(r, 5, 300, scale=3.0)
    got = sk.softmax(dev(x))
    assert isinstance(got, pyptx.DeviceArray)
    np.testing.assert_array_equal(got.copy_to_host(), sk.softmax(x))
    np.testing.assert_allclose(got.copy_to_host(), softmax_ref(x), rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError, match="axis=-1"):
        sk.softmax(dev(x), axis=0)
    rows = dev(x)[1:3]                                   # a view of rows 1..2
    assert rows.shape == (2, 300)
    np.testing.assert_array_equal(sk.softmax(rows).copy_to_host(), sk.softmax(x[1:3]))
    rows.copy_from_host(np.zeros((2, 300), np.float32))
    d = dev(x)
    d[4:].copy_from_host(np.ones((1, 300), np.float32))
    np.testing.assert_array_equal(d.copy_to_host()[4], np.ones(300, np.float32))
    np.testing.assert_array_equal(d.copy_to_host()[:4], x[:4])
    np.testing.assert_array_equal(d[1].copy_to_host(), x[1])     # a row view (Numba's d[i])
    np.testing.assert_array_equal(d[0:4:2].copy_to_host(), x[0:4:2])   # a strided view
    with pytest.raises(TypeError, match="DeviceArray"):
        d[[0, 1]]
