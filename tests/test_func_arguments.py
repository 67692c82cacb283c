"""Compile-time arguments of `@pyptx.func`s that are not scalars: another device function (called
inside, so one skeleton serves several inner steps, as the GEMV kernels do) and a tuple of arrays
(unpacked inside).  Run on the CPU executor against numpy."""
import numpy as np
import pytest

import pyptx
from pyptx import f32, i32


@pyptx.func
def _scaled(v: f32, arrays, i: i32):
    x, _ = arrays
    return v * x[i]


@pyptx.func
def _shifted(v: f32, arrays, i: i32):
    _, y = arrays
    return v + y[i]


@pyptx.func
def _apply_twice(step, v: f32, arrays, i: i32):
    return step(step(v, arrays, i), arrays, i)


@pyptx.kernel
def apply_kernel(out: f32[:], x: f32[:], y: f32[:], SHIFT: pyptx.constexpr):
    i = pyptx.grid(1)
    if i < len(out):
        out[i] = _apply_twice(_shifted if SHIFT else _scaled, f32(1.5), (x, y), i)


@pytest.mark.parametrize("shift", [False, True])
def test_func_and_array_tuple_arguments(shift, cpu_device):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(70).astype(np.float32)
    y = rng.standard_normal(70).astype(np.float32)
    out = np.full(70, np.nan, np.float32)
    apply_kernel[2, 64](out, x, y, shift)
    want = (np.float32(1.5) + y) + y if shift else (np.float32(1.5) * x) * x
    np.testing.assert_allclose(out, want, rtol=1e-6)
