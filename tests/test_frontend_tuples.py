"""Tuples as compile-time containers: `+` concatenation, `* n` repetition, and growing a tuple
variable inside an unrolled static_range (how tensor-core kernels hold fragment arrays)."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32

from kernel_factory import make_kernel


@pyptx.kernel
def grow(out: f32[:, :], x: f32[:], n: pyptx.constexpr):
    i = pyptx.grid(1)
    if i < len(x):
        acc = ((0.0, 1.0),) * n
        for t in range(3):                      # loop-carried tuple of tuples
            new = ()
            for j in pyptx.static_range(n):     # grown one element per unrolled step
                new = new + ((acc[j][0] + x[i] * j, acc[j][1] * 2.0 if x[i] > 0 else -1.0),)
            acc = new
        for j in pyptx.static_range(n):
            out[i, 2 * j] = acc[j][0]
            out[i, 2 * j + 1] = acc[j][1]


@pytest.mark.parametrize("n", [1, 3])
def test_tuple_concat_repeat_and_growth(n):
    x = np.random.default_rng(5).standard_normal(40).astype(np.float32)
    out = np.full((40, 2 * n), np.nan, np.float32)
    grow[1, 64](out, x, n)
    for j in range(n):
        np.testing.assert_allclose(out[:, 2 * j], 3 * j * x, rtol=1e-6)
        np.testing.assert_array_equal(out[:, 2 * j + 1], np.where(x > 0, 8.0, -1.0))


@pytest.mark.parametrize("body, msg", [
    ("    t = ()\n    for i in range(3):\n        t = t + (x[i],)\n", "another length"),
    ("    t = (x[0], x[1])\n    u = t - t\n", "only '\\+'"),
    ("    t = (x[0],) * x[1]\n", "only '\\+'"),
])
def test_tuple_misuse_is_a_compile_error(body, msg):
    src = ("import pyptx\nfrom pyptx import f32\n@pyptx.kernel\ndef k(x: f32[:]):\n" + body)
    with pytest.raises(pyptx.CompileError, match=msg):
        pyptx.compile(make_kernel(src, "k"))
