"""The int8 tensor-core prefill path (`path="mma"`, stdlib_kernels/qmma.py) on the CPU executor.

Results against x @ dequant(w).T in float64 (gguf-py's dequantisation), each element held to the
dp4a path's bound (tests/qmatmul_reference.py: the same quantised activations x̃, exact integer
sums, a few f32 roundings per 32 k) both against x and against x̃.  Shapes come from hypothesis,
with m, n and k crossing the 64 × 64 output tile and the 128-wide k tile in every way: partial
tiles at the edges of both grid dimensions, k tiles 1..4, Q8_0 rows whose last k tile is partial.
The matrix tests (test_stdlib_qmatmul*.py) add the path to their lists: fixed shapes, raw random
blocks, non-finite and extreme activations.  The static SASS bar is test_bench_mmq_sass.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pyptx
import qmatmul_reference as R
import stdlib_kernels as sk
from stdlib_kernels import qmatmul, qmma, quant as Q
from test_stdlib_qmatmul import poisoned, random_raw  # noqa: F401  (autouse: poisoned outputs)

FUNCS = {"q4_k": sk.q4k_matmul, "q6_k": sk.q6k_matmul, "q8_0": sk.q8_0_matmul}


@st.composite
def problems(draw):
    fmt = draw(st.sampled_from(sorted(FUNCS)))
    m = draw(st.integers(1, 80))
    n = draw(st.integers(1, 80))
    per = 256 if fmt != "q8_0" else 32
    k = per * draw(st.integers(1, 2 if fmt != "q8_0" else 13))
    return fmt, m, n, k, draw(st.booleans()), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problems())
def test_mma_matches_float64_on_any_shape(p):
    fmt, m, n, k, raw, seed = p
    rng = np.random.default_rng(seed)
    w = random_raw(rng, fmt, n, k) if raw else \
        Q.quantize(rng.standard_normal((n, k)).astype(np.float32), fmt)
    x = rng.standard_normal((m, k)).astype(np.float32)
    got = FUNCS[fmt](x, w, n, path="mma")
    assert got.shape == (m, n)
    R.check_result(got, x, w, fmt, "mma")


@pytest.mark.parametrize("fmt, m, n, k", [
    ("q4_k", 65, 66, 512),      # a second block in both grid dimensions, 4 k tiles
    ("q6_k", 70, 65, 512),
    ("q8_0", 66, 70, 416),      # 13 Q8_0 blocks: the fourth k tile holds one block
])
def test_mma_edges_of_every_tile(fmt, m, n, k):
    rng = np.random.default_rng(m * n + k)
    w = Q.quantize(rng.standard_normal((n, k)).astype(np.float32), fmt)
    x = rng.standard_normal((m, k)).astype(np.float32)
    R.check_result(FUNCS[fmt](x, w, n, path="mma"), x, w, fmt, "mma")


def test_mma_on_activations_that_quantise_exactly():
    """Q8_0 weights with scale 1 and integer activations whose block max is 127: x̃ = x (xd = 1,
    lo = 0) and every IMMA sum is exact, so only the f32 scaling rounds: per block
    fl(254·Ih + Il) (u: Q8_0 sums reach 2^27), fl(1/254) (u), their product (u), and the FFMA into
    the running sum (u relative to it, K/32 blocks): |err| ≤ (3 + K/32)·u·Σ|x||w|, first order."""
    rng = np.random.default_rng(3)
    n, k, m = 9, 96, 11
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    raw = np.zeros((n, k // 32, 34), np.uint8)
    raw[:, :, :2] = np.array([1.0], np.float16).view(np.uint8)
    raw[:, :, 2:] = q.reshape(n, k // 32, 32).view(np.uint8)
    x = rng.integers(-20, 21, (m, k)).astype(np.float32)
    x[:, ::32] = 127.0                  # every block's max|x| is 127: xd = 1, lo = 0
    got = sk.q8_0_matmul(x, raw.reshape(n, -1), n, path="mma")
    want = x.astype(np.float64) @ q.T.astype(np.float64)
    bound = (3 + k // 32) * R.U * (np.abs(x).astype(np.float64) @ np.abs(q.T).astype(np.float64))
    assert (np.abs(got - want) <= bound).all(), np.max(np.abs(got - want) / bound)


def test_auto_takes_mma_above_eight_rows(monkeypatch):
    seen = []
    real = qmma.qmma_kernel
    monkeypatch.setattr(qmma, "qmma_kernel", type("K", (), {
        "__getitem__": lambda self, cfg: (seen.append(cfg), real[cfg])[1]})())
    rng = np.random.default_rng(4)
    w = Q.quantize_q4_k(rng.standard_normal((5, 256)).astype(np.float32))
    sk.q4k_matmul(rng.standard_normal((8, 256)).astype(np.float32), w, 5)
    assert not seen                                      # m ≤ 8: dp4a
    sk.q4k_matmul(rng.standard_normal((9, 256)).astype(np.float32), w, 5)
    assert len(seen) == 1
    monkeypatch.setattr(qmatmul, "int8_tensor_cores", lambda: False)
    got = sk.q4k_matmul(rng.standard_normal((9, 256)).astype(np.float32), w, 5)
    assert len(seen) == 1 and got.shape == (9, 5)       # sm_75: tiled


@pytest.mark.parametrize("fmt", sorted(FUNCS))
def test_mma_kernel_uses_int8_tensor_cores(fmt):
    """The PTX holds the s8 mma (m16n8k32; Q6_K m16n8k16, a scale per 16 k) and 8-bit-tile
    ldmatrix, no f64; ptxas (sm_80, sm_90) accepts it without spills (test_stdlib_ptxas.py)."""
    ck = pyptx.compile(qmma.qmma_kernel, arch="sm_80",
                       constexprs={"FMT": getattr(qmma, fmt.upper())})
    shape = "m16n8k16" if fmt == "q6_k" else "m16n8k32"
    assert f"mma.sync.aligned.{shape}.row.col.s32.s8.s8.s32" in ck.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ck.ptx
    assert ".f64" not in ck.ptx
