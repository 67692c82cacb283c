"""PyTorch interop: `import pyptx.torch` registers every public stdlib function as
`torch.ops.pyptx.NAME`; each runs eagerly on CPU tensors (the CPU executor) against torch's own
reference, under `torch.library.opcheck` and inside `torch.compile(fullgraph=True)`.  Also: user
kernels on torch tensors, DLPack capsules consumed once, read-only arrays, errors naming the
argument, `stream=` objects with `.cuda_stream`, JAX/CuPy when installed (docs/interop.md).

Every tolerance is a bound on the error written next to its assert: about ten times the worst
error measured on these inputs, and of the size the float32 arithmetic explains."""
from __future__ import annotations

import ctypes
import inspect
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install "
                                            "'pyptx-dsl[torch]')")
F = torch.nn.functional

import pyptx  # noqa: E402
import pyptx.torch as pt  # noqa: E402
import stdlib_kernels as sk  # noqa: E402
from pyptx import f32  # noqa: E402
from stdlib_kernels import quant  # noqa: E402

P = torch.ops.pyptx


@pytest.fixture(autouse=True)
def cpu_device(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale


def err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest absolute difference (float64), shapes checked."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    return (got.double() - ref.double()).abs().max().item() if got.numel() else 0.0


# ---- the op table -------------------------------------------------------------------------------

def test_every_public_stdlib_function_is_an_op_with_its_signature():
    public = {n for n in sk.__all__ if not n.endswith("_kernel")}
    assert {op.name for op in pt.OPS} == public
    for op in pt.OPS:
        overload = getattr(P, op.name).default
        schema = overload._schema
        params = [p for p in inspect.signature(getattr(sk, op.name)).parameters.values()
                  if p.name != "out"]
        assert [a.name for a in schema.arguments] == [p.name for p in params], op.name
        for a, p in zip(schema.arguments, params):
            if p.default is not inspect.Parameter.empty:
                assert a.has_default_value() and a.default_value == p.default, (op.name, p.name)
        mutated = tuple(a.name for a in schema.arguments
                        if a.alias_info is not None and a.alias_info.is_write)
        assert mutated == op.mutates, op.name
        assert len(schema.returns) == (0 if op.mutates else 1), op.name
    assert not hasattr(P, "matmul")          # gguf.matmul takes a GGUFReader tensor: no op


# ---- each op eagerly against torch --------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(axis):
    x = randn(gen(1), 3, 5, 7, scale=3.0)
    got = P.softmax(x, axis)
    assert got.dtype == torch.float32
    # f32 exp/sum/divide of values in [0, 1]: about an ulp of 1 (measured 9e-8)
    assert err(got, torch.softmax(x.double(), axis)) < 1e-6


def test_rmsnorm():
    g = gen(2)
    x, w = randn(g, 3, 64), randn(g, 64)
    got = P.rmsnorm(x, w, 1e-5)
    ref = F.rms_norm(x.double(), (64,), w.double(), 1e-5)
    # |y| ≲ 3·|w| ≲ 10: a few ulps of f32 at that size (measured 3.1e-7)
    assert err(got, ref) < 3e-6


@pytest.mark.parametrize("affine", [True, False])
def test_layernorm(affine):
    g = gen(3)
    x, gamma, beta = randn(g, 2, 3, 48) + 2, randn(g, 48), randn(g, 48)
    got = P.layernorm(x, gamma, beta) if affine else P.layernorm(x, eps=1e-3)
    ref = (F.layer_norm(x.double(), (48,), gamma.double(), beta.double(), 1e-5) if affine
           else F.layer_norm(x.double(), (48,), eps=1e-3))
    assert err(got, ref) < 4e-6           # as rmsnorm (measured 4.3e-7)


def test_add():
    g = gen(4)
    a, b = randn(g, 5, 7), randn(g, 5, 7)
    assert torch.equal(P.add(a, b), a + b)    # one correctly rounded f32 add: exact


@pytest.mark.parametrize("variant", ["tiled", "naive"])
def test_gemm(variant):
    g = gen(5)
    a, b = randn(g, 5, 9), randn(g, 9, 6)
    got = P.gemm(a, b, variant)
    # f32 accumulation of k=9 products of |·| ≲ 3: (k+2)·2^-24·Σ|a||b| ≲ 1e-5 (measured
    # 4.0e-7)
    assert err(got, a.double() @ b.double()) < 4e-6


def test_swiglu():
    g = gen(6)
    gate, up = randn(g, 4, 33, scale=3.0), randn(g, 4, 33)
    got = P.swiglu(gate, up)
    ref = F.silu(gate.double()) * up.double()
    assert err(got, ref) < 6e-6           # f32 exp and divide: a few ulps (measured 6.1e-7)


def test_gate_up_swiglu():
    g = gen(7)
    x, wg, wu = randn(g, 3, 16), randn(g, 10, 16, scale=0.25), randn(g, 10, 16, scale=0.25)
    got = P.gate_up_swiglu(x, wg, wu)
    x64 = x.double()
    ref = F.silu(x64 @ wg.double().T) * (x64 @ wu.double().T)
    assert err(got, ref) < 1e-6           # two k=16 f32 dots, then SwiGLU (measured 1.1e-7)
    assert P.gate_up_swiglu(x[0], wg, wu).shape == (10,)


def rope_torch(x, positions, theta, layout):
    """RoPE in torch (float64): pair (a, b) of each head rotates by position · theta^(-2i/d)."""
    x = x.double()
    x3 = x if x.dim() == 3 else x[:, None, :]
    d = x3.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = positions.double()[:, None] * theta ** (-2.0 * i / d)
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    if layout == "neox":
        a, b = x3[..., :d // 2], x3[..., d // 2:]
        out = torch.cat([a * c - b * s, b * c + a * s], dim=-1)
    else:
        a, b = x3[..., 0::2], x3[..., 1::2]
        out = torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)
    return out.reshape(x.shape)


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_rope(layout):
    g = gen(8)
    x = randn(g, 4, 2, 16)
    pos = torch.tensor([0, 3, 17, 250])
    got = P.rope(x, pos, 10000.0, layout)
    # angles up to 250 rad in f32 (|error| ≲ 250·2^-24 per sin/cos argument) times |x| ≲ 4
    # (measured 6.0e-6)
    assert err(got, rope_torch(x, pos, 10000.0, layout)) < 6e-5
    assert err(P.rope(x[:, 0], pos, 500.0), rope_torch(x[:, 0], pos, 500.0, "neox")) < 6e-5


def attention_torch(q, k, v, causal=False, scale=None):
    """F.scaled_dot_product_attention in float64, GQA by repeating the KV heads; the causal
    mask aligned to the end (query i sees keys j <= i + seq_k - seq_q), as the stdlib's."""
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(rep, -3), v.repeat_interleave(rep, -3)
    mask = None
    if causal:
        sq, skv = q.shape[-2], k.shape[-2]
        mask = torch.ones(sq, skv, dtype=torch.bool).tril(skv - sq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_f32(causal):
    g = gen(9)
    q, k, v = randn(g, 2, 5, 16), randn(g, 1, 7, 16), randn(g, 1, 7, 16)
    got = P.flash_attention(q, k, v, causal)
    assert got.dtype == torch.float32
    # f32 scores, online softmax and weighted sum of |v| ≲ 3 (measured 2.0e-7)
    assert err(got, attention_torch(q, k, v, causal)) < 2e-6
    got = P.flash_attention(q[None], k[None], v[None], causal, scale=0.3)
    assert err(got, attention_torch(q[None], k[None], v[None], causal, 0.3)) < 2e-6


def test_flash_attention_bfloat16():
    g = gen(10)
    q, k, v = (randn(g, 1, 2, 16, 16).bfloat16() for _ in range(3))
    got = P.flash_attention(q, k, v, True)
    assert got.dtype == torch.bfloat16 and got.shape == q.shape
    # bf16 inputs exact in f64; f32 accumulation, P rounded to bf16 for the PV product and the
    # result rounded to bf16 (2^-8 relative of |out| ≲ 2): measured 4.5e-3
    assert err(got, attention_torch(q, k, v, True)) < 4e-2


def test_decode_attention():
    g = gen(11)
    q, kc, vc = randn(g, 4, 16), randn(g, 2, 12, 16), randn(g, 2, 12, 16)
    seq = 7
    got = P.decode_attention(q, kc, vc, seq)
    ref = attention_torch(q[:, None], kc[:, :seq], vc[:, :seq])[:, 0]
    assert err(got, ref) < 1e-6           # as flash_attention_f32 (measured 8.3e-8)
    assert err(P.decode_attention(q, kc, vc, seq, num_splits=2), ref) < 1e-6
    assert torch.equal(P.decode_attention(q, kc, vc, 0), torch.zeros_like(q))


def test_kv_scatter_updates_the_cache_in_place():
    g = gen(12)
    cache, src = randn(g, 2, 6, 8), randn(g, 16)
    want = cache.clone()
    want[:, 4] = src.reshape(2, 8)
    assert P.kv_scatter(src, cache, 4) is None
    assert torch.equal(cache, want)


def paged_setup(g, batch=2, n_heads=2, n_kv=1, hd=16, ps=4, max_pages=3, lens=(5, 12)):
    num_pages = batch * max_pages + 2
    kp, vp = randn(g, num_pages, n_kv, ps, hd), randn(g, num_pages, n_kv, ps, hd)
    bt = torch.randperm(num_pages, generator=g)[:batch * max_pages].reshape(batch, max_pages)
    q = randn(g, batch, n_heads, hd)
    return q, kp, vp, bt.to(torch.int32), torch.tensor(lens, dtype=torch.int32)


def paged_torch(q, kp, vp, bt, lens, scale=None):
    """Each sequence's keys gathered from its pages, then attention_torch."""
    ps = kp.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(q.shape[0]):
        t = torch.arange(int(lens[b]))
        page, row = bt[b, t // ps].long(), t % ps
        k, v = kp[page, :, row].transpose(0, 1), vp[page, :, row].transpose(0, 1)
        out[b] = attention_torch(q[b, :, None], k, v, scale=scale)[:, 0]
    return out


def test_paged_attention():
    q, kp, vp, bt, lens = paged_setup(gen(13))
    got = P.paged_attention(q, kp, vp, bt, lens)
    assert err(got, paged_torch(q, kp, vp, bt, lens)) < 4e-6     # as decode (measured 4e-7)
    got = P.paged_attention(q, kp, vp, bt, lens, 0.5)
    assert err(got, paged_torch(q, kp, vp, bt, lens, 0.5)) < 4e-6


def test_paged_kv_scatter_updates_the_pages_in_place():
    g = gen(14)
    kp, vp = randn(g, 3, 2, 4, 8), randn(g, 3, 2, 4, 8)
    k, v = randn(g, 2, 2, 8), randn(g, 2, 2, 8)
    slots = torch.tensor([5, 10], dtype=torch.int32)
    want_k, want_v = kp.clone(), vp.clone()
    for t, s in enumerate(slots.tolist()):
        want_k[s // 4, :, s % 4], want_v[s // 4, :, s % 4] = k[t], v[t]
    assert P.paged_kv_scatter(k, v, kp, vp, slots) is None
    assert torch.equal(kp, want_k) and torch.equal(vp, want_v)


def quantized(g, fmt, n, k):
    """A float weight [n, k] quantised to GGUF `fmt` bytes (uint8 tensor) and its exact
    dequantised float64 values (numpy's dequantiser)."""
    w = quant.quantize(randn(g, n, k, scale=0.5).numpy(), fmt)
    return torch.from_numpy(w), torch.from_numpy(quant.dequantize(w, fmt)).double()


QMATMUL = [("q4_k", "q4k_matmul", 256), ("q6_k", "q6k_matmul", 256),
           ("q8_0", "q8_0_matmul", 64)]


@pytest.mark.parametrize("fmt,name,k", QMATMUL, ids=[q[1] for q in QMATMUL])
@pytest.mark.parametrize("path", ["auto", "f32", "tiled"])
def test_quantized_matmuls(fmt, name, k, path):
    g = gen(15)
    w, wd = quantized(g, fmt, 6, k)
    x = randn(g, 2, k)
    got = getattr(P, name)(x, w, 6, path)
    ref = x.double() @ wd.T
    # f32 / tiled: f32 accumulation over k ≤ 256 of |x·w| ≲ 1 (measured 1.0e-5); the dp4a
    # path ("auto" at 2 rows) quantises x to int8 + an int8 residual per 32 (≈ 2^-15 of the
    # block's max|x| per element, times Σ|w| ≈ 60): measured 3.1e-4
    assert err(got, ref) < (3e-3 if path == "auto" else 1e-4)
    assert getattr(P, name)(x[1], w, 6, path).shape == (6,)


def test_q4k_gate_up_swiglu():
    g = gen(16)
    (wg, wgd), (wu, wud) = quantized(g, "q4_k", 5, 256), quantized(g, "q4_k", 5, 256)
    x = randn(g, 3, 256)
    got = P.q4k_gate_up_swiglu(x, wg, wu, 5)
    x64 = x.double()
    ref = F.silu(x64 @ wgd.T) * (x64 @ wud.T)
    # the f32 GEMV path, then SwiGLU of gate·up products up to ~60 (f32 relative ~1e-6 of
    # that): measured 1.5e-4
    assert err(got, ref) < 1.5e-3


# ---- torch.library checks and torch.compile ------------------------------------------------------

def test_opcheck():
    """Schema, fake (meta) implementation, autograd registration and AOT dispatch."""
    g = gen(17)
    x = randn(g, 3, 64)
    w, _ = quantized(g, "q4_k", 4, 256)
    cases = [
        (P.softmax.default, (x,), {"axis": 0}),
        (P.rmsnorm.default, (x, randn(g, 64)), {"eps": 1e-5}),
        (P.q4k_matmul.default, (randn(g, 2, 256), w, 4), {}),
        (P.flash_attention.default, (randn(g, 2, 5, 16), randn(g, 1, 7, 16),
                                     randn(g, 1, 7, 16)), {"causal": True}),
        (P.kv_scatter.default, (randn(g, 16), randn(g, 2, 6, 8), 3), {}),
    ]
    for op, args, kwargs in cases:
        res = torch.library.opcheck(op, args, kwargs)
        assert set(res.values()) == {"SUCCESS"}, (op, res)


def test_torch_compile_fullgraph_matches_eager():
    """rmsnorm → q4k_matmul → softmax with torch ops between them, compiled by inductor with
    fullgraph=True (a graph break would raise): the pyptx ops stay opaque calls."""
    g = gen(18)
    x, nw = randn(g, 4, 256), randn(g, 256).abs() + 0.5
    w, _ = quantized(g, "q4_k", 32, 256)

    def block(x, nw, w):
        h = P.rmsnorm(x * 2.0, nw, 1e-6)
        logits = P.q4k_matmul(h, w, 32)
        return P.softmax(logits / 4.0 + 1.0, -1)

    compiled = torch.compile(block, fullgraph=True)
    got, want = compiled(x, nw, w), block(x, nw, w)
    assert got.shape == (4, 32) and got.dtype == torch.float32
    # the pyptx kernels are the same in both; only torch's scaling around them may differ by an
    # ulp of f32 after inductor's fusion
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


# ---- tensors straight into stdlib functions and user kernels -------------------------------------

@pyptx.kernel
def double_in_place(x: f32[:]):
    i = pyptx.grid(1)
    if i < len(x):
        x[i] = x[i] * 2.0


def test_user_kernel_writes_a_torch_tensor_in_place():
    t = torch.arange(10, dtype=torch.float32)
    view = t[2:8]                      # a contiguous view: the kernel sees its storage
    double_in_place[1, 32](view)
    assert t.tolist() == [0, 1, 4, 6, 8, 10, 12, 14, 8, 9]


def test_user_kernel_takes_a_stream_object_with_cuda_stream():
    """`stream=torch.cuda.current_stream()`-like objects: pyptx reads `.cuda_stream` (on the
    CPU executor the handle is checked and the launch runs in order)."""
    t = torch.ones(8)
    double_in_place[1, 8](t, stream=types.SimpleNamespace(cuda_stream=0))
    assert t.tolist() == [2.0] * 8
    with pytest.raises(pyptx.LaunchError, match="stream"):
        double_in_place[1, 8](t, stream=types.SimpleNamespace(cuda_stream="0"))


def test_stream_object_reaches_the_driver_launch(monkeypatch):
    """On the GPU path (fake driver) the launch goes to the stream `.cuda_stream` names."""
    from fake_driver import FakeDriver, on_fake_gpu
    from pyptx.runtime import driver, streams
    gen_fake = on_fake_gpu(monkeypatch, FakeDriver())
    fake = next(gen_fake)
    try:
        s = streams.Stream()
        handle = driver.handle_int(s.handle)
        x = pyptx.to_device(np.ones(8, np.float32))
        double_in_place[1, 8](x, stream=types.SimpleNamespace(cuda_stream=handle))
        assert fake.launches[-1].stream == handle
        s.synchronize()
        np.testing.assert_array_equal(x.copy_to_host(), np.full(8, 2, np.float32))
    finally:
        gen_fake.close()


def test_direct_calls_return_torch_and_fill_out():
    g = gen(19)
    x, w = randn(g, 3, 64), randn(g, 64)
    y = sk.rmsnorm(x, w)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    out = torch.empty(3, 64)
    assert sk.rmsnorm(x, w, out=out) is out and torch.equal(out, y)
    assert torch.equal(P.rmsnorm(x, w), y)


def test_ops_on_cpu_tensors_run_on_the_executor_even_with_a_gpu(monkeypatch):
    """torch.ops.pyptx on CPU tensors never launch on the GPU (the fake driver sees none), while
    a direct numpy call follows pyptx.device()."""
    from fake_driver import FakeDriver, on_fake_gpu
    gen_fake = on_fake_gpu(monkeypatch, FakeDriver())
    fake = next(gen_fake)
    try:
        x = randn(gen(20), 4, 8)
        assert err(P.softmax(x), torch.softmax(x.double(), -1)) < 1e-6
        assert fake.count("cuLaunchKernel") == 0
        sk.softmax(x.numpy())
        assert fake.count("cuLaunchKernel") == 1
    finally:
        gen_fake.close()


class Counting:
    """A DLPack producer (a torch tensor behind it) that counts its exports and keeps each
    capsule, so a test can see the consumer used every capsule it asked for."""

    def __init__(self, t):
        self.t, self.calls, self.capsules = t, 0, []

    def __dlpack__(self, **kw):
        self.calls += 1
        cap = self.t.__dlpack__(**kw)
        self.capsules.append(cap)
        return cap

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def capsule_name(cap) -> bytes:
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(cap)


def test_dlpack_capsules_are_consumed_exactly_once():
    g = gen(21)
    x, out = Counting(randn(g, 3, 5)), Counting(torch.empty(3, 5))
    res = sk.softmax(x, out=out)
    assert res is out                       # out= comes back as the caller's own object
    assert x.calls == 1 and out.calls == 1
    for c in x.capsules + out.capsules:
        assert capsule_name(c).startswith(b"used_"), capsule_name(c)
    assert err(out.t, torch.softmax(x.t.double(), -1)) < 1e-6
    y = sk.softmax(Counting(x.t))
    assert isinstance(y, np.ndarray)        # an unknown producer's host memory: numpy back


class ReadOnly:
    """A read-only numpy array exported over DLPack (v1's read-only flag)."""

    def __init__(self, a):
        self.a = a
        self.a.flags.writeable = False

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_read_only_inputs_are_accepted_and_a_read_only_out_refused():
    x = randn(gen(22), 3, 5).numpy()
    got = sk.softmax(ReadOnly(x.copy()))
    np.testing.assert_array_equal(got, sk.softmax(x))
    ro = x.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(sk.softmax(ro), sk.softmax(x))
    with pytest.raises(ValueError, match="out is read-only"):
        sk.softmax(x, out=ro)
    with pytest.raises(ValueError, match="out is read-only"):
        sk.softmax(torch.from_numpy(x), out=ReadOnly(np.empty_like(x)))


def test_errors_name_the_argument():
    g = gen(23)
    x, w = randn(g, 3, 64), randn(g, 64)
    with pytest.raises(TypeError, match="rmsnorm: x must be float32, got float64"):
        P.rmsnorm(x.double(), w)
    with pytest.raises(TypeError, match="rmsnorm: weight must be float32"):
        P.rmsnorm(x, w.half())
    with pytest.raises(ValueError, match="rmsnorm: weight must have shape"):
        P.rmsnorm(x, w[:10])
    with pytest.raises(ValueError, match="gemm: a must be 2-d"):
        P.gemm(x[0], x.T)                   # the fake's shape cannot be computed: stdlib's error
    with pytest.raises(TypeError, match="q4k_matmul: w must be uint8"):
        P.q4k_matmul(randn(g, 1, 256), torch.zeros(4, 144, dtype=torch.int8), 4)
    with pytest.raises(TypeError, match="rmsnorm: out must have dtype float32"):
        sk.rmsnorm(x, w, out=torch.empty(3, 64, dtype=torch.float64))
    with pytest.raises(ValueError, match="x is a .* in GPU memory"):
        sk.softmax(OnDevice(x, 2))          # kDLCUDA while launches run on the executor
    with pytest.raises(TypeError, match="x is a OnDevice on a device pyptx cannot address"):
        sk.softmax(OnDevice(x, 14))         # kDLOneAPI


class OnDevice:
    """A DLPack producer claiming device type `dev` (no data is ever read)."""

    def __init__(self, t, dev):
        self.t, self.dev = t, dev

    def __dlpack__(self, **kw):
        raise AssertionError("exported a tensor on an unaddressable device")

    def __dlpack_device__(self):
        return (self.dev, 0)


def test_requires_grad_inputs():
    """custom ops get detached tensors (DLPack refuses ones that require grad); the direct call
    names the argument."""
    x = randn(gen(24), 2, 8).requires_grad_()
    assert err(P.softmax(x), torch.softmax(x.detach().double(), -1)) < 1e-6
    with pytest.raises(TypeError, match="softmax: x: could not read this Tensor"):
        sk.softmax(x)


# ---- other frameworks (not installed here: skipped with the reason) ------------------------------


def test_cupy_arrays_in_cupy_arrays_out(monkeypatch):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("CuPy has no GPU")
    except pytest.skip.Exception:
        raise
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"CuPy has no GPU ({e})")
    monkeypatch.setenv("PYPTX_DEVICE", "auto")
    if pyptx.device() != "gpu":
        pytest.skip("pyptx launches run on the CPU executor")
    x = cupy.asarray(randn(gen(26), 3, 8).numpy())
    y = sk.softmax(x)
    assert isinstance(y, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(y), sk.softmax(cupy.asnumpy(x)), rtol=1e-6,
                               atol=1e-7)


# ---- docs/interop.md's runnable snippets ------------------------------------------------------

def interop_snippets():
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "interop.md").read_text()
    return re.findall(r"^```python\n(# run\n.*?)^```", text, re.S | re.M)


@pytest.mark.parametrize("code", interop_snippets())
def test_interop_doc_snippet_runs(code, tmp_path):
    import runpy
    path = tmp_path / "snippet.py"
    path.write_text(code)
    runpy.run_path(str(path), run_name="__main__")
