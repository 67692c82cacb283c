"""One test matrix for every public stdlib function: numpy, DeviceArray and torch CPU inputs, with
and without `out=`, and inside `pyptx.graph()` with device-resident arguments.

The kernels and the executor are the same whatever the caller's array kind, so every cell must
give the numpy call's result *bit for bit* (the array layer converts without copies or dtype
changes); correctness against independent references lives in each function's own test file.
A cell that converted through float64, copied a strided view wrongly or returned the wrong kind
fails here.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import quant

from fake_driver import on_fake_gpu
from fake_graph import GraphFakeDriver

torch = pytest.importorskip("torch", reason="torch is a test extra (pip install torch==2.13.0)")


def _cases():
    """name -> (call(*arrays, **kw), numpy arrays, indices of arrays mutated in place, takes out=)"""
    r = np.random.default_rng(22)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    h = lambda *s, dt=np.float16: (r.standard_normal(s) * 0.5).astype(dt)  # noqa: E731
    w4, w6, w8 = (quant.quantize(f(32, 256), t) for t in ("q4_k", "q6_k", "q8_0"))
    pages = f(3, 2, 4, 16)
    table = np.array([[1, 2, 0]], np.int32)
    return {
        "softmax": (sk.softmax, (f(3, 40),), (), True),
        "rmsnorm": (sk.rmsnorm, (f(3, 64), f(64)), (), True),
        "layernorm": (sk.layernorm, (f(3, 64), f(64), f(64)), (), True),
        "add": (sk.add, (f(70), f(70)), (), True),
        "gemm_naive": (lambda a, b, **kw: sk.gemm(a, b, "naive", **kw), (f(5, 7), f(7, 6)), (),
                       True),
        "gemm_tiled": (sk.gemm, (f(33, 20), f(20, 9)), (), True),
        "gemm_tensor_core": (lambda a, b, **kw: sk.gemm(a, b, "tensor_core", **kw),
                             (h(16, 32), h(32, 16)), (), True),
        "gemm_tensor_core_bf16": (lambda a, b, **kw: sk.gemm(a, b, "tensor_core", **kw),
                                  (h(16, 32, dt=ml_dtypes.bfloat16),
                                   h(32, 16, dt=ml_dtypes.bfloat16)), (), True),
        "gemm_wgmma": (lambda a, b, **kw: sk.gemm(a, b, "wgmma", **kw),
                       (h(16, 64, dt=ml_dtypes.bfloat16), h(64, 24, dt=ml_dtypes.bfloat16)), (),
                       True),
        "flash_attention_f32": (sk.flash_attention, (f(2, 5, 32), f(1, 7, 32), f(1, 7, 32)), (),
                                True),
        "flash_attention_f16": (lambda q, k, v, **kw: sk.flash_attention(q, k, v, causal=True,
                                                                         **kw),
                                (h(2, 16, 64), h(2, 16, 64), h(2, 16, 64)), (), True),
        "flash_attention_bf16": (sk.flash_attention,
                                 tuple(h(1, 16, 64, dt=ml_dtypes.bfloat16) for _ in range(3)),
                                 (), True),
        "decode_attention": (lambda q, k, v, **kw: sk.decode_attention(q, k, v, 5, **kw),
                             (f(4, 32), f(2, 8, 32), f(2, 8, 32)), (), True),
        "kv_scatter": (lambda s, c: sk.kv_scatter(s, c, 3), (f(2 * 16), f(2, 8, 16)), (1,),
                       False),
        "rope": (sk.rope, (f(2, 2, 64), np.array([3, 9], np.int32)), (), True),
        "swiglu": (sk.swiglu, (f(3, 50), f(3, 50)), (), True),
        "gate_up_swiglu": (sk.gate_up_swiglu, (f(2, 24), f(10, 24), f(10, 24)), (), True),
        "q4k_matmul": (lambda x, w, **kw: sk.q4k_matmul(x, w, 32, **kw), (f(1, 256), w4), (),
                       True),
        "q6k_matmul": (lambda x, w, **kw: sk.q6k_matmul(x, w, 32, **kw), (f(2, 256), w6), (),
                       True),
        "q8_0_matmul": (lambda x, w, **kw: sk.q8_0_matmul(x, w, 32, **kw), (f(1, 256), w8), (),
                        True),
        "q4k_gate_up_swiglu": (lambda x, g, u, **kw: sk.q4k_gate_up_swiglu(x, g, u, 32, **kw),
                               (f(1, 256), w4, w4), (), True),
        "paged_attention": (sk.paged_attention, (f(1, 2, 16), pages, pages, table,
                                                 np.array([9], np.int32)), (), True),
        "paged_kv_scatter": (sk.paged_kv_scatter, (f(1, 2, 16), f(1, 2, 16), f(3, 2, 4, 16),
                                                   f(3, 2, 4, 16), np.array([5], np.int32)),
                             (2, 3), False),
        "flash_attention_wgmma": (lambda q, k, v, **kw: sk.flash_attention(
                                      q, k, v, causal=True, variant="wgmma", **kw),
                                  (h(1, 16, 64), h(1, 16, 64), h(1, 16, 64)), (), True),
        "q4k_matmul_mma": (lambda x, w, **kw: sk.q4k_matmul(x, w, 32, path="mma", **kw),
                           (f(9, 256), w4), (), True),
    }


CASES = _cases()
#: cases whose kernel runs only on the CPU executor and compute capability 9.0 GPUs (sm_90a):
#: their GPU cells run on a fake Hopper
HOPPER_ONLY = {"gemm_wgmma", "flash_attention_wgmma"}


@pytest.fixture
def fake(request, monkeypatch):
    """The fake GPU with graphs (runs the PTX on the executor under CUDA's capture rules): a
    Hopper (9.0, 227 KiB of shared memory per block) for the HOPPER_ONLY cases, else 8.0."""
    hopper = request.node.callspec.params.get("name") in HOPPER_ONLY
    yield from on_fake_gpu(monkeypatch, GraphFakeDriver(cc=(9, 0))
                           if hopper else GraphFakeDriver())
NAMES = sorted(CASES)
OUT_NAMES = [n for n in NAMES if CASES[n][3]]


def _fresh(name):
    """A new copy of the case's arrays (in-place cases mutate them)."""
    call, args, inplace, _ = CASES[name]
    return call, [a.copy() for a in args], inplace


def _host_result(res):
    if isinstance(res, pyptx.DeviceArray):
        return res.copy_to_host()
    if isinstance(res, torch.Tensor):
        return _from_torch(res)
    return res


def _to_torch(a: np.ndarray):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _from_torch(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.asarray(want).view(np.uint8))


def _assert_returns_own(res, mutated):
    """An in-place function returns the very objects it wrote (one, or a tuple of them)."""
    got = res if isinstance(res, tuple) else (res,)
    assert len(got) == len(mutated) and all(g is m for g, m in zip(got, mutated))




def _reference(name):
    """The numpy call's result (and the mutated arrays of an in-place call)."""
    call, args, inplace = _fresh(name)
    res = call(*args)
    return (None if inplace else res), [args[i] for i in inplace]


@pytest.mark.parametrize("name", NAMES)
def test_device_arrays_give_the_numpy_bits_and_stay_devicearrays(cpu, name):
    want, want_state = _reference(name)
    call, args, inplace = _fresh(name)
    dev = [pyptx.to_device(a) for a in args]
    res = call(*dev)
    if inplace:                   # the caller's own arrays (kv_scatter's cache, both pages)
        _assert_returns_own(res, [dev[i] for i in inplace])
        for i, s in zip(inplace, want_state):
            _bits_equal(dev[i].copy_to_host(), s)
    else:
        assert isinstance(res, pyptx.DeviceArray)
        _bits_equal(res.copy_to_host(), want)


@pytest.mark.parametrize("name", NAMES)
def test_torch_cpu_tensors_give_torch_tensors_with_the_numpy_bits(cpu, name):
    want, want_state = _reference(name)
    call, args, inplace = _fresh(name)
    ts = [_to_torch(a) for a in args]
    res = call(*ts)
    if inplace:                   # the caller's own tensors, written in place
        _assert_returns_own(res, [ts[i] for i in inplace])
        for i, s in zip(inplace, want_state):
            _bits_equal(_from_torch(ts[i]), s)
    else:
        assert isinstance(res, torch.Tensor) and res.device.type == "cpu"
        _bits_equal(_from_torch(res), want)


@pytest.mark.parametrize("kind", ["numpy", "device", "torch"])
@pytest.mark.parametrize("name", OUT_NAMES)
def test_out_is_filled_and_returned(cpu, name, kind):
    want, _ = _reference(name)
    call, args, _ = _fresh(name)
    if kind == "numpy":
        ins, out = args, np.full(want.shape, 7, want.dtype)
    elif kind == "device":
        ins, out = [pyptx.to_device(a) for a in args], pyptx.to_device(np.full(want.shape, 7,
                                                                               want.dtype))
    else:
        ins, out = [_to_torch(a) for a in args], _to_torch(np.full(want.shape, 7, want.dtype))
    res = call(*ins, out=out)
    assert res is out
    _bits_equal(_host_result(out), want)


@pytest.mark.parametrize("name", OUT_NAMES)
def test_out_of_the_wrong_shape_or_dtype_names_out(cpu, name):
    want, _ = _reference(name)
    call, args, _ = _fresh(name)
    with pytest.raises((ValueError, TypeError), match="out"):
        call(*args, out=np.empty(want.shape + (2,), want.dtype))
    other = np.float64 if want.dtype != np.float64 else np.float32
    with pytest.raises((ValueError, TypeError), match="out"):
        call(*args, out=np.empty(want.shape, other))


@pytest.mark.parametrize("name", NAMES)
def test_every_function_captures_in_a_graph_with_device_arguments(fake, name):
    """On the fake GPU (which runs the PTX on the executor, under CUDA's capture rules): the
    captured-and-replayed result equals the eager one, with no rule broken."""
    call, args, inplace = _fresh(name)
    eager_in = [pyptx.to_device(a) for a in args]
    want = call(*eager_in)
    want = None if inplace else want.copy_to_host()
    want_state = [eager_in[i].copy_to_host() for i in inplace]
    call, args, inplace = _fresh(name)
    cap_in = [pyptx.to_device(a) for a in args]
    with pyptx.graph() as g:
        out = call(*cap_in)
    g.launch()
    assert fake.violations == []
    if inplace:
        for i, s in zip(inplace, want_state):
            _bits_equal(cap_in[i].copy_to_host(), s)
    else:
        _bits_equal(out.copy_to_host(), want)


@pytest.mark.parametrize("name", OUT_NAMES)
def test_out_inside_a_graph_is_written_by_each_replay(fake, name):
    call, args, _ = _fresh(name)
    want = call(*[pyptx.to_device(a) for a in args]).copy_to_host()
    ins = [pyptx.to_device(a) for a in args]
    out = pyptx.to_device(np.zeros(want.shape, want.dtype))
    with pyptx.graph() as g:
        res = call(*ins, out=out)
    assert res is out
    g.launch()
    _bits_equal(out.copy_to_host(), want)
