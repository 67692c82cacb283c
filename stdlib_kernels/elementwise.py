"""Elementwise `add(a, b)`: the residual connections of a transformer block.

A thread per 4 elements with 128-bit loads and stores when the size is a multiple of 4 (VEC),
else a thread per element.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import f32

from . import _validate as V


@pyptx.kernel
def add_kernel(out: f32[:], a: f32[:], b: f32[:], VEC: pyptx.constexpr):
    """out = a + b (flat arrays of one size)."""
    i = pyptx.grid(1)
    if VEC:
        if i * 4 < len(out):
            x = pyptx.vload(a, i * 4, 4)
            y = pyptx.vload(b, i * 4, 4)
            pyptx.vstore(out, i * 4, (x[0] + y[0], x[1] + y[1], x[2] + y[2], x[3] + y[3]))
    elif i < len(out):
        out[i] = a[i] + b[i]


def add(a, b):
    """out = a + b elementwise (float32, same shape; numpy arrays or DeviceArrays)."""
    a = V.float32_array("add", "a", a, (1, 2, 3))
    b = V.float32_array("add", "b", b, (1, 2, 3))
    V.same_shape("add", "b", b, a.shape, "a")
    out = V.empty(a.shape, np.float32, a)
    n = a.size
    if n:
        vec = n % 4 == 0
        per = 4 if vec else 1
        add_kernel[V.ceil_div(n, 256 * per), 256](out.reshape(-1), a.reshape(-1), b.reshape(-1),
                                                  vec)
    return out
