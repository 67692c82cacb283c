"""The device-function instantiation cache (pyptx/frontend/templates.py) must be invisible:
the IR a kernel lowers to is the same text with the cache on, off, cold and warm."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from kernel_factory import load_module  # noqa: E402
from pyptx.compiler import resolve_param_types  # noqa: E402
from pyptx.frontend import lower_kernel, templates  # noqa: E402
from pyptx.ir import print_function, verify  # noqa: E402
from pyptx.passes import run_pipeline  # noqa: E402

SRC = '''
import pyptx
from pyptx import f32, f64, i32, thread_idx

SCALE = 3.0

@pyptx.func
def poly(x: f64, n: i32):
    acc = 0.0
    k = 0
    while k < n:
        acc = acc * x + 1.0
        k += 1
    return acc

@pyptx.func
def pair(a, b):
    if a < b:
        return a, b
    return b, a

@pyptx.func
def scaled(v):
    return v * SCALE

@pyptx.func
def maybe(v, c):
    if c:
        return v + 1
    return v

def k_math(o: f32[:], x: f32[:], n: i32):
    i = thread_idx.x
    s = 0.0
    for j in range(n):
        s += pyptx.math.exp(x[j]) + pyptx.math.log(x[j] + 2.0)
    o[i] = s + pyptx.math.sin(s) + pyptx.math.tanh(f64(s))

def k_mixed(o: f32[:], x: f32[:], n: i32):
    i = thread_idx.x
    v = x[i]
    lo, hi = pair(v, x[i + 1])
    lo2, hi2 = pair(v, v)
    w = poly(f64(v), n) + poly(f64(v), 3) + scaled(v) + scaled(2)
    o[i] = lo + hi + lo2 + hi2 + f32(w) + maybe(v, True) + maybe(v, False) + maybe(v, n > 2)
'''


def _lower_all(mod, opt):
    out = []
    for name in ("k_math", "k_mixed"):
        f = getattr(mod, name)
        fn = lower_kernel(f, resolve_param_types(f), {}, name=name)
        verify(fn)
        text = print_function(fn)
        if opt:
            text += print_function(run_pipeline(fn, opt_level=2, fma=True))
        out.append(text)
    return out


@pytest.mark.parametrize("opt", [False, True])
def test_cache_is_invisible(opt):
    mod = load_module(SRC)
    templates._CACHE.clear()
    cold = _lower_all(mod, opt)
    warm = _lower_all(mod, opt)
    templates.ENABLED = False
    try:
        plain = _lower_all(mod, opt)
    finally:
        templates.ENABLED = True
    assert cold == plain
    assert warm == plain


def test_changed_global_is_seen():
    mod = load_module(SRC)
    _lower_all(mod, False)
    mod.SCALE = 5.0
    try:
        fn = lower_kernel(mod.k_mixed, resolve_param_types(mod.k_mixed), {}, name="k")
        assert "5.0" in print_function(fn) or "0x40a00000" in print_function(fn).lower()
        assert "3.0" not in print_function(fn)
    finally:
        mod.SCALE = 3.0
