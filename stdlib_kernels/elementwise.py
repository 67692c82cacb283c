"""Elementwise `add(a, b)`: the residual connections of a transformer block; and the device
copy behind `out=` for results that are a reshape of what a kernel wrote (`copy_words`).

A thread per 4 elements with 128-bit loads and stores when the size is a multiple of 4 (VEC),
else a thread per element.
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import f32, u16

from . import _validate as V
from ._args import result, stdlib_function


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


@pyptx.kernel
def copy_kernel(dst: u16[:], src: u16[:]):
    """dst = src, 16-bit words (every stdlib result dtype is a whole number of them)."""
    i = pyptx.grid(1)
    if i < len(dst):
        dst[i] = src[i]


def copy_words(dst, src) -> None:
    """dst[...] = src for two DeviceArrays of one shape and dtype, as one launch."""
    n = dst.nbytes // 2
    if n:
        copy_kernel[V.ceil_div(n, 256), 256](dst.reshape(-1).view(np.uint16),
                                             src.reshape(-1).view(np.uint16))


@stdlib_function
def add(a, b, *, out=None):
    """out = a + b elementwise (float32, same shape)."""
    a = V.float32_array("add", "a", a, (1, 2, 3))
    b = V.float32_array("add", "b", b, (1, 2, 3))
    V.same_shape("add", "b", b, a.shape, "a")
    out = result("add", out, a.shape, np.float32, a)
    n = a.size
    if n:
        vec = n % 4 == 0
        per = 4 if vec else 1
        add_kernel[V.ceil_div(n, 256 * per), 256](out.reshape(-1), a.reshape(-1), b.reshape(-1),
                                                  vec)
    return out
