"""Strided views of DeviceArrays (`d[::2]`, `d[:, 0]`, Numba's strided device arrays): numpy's
basic indexing, kernels writing through them into the base array, copies both ways — on the
CPU executor and on the fake GPU (which runs the PTX on the executor over its device memory)."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx.runtime.strided_view import StridedView

from test_capture_rules import fake  # noqa: F401  (fixture: the fake GPU; `cpu` is conftest's)


@pyptx.kernel
def inc(x):
    i = pyptx.grid(1)
    if i < len(x):
        x[i] = x[i] + 1.0


@pyptx.kernel
def inc2(x):
    i = pyptx.grid(1)
    if i < x.shape[0]:
        for j in range(x.shape[1]):
            x[i, j] = x[i, j] + 10.0


KEYS = [(slice(None), 0), slice(None, None, 2), (1, slice(1, None, 2)), (slice(None), 4),
        (slice(3, 0, -1), 2)]


def _base():
    return np.arange(20, dtype=np.float32).reshape(4, 5)


@pytest.mark.parametrize("key", KEYS, ids=str)
@pytest.mark.parametrize("where", ["cpu", "fake"])
def test_a_kernel_writes_through_a_strided_view(request, where, key):
    if where == "fake" and isinstance(key, tuple) and isinstance(key[0], slice) and \
            (key[0].step or 1) < 0:
        pytest.skip("the fake driver maps device memory forward from a pointer only")
    request.getfixturevalue(where)
    a = _base()
    d = pyptx.to_device(a)
    v = d[key]
    want_view = a[key].copy()
    assert v.shape == want_view.shape
    np.testing.assert_array_equal(v.copy_to_host(), want_view)
    if v.ndim == 1:
        inc[1, 32](v)
        a[key] += 1.0
    else:
        inc2[1, 32](v)
        a[key] += 10.0
    np.testing.assert_array_equal(d.copy_to_host(), a)      # only the view's elements moved


@pytest.mark.parametrize("where", ["cpu", "fake"])
def test_views_read_write_and_keep_the_contiguous_cases_devicearrays(request, where):
    request.getfixturevalue(where)
    a = _base()
    d = pyptx.to_device(a)
    assert isinstance(d[1:3], pyptx.DeviceArray) and isinstance(d[2, 1:4], pyptx.DeviceArray)
    assert isinstance(d[::2], StridedView) and isinstance(d[:, 0], StridedView)
    assert d[2, 3] == a[2, 3]
    d[:, 1].copy_from_host(np.full(4, -1, np.float32))
    a[:, 1] = -1
    np.testing.assert_array_equal(d.copy_to_host(), a)
    np.testing.assert_array_equal(d[1:4:2, ::3].copy_to_host(), a[1:4:2, ::3])
    with pytest.raises(TypeError, match="basic indexing"):
        d[[0, 2]]
    with pytest.raises(IndexError):
        d[:, 7]


def test_a_view_copy_is_refused_inside_a_graph(cpu):
    d = pyptx.to_device(_base())
    v = d[:, 0]
    with pytest.raises(pyptx.LaunchError, match="inside a pyptx.graph"):
        with pyptx.graph():
            v.copy_to_host()
