"""The real f64 DSL math functions compiled by pyptx and run on the CPU executor: bit-identical
to the numpy mirror (so the mirror's accuracy results hold for the GPU too) and within 2 ulp of
numpy.  (f32: tests/test_mathlib_f32.py.)
"""
import numpy as np
import pytest

import mathlib_emulation as E
from test_mathlib_accuracy import NUMPY, _inputs, ulp_distance

import pyptx
from pyptx import f64, i32


def _kernel(name, ty):
    fn = getattr(pyptx.math, name)

    def k(out: ty[:], x: ty[:], n: i32):
        i = pyptx.grid(1)
        if i < n:
            out[i] = fn(x[i])
    k.__name__ = f"mathlib_{name}_{ty}"
    return k


@pytest.mark.parametrize("fma", [True, False])
@pytest.mark.parametrize("ty", [f64], ids=["f64"])
@pytest.mark.parametrize("name", sorted(NUMPY))
def test_kernel_bit_identical_to_emulation(name, ty, fma, device):
    dt = ty.dtype
    rng = np.random.default_rng(7)
    x = _inputs(name, rng, 600)[::2]
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-310]])
    with np.errstate(over="ignore"):
        x = x.astype(dt)
    out = np.empty_like(x)
    k = pyptx.kernel(_kernel(name, ty), fma=fma)
    k[(len(x) + 127) // 128, 128](out, x, len(x))
    with np.errstate(all="ignore"):
        want = E.FUNCS[f"{name}_{ty}"](x)
        ref = NUMPY[name](x)
    assert np.array_equal(out, want, equal_nan=True), x[out != want][:5]
    num = ~np.isnan(want)
    assert np.array_equal(np.signbit(out[num]), np.signbit(want[num]))
    cr = NUMPY[name](x.astype(np.float64)).astype(dt)
    trusted = ulp_distance(ref, cr) <= 1        # numpy's own f32 log/exp2 can be 3-4 ulp off
    assert ulp_distance(out, ref)[trusted].max() <= 2
