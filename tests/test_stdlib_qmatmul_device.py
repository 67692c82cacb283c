"""The fused GGUF matmuls on device-resident activations and weights (CPU executor): the same
numbers as with numpy arguments, results as DeviceArrays, usable inside a launch graph."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import quant


@pytest.fixture(autouse=True)
def cpu_device(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")


@pytest.mark.parametrize("fmt,fn,k", [("q4_k", sk.q4k_matmul, 256), ("q6_k", sk.q6k_matmul, 256),
                                      ("q8_0", sk.q8_0_matmul, 96)])
@pytest.mark.parametrize("path", ["dp4a", "f32"])
def test_device_arguments_give_the_numpy_results(fmt, fn, k, path):
    r = np.random.default_rng(k)
    w = quant.quantize((r.standard_normal((40, k)) * 0.1).astype(np.float32), fmt)
    x = r.standard_normal((2, k)).astype(np.float32)
    got = fn(pyptx.to_device(x), pyptx.to_device(w), 40, path=path)
    assert isinstance(got, pyptx.DeviceArray) and got.shape == (2, 40)
    np.testing.assert_array_equal(got.copy_to_host(), fn(x, w, 40, path=path))


def test_gate_up_swiglu_on_device_inside_a_graph():
    r = np.random.default_rng(5)
    wg = quant.quantize((r.standard_normal((24, 256)) * 0.1).astype(np.float32), "q4_k")
    wu = quant.quantize((r.standard_normal((24, 256)) * 0.1).astype(np.float32), "q4_k")
    x_d = pyptx.to_device(np.zeros((1, 256), np.float32))
    wg_d, wu_d = pyptx.to_device(wg), pyptx.to_device(wu)
    with pyptx.graph() as g:
        out = sk.q4k_gate_up_swiglu(x_d, wg_d, wu_d, 24)
    for _ in range(2):
        x = r.standard_normal((1, 256)).astype(np.float32)
        x_d.copy_from_host(x)
        g.launch()
        np.testing.assert_array_equal(out.copy_to_host(), sk.q4k_gate_up_swiglu(x, wg, wu, 24))
    with pytest.raises(TypeError, match="w must be"):
        sk.q4k_matmul(x_d, pyptx.to_device(wg.view(np.int8)), 24)
