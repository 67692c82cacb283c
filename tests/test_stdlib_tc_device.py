"""gemm (every variant, the tensor-core one included) and flash_attention (f32 SIMT, f16/bf16
tensor cores, the wide head_dim kernel) on every kind of array: DeviceArrays give the same bits as
numpy and stay DeviceArrays, `out=` (host and device, checked), torch CPU tensors in -> torch out
(against torch's own matmul / scaled_dot_product_attention, within the error bounds of
test_stdlib_gemm_tc / test_stdlib_flash_attention), and inside a `pyptx.graph()` on the fake GPU
with DeviceArray arguments: captured, replayed, equal to eager.  A negative scale on the device
flips q's sign bits with a kernel (not on the host)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from pyptx.runtime.device_array import DeviceArray

from test_capture_rules import _host, fake  # noqa: F401  (fixture: the fake GPU with graph capture)
from test_stdlib_flash_attention import assert_within_bound, error_bound
from test_stdlib_gemm_tc import assert_gemm_close, gemm_bound
from test_tensorcore import assert_mma_close

rng = np.random.default_rng(9090)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bits(x):
    """The bits of a result (numpy or DeviceArray), for exact comparisons (NaN-safe)."""
    x = x.copy_to_host() if isinstance(x, DeviceArray) else np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def _same_bits(a, b):
    np.testing.assert_array_equal(_bits(a), _bits(b))


# ---- gemm ----------------------------------------------------------------------------------------

#: (variant, input dtype)
GEMM_KINDS = [("naive", np.float32), ("tiled", np.float32), ("tensor_core", np.float16),
              ("tensor_core", BF16)]
GEMM_IDS = ["naive", "tiled", "tc-f16", "tc-bf16"]


def _mats(m, k, n, dtype):
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype))


def _check_gemm(c, a, b, variant):
    if variant == "tensor_core":
        assert_gemm_close(c, a.astype(np.float64), b.astype(np.float64))
    else:       # the f32 kernels: the test_stdlib_gemm tolerance
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("variant, dtype", GEMM_KINDS, ids=GEMM_IDS)
@pytest.mark.parametrize("m, k, n", [(37, 41, 29), (16, 32, 24)])
def test_gemm_device_arrays_give_numpy_bits(cpu, variant, dtype, m, k, n):
    a, b = _mats(m, k, n, dtype)
    want = sk.gemm(a, b, variant)
    got = sk.gemm(pyptx.to_device(a), pyptx.to_device(b), variant)
    assert isinstance(got, DeviceArray) and got.dtype == np.float32 and got.shape == (m, n)
    _same_bits(got, want)
    _check_gemm(want, a, b, variant)


def test_gemm_tensor_core_one_mma_per_output(cpu):
    """k = 16: each output is one m16n8k16 mma with c = 0, so assert_mma_close's bound holds."""
    a, b = _mats(20, 16, 12, np.float16)
    got = sk.gemm(pyptx.to_device(a), pyptx.to_device(b), variant="tensor_core").copy_to_host()
    assert_mma_close(got, a.astype(np.float64), b.astype(np.float64), np.zeros((20, 12)))


@pytest.mark.parametrize("variant, dtype", GEMM_KINDS, ids=GEMM_IDS)
def test_gemm_empty_on_the_device(cpu, variant, dtype):
    for (m, k, n) in ((3, 0, 5), (0, 4, 5)):
        a, b = _mats(m, k, n, dtype)
        got = sk.gemm(pyptx.to_device(a), pyptx.to_device(b), variant)
        assert isinstance(got, DeviceArray) and got.shape == (m, n)
        np.testing.assert_array_equal(got.copy_to_host(), np.zeros((m, n), np.float32))


@pytest.mark.parametrize("variant, dtype", GEMM_KINDS, ids=GEMM_IDS)
def test_gemm_out(cpu, variant, dtype):
    a, b = _mats(19, 24, 21, dtype)
    want = sk.gemm(a, b, variant)
    out = np.full((19, 21), np.nan, np.float32)
    assert sk.gemm(a, b, variant, out=out) is out
    _same_bits(out, want)
    a_d, b_d = pyptx.to_device(a), pyptx.to_device(b)
    out_d = pyptx.to_device(np.full((19, 21), np.nan, np.float32))
    assert sk.gemm(a_d, b_d, variant, out=out_d) is out_d
    _same_bits(out_d, want)
    with pytest.raises(ValueError, match="gemm: out must have shape"):
        sk.gemm(a, b, variant, out=np.empty((21, 19), np.float32))
    with pytest.raises(TypeError, match="gemm: out must have dtype float32"):
        sk.gemm(a, b, variant, out=np.empty((19, 21), np.float64))
    with pytest.raises(TypeError, match="gemm: out must have dtype float32"):
        sk.gemm(a_d, b_d, variant, out=pyptx.to_device(np.empty((19, 21), np.float16)))
    with pytest.raises(ValueError, match="gemm: out is a host array"):
        sk.gemm(a_d, b_d, variant, out=np.empty((19, 21), np.float32))
    with pytest.raises(ValueError, match="gemm: out is a DeviceArray"):
        sk.gemm(a, b, variant, out=out_d)


@pytest.mark.parametrize("variant, dtype", GEMM_KINDS, ids=GEMM_IDS)
def test_gemm_host_and_device_inputs_do_not_mix(cpu, variant, dtype):
    a, b = _mats(4, 8, 4, dtype)
    with pytest.raises(ValueError, match="gemm: b is a host array but a is a DeviceArray"):
        sk.gemm(pyptx.to_device(a), b, variant)


def test_gemm_refuses_uint16_bits_with_the_fix():
    a = np.zeros((4, 4), np.uint16)
    for x, y, name in ((a, a.view(np.float16), "a"), (a.view(np.float16), a, "b")):
        with pytest.raises(TypeError, match=rf"gemm: {name} .*got uint16.*ml_dtypes\.bfloat16"):
            sk.gemm(x, y, "tensor_core")
    with pytest.raises(TypeError, match="ml_dtypes.bfloat16"):
        sk.gemm(pyptx.to_device(a), pyptx.to_device(a), "tensor_core")


@pytest.mark.parametrize("variant, dtype", GEMM_KINDS, ids=GEMM_IDS)
def test_gemm_torch_in_torch_out(cpu, variant, dtype):
    """torch in -> torch out, against torch.matmul in float32 of the same (f16/bf16) values.
    Both are within a bound of the exact product: ours `gemm_bound` (tensor core; for the f32
    kernels the same first-order bound of an in-order f32 sum, k·2^-24·Σ|a||b|), torch's an
    f32 sum of k exact products in some order, at most k·2^-24·Σ|a||b| (first order: the
    products of f16/bf16 or of f32 values that came from them are exact in float64, and torch
    sums f32 products, each rounded by at most 2^-24 relative, then k - 1 additions).  So
    |ours − torch| ≤ ours' bound + torch's, per element."""
    torch = pytest.importorskip("torch")
    tdt = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
           BF16: torch.bfloat16}[np.dtype(dtype)]
    m, k, n = 33, 40, 18
    a = torch.randn(m, k, dtype=torch.float32).to(tdt)
    b = torch.randn(k, n, dtype=torch.float32).to(tdt)
    got = sk.gemm(a, b, variant)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert tuple(got.shape) == (m, n) and got.device.type == "cpu"
    want = torch.matmul(a.float(), b.float())
    a64, b64 = a.double().numpy(), b.double().numpy()
    prod = np.abs(a64) @ np.abs(b64)
    ours = gemm_bound(a64, b64)[1] if variant == "tensor_core" else k * 2.0**-24 * prod
    bound = ours + k * 2.0**-24 * prod
    err = np.abs(got.double().numpy() - want.double().numpy())
    assert (err <= bound).all(), err.max()
    out = torch.empty(m, n, dtype=torch.float32)
    assert sk.gemm(a, b, variant, out=out) is out
    assert torch.equal(out, got)


# ---- flash_attention -------------------------------------------------------------------------------

DT = {"f32": np.float32, "f16": np.float16, "bf16": BF16}
#: (q shape, kv shape, causal)
FLASH_CASES = [
    ((2, 24, 64), (2, 24, 64), False),
    ((4, 20, 64), (2, 33, 64), True),           # GQA, seq_q < seq_k (end-aligned mask)
    ((1, 2, 17, 192), (1, 1, 17, 192), True),   # batch + GQA, the wide kernel for f16/bf16
]
FLASH_IDS = ["d64", "gqa-causal", "wide192"]


def _qkv(qs, kvs, kind):
    return tuple(rng.standard_normal(s).astype(DT[kind]) for s in (qs, kvs, kvs))


@pytest.mark.parametrize("kind", sorted(DT))
@pytest.mark.parametrize("qs, kvs, causal", FLASH_CASES, ids=FLASH_IDS)
def test_flash_device_arrays_give_numpy_bits(cpu, kind, qs, kvs, causal):
    q, k, v = _qkv(qs, kvs, kind)
    want = sk.flash_attention(q, k, v, causal)
    assert want.dtype == DT[kind] and want.shape == qs
    got = sk.flash_attention(*(pyptx.to_device(x) for x in (q, k, v)), causal)
    assert isinstance(got, DeviceArray) and got.dtype == DT[kind] and got.shape == qs
    _same_bits(got, want)
    assert_within_bound(want.astype(np.float64), q, k, v, causal, kind=kind)


@pytest.mark.parametrize("kind", sorted(DT))
@pytest.mark.parametrize("d", [64, 192])
def test_flash_negative_scale_on_the_device(cpu, kind, d):
    """The tensor-core kernels need scale > 0: a negative one runs with -q, flipped by a kernel
    into a scratch array for a DeviceArray q (q itself unchanged), the host XOR for numpy q;
    both give the same bits, within the bound for that scale."""
    q, k, v = _qkv((2, 21, d), (1, 30, d), kind)
    for causal in (False, True):
        want = sk.flash_attention(q, k, v, causal, -0.4)
        q_d = pyptx.to_device(q)
        got = sk.flash_attention(q_d, pyptx.to_device(k), pyptx.to_device(v), causal, -0.4)
        _same_bits(got, want)
        _same_bits(q_d, q)
        assert_within_bound(want.astype(np.float64), q, k, v, causal, -0.4, kind)


@pytest.mark.parametrize("kind", sorted(DT))
def test_flash_out(cpu, kind):
    qs, kvs = (2, 2, 18, 64), (2, 1, 26, 64)
    q, k, v = _qkv(qs, kvs, kind)
    want = sk.flash_attention(q, k, v, True)
    out = np.full(qs, np.nan, DT[kind])
    assert sk.flash_attention(q, k, v, True, out=out) is out
    _same_bits(out, want)
    dev = [pyptx.to_device(x) for x in (q, k, v)]
    out_d = pyptx.to_device(np.full(qs, np.nan, DT[kind]))
    assert sk.flash_attention(*dev, causal=True, out=out_d) is out_d
    _same_bits(out_d, want)
    other = np.float16 if kind != "f16" else np.float32
    with pytest.raises(ValueError, match="flash_attention: out must have shape"):
        sk.flash_attention(q, k, v, out=np.empty((4, 18, 64), DT[kind]))
    with pytest.raises(TypeError, match="flash_attention: out must have dtype"):
        sk.flash_attention(q, k, v, out=np.empty(qs, other))
    with pytest.raises(TypeError, match="flash_attention: out must have dtype"):
        sk.flash_attention(*dev, out=pyptx.to_device(np.empty(qs, other)))
    with pytest.raises(ValueError, match="flash_attention: out is a host array"):
        sk.flash_attention(*dev, out=np.empty(qs, DT[kind]))


def test_flash_validation_names_the_argument(cpu):
    q, k, v = _qkv((2, 8, 64), (2, 8, 64), "f16")
    with pytest.raises(ValueError, match="flash_attention: k is a host array but q is a "
                                         "DeviceArray"):
        sk.flash_attention(pyptx.to_device(q), k, v)
    with pytest.raises(TypeError, match=r"flash_attention: q .*got uint16.*ml_dtypes\.bfloat16"):
        sk.flash_attention(q.view(np.uint16), k, v)
    with pytest.raises(TypeError, match=r"flash_attention: k .*got uint16.*ml_dtypes"):
        sk.flash_attention(pyptx.to_device(q),
                           *(pyptx.to_device(x.view(np.uint16)) for x in (k, v)))
    with pytest.raises(ValueError, match="head_dim must be a multiple of 16"):
        sk.flash_attention(*(pyptx.to_device(x[..., :40]) for x in (q, k, v)))


@pytest.mark.parametrize("kind", sorted(DT))
@pytest.mark.parametrize("qs, kvs, causal", [((2, 24, 64), (2, 24, 64), True),
                                             ((4, 20, 64), (2, 20, 64), False),
                                             ((1, 2, 17, 192), (1, 1, 17, 192), True)],
                         ids=["causal", "gqa", "wide192"])
def test_flash_torch_in_torch_out(cpu, kind, qs, kvs, causal):
    """torch tensors in -> a torch tensor of q's dtype out, against torch's
    scaled_dot_product_attention in float64 (seq_q == seq_k: torch's causal mask is aligned
    to the start, ours to the end, the same here).  Tolerance: `error_bound`, the analysis
    behind every attention test (derived for the exact result; float64 SDPA is off from that
    by ~1e-15 relative, covered by the 1e-12 added); the bound's own reference agrees with
    SDPA to 1e-12."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[kind]
    q, k, v = (torch.randn(*s, dtype=torch.float32).to(tdt) for s in (qs, kvs, kvs))
    got = sk.flash_attention(q, k, v, causal)
    assert isinstance(got, torch.Tensor) and got.dtype == tdt and tuple(got.shape) == qs
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                          is_causal=causal, enable_gqa=True).numpy()
    q64, k64, v64 = (x.double().numpy() for x in (q, k, v))
    ref, bound = error_bound(q64, k64, v64, causal, kind=kind)
    np.testing.assert_allclose(ref, want, rtol=0, atol=1e-12)
    err = np.abs(got.double().numpy() - want)
    assert (err <= bound + 1e-12).all(), (err / bound).max()
    out = torch.empty(*qs, dtype=tdt)
    assert sk.flash_attention(q, k, v, causal, out=out) is out
    assert torch.equal(out.view(torch.int16 if kind != "f32" else torch.int32),
                       got.view(torch.int16 if kind != "f32" else torch.int32))


# ---- inside a graph on the fake GPU -----------------------------------------------------------------

def _graph_cases():
    r = np.random.default_rng(31)
    mat = lambda dt, *s: r.standard_normal(s).astype(dt)  # noqa: E731
    f32, f16 = np.float32, np.float16
    return {
        "gemm-naive": (lambda a, b: sk.gemm(a, b, "naive"), (mat(f32, 19, 24), mat(f32, 24, 21))),
        "gemm-tiled": (lambda a, b: sk.gemm(a, b), (mat(f32, 70, 24), mat(f32, 24, 20))),
        "gemm-tc-f16": (lambda a, b: sk.gemm(a, b, "tensor_core"),
                        (mat(f16, 37, 40), mat(f16, 40, 22))),
        "gemm-tc-bf16": (lambda a, b: sk.gemm(a, b, "tensor_core"),
                         (mat(BF16, 20, 33), mat(BF16, 33, 9))),
        "gemm-tc-k0": (lambda a, b: sk.gemm(a, b, "tensor_core"),
                       (mat(f16, 5, 0), mat(f16, 0, 7))),
        "flash-f32": (lambda q, k, v: sk.flash_attention(q, k, v, True),
                      (mat(f32, 4, 9, 40), mat(f32, 2, 13, 40), mat(f32, 2, 13, 40))),
        "flash-f16-gqa-causal": (lambda q, k, v: sk.flash_attention(q, k, v, True),
                                 (mat(f16, 4, 20, 64), mat(f16, 2, 33, 64),
                                  mat(f16, 2, 33, 64))),
        "flash-bf16-negative-scale": (lambda q, k, v: sk.flash_attention(q, k, v, False, -0.3),
                                      (mat(BF16, 2, 18, 64), mat(BF16, 2, 25, 64),
                                       mat(BF16, 2, 25, 64))),
        "flash-f16-wide192": (lambda q, k, v: sk.flash_attention(q, k, v, True),
                              (mat(f16, 1, 2, 17, 192), mat(f16, 1, 1, 17, 192),
                               mat(f16, 1, 1, 17, 192))),
    }


@pytest.mark.parametrize("name", sorted(_graph_cases()))
def test_graph_on_the_fake_gpu_replays_the_eager_result(fake, name):  # noqa: F811
    """DeviceArray arguments: eager == captured-then-replayed == the numpy path (the fake runs
    the PTX through the executor), no capture rule broken; the inputs are left unchanged."""
    fn, args = _graph_cases()[name]
    want = fn(*args)
    eager_in = [pyptx.to_device(a) for a in args]
    eager = fn(*eager_in)
    assert isinstance(eager, DeviceArray)
    _same_bits(eager, want)
    cap_in = [pyptx.to_device(a) for a in args]
    with pyptx.graph() as g:
        out = fn(*cap_in)
    g.launch()
    assert fake.violations == []
    assert isinstance(out, DeviceArray)
    _same_bits(_host(out), want)
    for a, orig in zip(cap_in, args):
        _same_bits(a, orig)


def test_graph_writes_into_a_device_out(fake):  # noqa: F811
    """out= inside a capture: the replay writes the caller's DeviceArrays, and new inputs
    copied into the captured arrays between replays give new results."""
    r = np.random.default_rng(8)
    q, k, v = (r.standard_normal(s).astype(np.float16) for s in ((2, 16, 64), (2, 16, 64),
                                                                  (2, 16, 64)))
    a, b = r.standard_normal((16, 32)).astype(np.float16), r.standard_normal((32, 8)).astype(
        np.float16)
    dq, dk, dv, da, db = (pyptx.to_device(x) for x in (q, k, v, a, b))
    o_att = pyptx.to_device(np.zeros(q.shape, np.float16))
    o_mm = pyptx.to_device(np.zeros((16, 8), np.float32))
    with pyptx.graph() as g:
        assert sk.flash_attention(dq, dk, dv, True, -1.0, out=o_att) is o_att
        assert sk.gemm(da, db, "tensor_core", out=o_mm) is o_mm
    for step in range(2):
        if step:
            q, a = -q[:, ::-1].copy(), a[::-1].copy()
            dq.copy_from_host(q)
            da.copy_from_host(a)
        g.launch()
        _same_bits(o_att, sk.flash_attention(q, k, v, True, -1.0))
        _same_bits(o_mm, sk.gemm(a, b, "tensor_core"))
    assert fake.violations == []
