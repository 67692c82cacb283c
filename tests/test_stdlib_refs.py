"""float64 numpy references for the stdlib kernel tests (imported by the other test_stdlib_*
files), plus checks that the references themselves mean what docs/stdlib.md says."""
from __future__ import annotations

import numpy as np

SIZES = (1, 7, 33, 1000, 4097)          # the odd sizes every kernel is tried on


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(r: np.random.Generator, *shape, scale: float = 1.0) -> np.ndarray:
    """float32 normal samples; never all zeros."""
    return (r.standard_normal(shape) * scale).astype(np.float32)


def poisoned(shape) -> np.ndarray:
    """An output buffer full of NaN: any element a kernel forgets to write stays NaN."""
    return np.full(shape, np.nan, np.float32)


def softmax_ref(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rmsnorm_ref(x, w, eps):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * np.asarray(w, np.float64)


def layernorm_ref(x, g, b, eps):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * np.asarray(g, np.float64) + np.asarray(b, np.float64)


def gemm_tol(a, b):
    """Elementwise error bound of a float32-accumulated dot product of length k."""
    k = a.shape[1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return mag * (k + 2) * 2.0**-23 + 1e-30


def rope_ref(x, positions, theta, layout):
    x = np.asarray(x, np.float64)
    x3 = x if x.ndim == 3 else x[:, None, :]
    hd = x3.shape[-1]
    i = np.arange(hd // 2)
    ang = np.asarray(positions, np.float64)[:, None] * theta ** (-2.0 * i / hd)   # [seq, hd/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if layout == "neox":
        ia, ib = i, i + hd // 2
    else:
        ia, ib = 2 * i, 2 * i + 1
    out = np.empty_like(x3)
    a, b = x3[..., ia], x3[..., ib]
    out[..., ia] = a * c - b * s
    out[..., ib] = b * c + a * s
    return out.reshape(x.shape)


def decode_ref(q, kc, vc, seq_len):
    n_kv, _, hd = kc.shape
    q2 = np.asarray(q, np.float64).reshape(-1, hd)
    group = q2.shape[0] // n_kv
    out = np.zeros_like(q2)
    for h in range(q2.shape[0]):
        k = kc[h // group, :seq_len].astype(np.float64)
        v = vc[h // group, :seq_len].astype(np.float64)
        if seq_len:
            out[h] = softmax_ref(k @ q2[h] / np.sqrt(hd)) @ v
    return out.reshape(np.shape(q))


def swiglu_ref(g, u):
    g = np.asarray(g, np.float64)
    return g / (1.0 + np.exp(-g)) * np.asarray(u, np.float64)


# ---- the references themselves ------------------------------------------------------------------

def test_softmax_ref_sums_to_one_and_is_shift_invariant():
    x = randn(rng(0), 3, 9, scale=30.0)
    p = softmax_ref(x)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(softmax_ref(x.astype(np.float64) + 50.0), p, rtol=1e-9)


def test_rope_ref_preserves_pair_norms_and_is_identity_at_position_zero():
    x = randn(rng(1), 4, 2, 8)
    pos = np.array([0, 1, 5, 9])
    for layout in ("neox", "gptj"):
        y = rope_ref(x, pos, 10000.0, layout)
        np.testing.assert_allclose(y[0], x[0], rtol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1),
                                   rtol=1e-6)


def test_decode_ref_with_one_token_returns_its_value():
    r = rng(2)
    kc, vc = randn(r, 2, 5, 8), randn(r, 2, 5, 8)
    q = randn(r, 4, 8)
    out = decode_ref(q, kc, vc, 1)
    np.testing.assert_allclose(out, vc[[0, 0, 1, 1], 0], rtol=1e-12)
