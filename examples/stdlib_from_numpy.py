"""Calling the standard kernel library (stdlib_kernels) with numpy arrays: one Llama-style
block's worth of small ops, each checked against numpy.

    python examples/stdlib_from_numpy.py
"""
import numpy as np

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import quant


def main():
    rng = np.random.default_rng(3)
    tokens, hidden, ffn = 4, 128, 256
    x = rng.standard_normal((tokens, hidden), dtype=np.float32)
    w = rng.random(hidden, dtype=np.float32) + 0.5

    h = sk.rmsnorm(x, w, eps=1e-6)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(h, ref, rtol=1e-5, atol=1e-6)

    w_up = (rng.standard_normal((hidden, ffn)) / np.sqrt(hidden)).astype(np.float32)
    up = sk.gemm(h, w_up)
    np.testing.assert_allclose(up, h.astype(np.float64) @ w_up, rtol=1e-4, atol=1e-4)

    gate = rng.standard_normal((tokens, ffn), dtype=np.float32)
    act = sk.swiglu(gate, up)
    g = gate.astype(np.float64)
    np.testing.assert_allclose(act, g / (1 + np.exp(-g)) * up, rtol=1e-5, atol=1e-6)

    p = sk.softmax(act)
    e = np.exp(act - act.max(axis=1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

    # GGUF: quantise a weight to Q8_0 blocks (llama.cpp's byte layout), multiply without
    # dequantising it in memory; compare with numpy on the dequantised weight
    w_q = quant.quantize(w_up.T.copy(), "q8_0")            # [ffn, hidden] -> raw block bytes
    y = sk.q8_0_matmul(h, w_q, ffn)
    np.testing.assert_allclose(y, h.astype(np.float64) @ quant.dequantize(w_q, "q8_0").reshape(
        ffn, hidden).T.astype(np.float64), rtol=2e-3, atol=2e-3)

    print(f"rmsnorm -> gemm -> swiglu -> softmax -> q8_0 matmul on the {pyptx.device()}: "
          f"all match numpy")


if __name__ == "__main__":
    main()
