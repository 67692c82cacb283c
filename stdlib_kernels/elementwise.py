"""Elementwise `add(a, b)`: the residual connections of a transformer block; and the device
copy behind `out=` for results that are a reshape of what a kernel wrote (`copy_words`).

add: a thread per 4 elements (128-bit) when the size is a multiple of 4, else per element.
copy: a thread per 16 bytes where both addresses are 16-byte aligned, else the widest they share.
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
def copy_kernel(dst: u16[:], src: u16[:], VEC: pyptx.constexpr):
    """dst = src, 16-bit words (every stdlib result dtype is a whole number of them): a thread
    per VEC words, one VEC·2-byte access each way (VEC = 8: 128-bit), and the last thread copies
    the len % VEC words past the last whole vector one at a time."""
    i = pyptx.grid(1)
    n = len(dst)
    full = n // VEC
    if i < full:
        pyptx.vstore(dst, i * VEC, pyptx.vload(src, i * VEC, VEC))
    elif i == full:
        for j in range(full * VEC, n):
            dst[j] = src[j]


#: copy_kernel's lanes by the alignment both addresses share (bytes -> u16 words per access)
_LANES = ((16, 8), (8, 4), (4, 2))


def copy_lanes(*pointers: int) -> int:
    """The widest access (u16 words, 8 = 128 bits) that every address in `pointers` allows."""
    for align, lanes in _LANES:
        if all(p % align == 0 for p in pointers):
            return lanes
    return 1


def _address(a) -> int:
    """A DeviceArray's address on a GPU; 0 (aligned) on the CPU executor, whose launches stage
    arrays into aligned buffers like host arrays."""
    return a.device_pointer if a.on_gpu else 0


def copy_words(dst, src) -> None:
    """dst[...] = src for two DeviceArrays of one shape and dtype, as one launch (16 bytes a
    thread where both addresses are 16-byte aligned: a misaligned source, `V.aligned`'s case,
    gets the widest access the two addresses share)."""
    n = dst.nbytes // 2
    if n:
        vec = copy_lanes(_address(dst), _address(src))
        copy_kernel[V.ceil_div(n // vec + 1, 256), 256](dst.reshape(-1).view(np.uint16),
                                                        src.reshape(-1).view(np.uint16), vec)


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
