"""Every stdlib function rejects bad arguments before any launch, naming the argument."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk

F = np.float32
x2 = np.ones((2, 8), F)
w8 = np.ones(8, F)
cache = np.ones((2, 4, 8), F)


def no_launch(monkeypatch):
    """Make any launch fail loudly, so a check that runs too late is noticed."""
    def boom(*a, **k):
        raise AssertionError("launched before validating")
    monkeypatch.setattr(pyptx.Kernel, "__getitem__", boom)


CASES = [
    (lambda: sk.softmax(x2.astype(np.float64)), TypeError, "x"),
    (lambda: sk.softmax([1.0, 2.0]), TypeError, "x"),
    (lambda: sk.softmax(x2, axis=2), ValueError, "axis"),
    (lambda: sk.rmsnorm(x2, np.ones(7, F)), ValueError, "weight"),
    (lambda: sk.rmsnorm(x2, w8.astype(np.float16)), TypeError, "weight"),
    (lambda: sk.rmsnorm(x2, w8, eps="small"), TypeError, "eps"),
    (lambda: sk.layernorm(x2, beta=np.ones(3, F)), ValueError, "beta"),
    (lambda: sk.layernorm(x2, gamma=np.ones((8, 1), F)), ValueError, "gamma"),
    (lambda: sk.gemm(x2, x2), ValueError, "b"),
    (lambda: sk.gemm(x2, np.ones((8, 3), np.int32)), TypeError, "b"),
    (lambda: sk.gemm(x2, np.ones(8, F)), ValueError, "b"),
    (lambda: sk.gemm(x2, np.ones((8, 3), F), "tensor_core"), TypeError, "float16"),
    (lambda: sk.gemm(x2.astype(np.float16), np.ones((7, 3), np.float16), "tensor_core"),
     ValueError, "b"),
    (lambda: sk.kv_scatter(np.ones(16, F), cache, 4), ValueError, "pos"),
    (lambda: sk.kv_scatter(np.ones(15, F), cache, 0), ValueError, "src"),
    (lambda: sk.kv_scatter(np.ones(16, F), cache[:, ::2], 0), ValueError, "cache"),
    (lambda: sk.kv_scatter(np.ones(16, F), cache, 1.0), TypeError, "pos"),
    (lambda: sk.decode_attention(np.ones((3, 8), F), cache, cache, 2), ValueError, "head"),
    (lambda: sk.decode_attention(np.ones((2, 7), F), cache, cache, 2), ValueError, "q"),
    (lambda: sk.decode_attention(np.ones((2, 8), F), cache, cache[:1], 2), ValueError, "v_cache"),
    (lambda: sk.decode_attention(np.ones((2, 8), F), cache, cache, 5), ValueError, "seq_len"),
    (lambda: sk.rope(np.ones((3, 7), F), np.arange(3)), ValueError, "head_dim"),
    (lambda: sk.rope(np.ones((3, 8), F), np.arange(4)), ValueError, "positions"),
    (lambda: sk.rope(np.ones((3, 8), F), np.arange(3.0)), TypeError, "positions"),
    (lambda: sk.rope(np.ones((3, 8), F), np.arange(3), layout="llama"), ValueError, "layout"),
    (lambda: sk.rope(np.ones((3, 8), F), np.arange(3), theta=-1.0), ValueError, "theta"),
    (lambda: sk.swiglu(w8, np.ones(9, F)), ValueError, "up"),
    (lambda: sk.swiglu(w8.astype(np.float64), w8), TypeError, "gate"),
    (lambda: sk.gate_up_swiglu(x2, np.ones((3, 7), F), np.ones((3, 7), F)), ValueError,
     "w_gate"),
    (lambda: sk.gate_up_swiglu(x2, np.ones((3, 8), F), np.ones((4, 8), F)), ValueError, "w_up"),
]


@pytest.mark.parametrize("call,exc,name", CASES, ids=[f"{i}-{c[2]}" for i, c in enumerate(CASES)])
def test_bad_arguments_are_rejected_before_launch(monkeypatch, call, exc, name):
    no_launch(monkeypatch)
    with pytest.raises(exc, match=name):
        call()


def test_public_functions_have_math_docstrings_and_kernels_are_exposed():
    for fn in sk.__all__:
        obj = getattr(sk, fn)
        if fn.endswith("_kernel"):
            assert isinstance(obj, pyptx.Kernel), fn
        else:
            assert obj.__doc__ and "=" in obj.__doc__, fn
