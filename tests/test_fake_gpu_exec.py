"""GPU-mode launches on the fake driver run the real PTX (on the CPU executor, behind the driver
API): user kernels and stdlib functions give, bit for bit, what PYPTX_DEVICE=cpu gives (the same
PTX on the same executor), with DeviceArrays and with numpy arrays; a kernel fault surfaces as
CUDA_ERROR_ILLEGAL_ADDRESS at the next synchronising call, as on a GPU."""
from __future__ import annotations


import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from pyptx import f16, f32, i32
from pyptx.errors import DeviceError, MemoryFault
from pyptx.runtime import streams
from stdlib_kernels import quant

from fake_driver import FakeDriver, on_fake_gpu

rng = np.random.default_rng(77)


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


def on_cpu(monkeypatch, fn):
    """fn() with launches on the CPU executor (PYPTX_DEVICE is re-read at every launch)."""
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    try:
        return fn()
    finally:
        monkeypatch.setenv("PYPTX_DEVICE", "gpu")


def host(a):
    return a.copy_to_host() if isinstance(a, pyptx.DeviceArray) else a


def same_bits(got, want):
    got, want = np.asarray(host(got)), np.asarray(host(want))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"max |diff| {np.abs(got - want).max()}"


# ---- user kernels -------------------------------------------------------------------------------

@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


@pyptx.func
def warp_sum(v: f32):
    for k in pyptx.static_range(5):
        v += pyptx.shfl_xor(v, 16 >> k)
    return v


@pyptx.kernel
def block_sums(out: f32[:], x: f32[:], n: i32, BLOCK: pyptx.constexpr):
    """One sum per block: warp shuffles, then the warps' partials through shared memory."""
    partial = pyptx.shared.array(BLOCK // 32, f32)
    t = pyptx.thread_idx.x
    i = pyptx.block_idx.x * BLOCK + t
    v = x[i] if i < n else f32(0)
    v = warp_sum(v)
    if pyptx.lane_id() == 0:
        partial[t // 32] = v
    pyptx.syncthreads()
    if t < 32:
        w = partial[t] if t < BLOCK // 32 else f32(0)
        w = warp_sum(w)
        if t == 0:
            out[pyptx.block_idx.x] = w


@pyptx.kernel
def axpb_half(out: f16[:], x: f16[:], a: f16, b: f16, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = x[i] * a + b


def run_both(monkeypatch, fake, launch):
    """launch() in GPU mode on the fake and on the CPU executor; the GPU result is checked to
    come from the fake's launches (it queued and ran at least one)."""
    before = fake.count("cuLaunchKernel")
    got = host(launch())
    streams.synchronize()
    assert fake.count("cuLaunchKernel") > before
    assert all(ln.done for ln in fake.launches)
    want = host(on_cpu(monkeypatch, launch))
    same_bits(got, want)
    return got


@pytest.mark.parametrize("resident", [False, True], ids=["numpy", "DeviceArray"])
def test_user_kernels_match_the_cpu_executor(fake, monkeypatch, resident):
    put = pyptx.to_device if resident else (lambda a: a)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)

    def do_saxpy():
        out = put(np.full(n, np.nan, np.float32))
        saxpy[4, 256](out, put(x), put(y), 2.5, n)
        return out
    got = run_both(monkeypatch, fake, do_saxpy)
    np.testing.assert_allclose(got, 2.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)

    def do_sums():
        out = put(np.full(8, np.nan, np.float32))
        block_sums[8, 128](out, put(x), n, 128)
        return out
    got = run_both(monkeypatch, fake, do_sums)
    np.testing.assert_allclose(got, np.pad(x, (0, 24)).reshape(8, 128).sum(1), rtol=1e-4,
                               atol=1e-5)

    h = rng.standard_normal(300).astype(np.float16)

    def do_half():
        out = put(np.full(300, np.nan, np.float16))
        axpb_half[2, 256](out, put(h), 1.5, -0.25, 300)
        return out
    got = run_both(monkeypatch, fake, do_half)
    np.testing.assert_allclose(got.astype(np.float32), h.astype(np.float32) * 1.5 - 0.25,
                               atol=2e-2)


def test_two_pointers_into_one_allocation_alias(fake, monkeypatch):
    """Views of one DeviceArray passed as two arguments are one region for the executor."""
    def go():
        d = pyptx.to_device(np.arange(16, dtype=np.float32))
        saxpy[1, 8](d[8:], d[:8], d[8:], 2.0, 8)         # d[8:] += 2 * d[:8]
        return d
    got = run_both(monkeypatch, fake, go)
    want = np.arange(16, dtype=np.float32)
    want[8:] += 2 * want[:8]
    np.testing.assert_array_equal(got, want)


# ---- stdlib functions ---------------------------------------------------------------------------

@pytest.mark.parametrize("resident", [False, True], ids=["numpy", "DeviceArray"])
def test_stdlib_softmax_rmsnorm_q4k_match_the_cpu_executor(fake, monkeypatch, resident):
    put = pyptx.to_device if resident else (lambda a: a)
    x = (rng.standard_normal((3, 200)) * 4).astype(np.float32)
    got = run_both(monkeypatch, fake, lambda: sk.softmax(put(x)))
    np.testing.assert_allclose(got.sum(-1), 1, rtol=1e-5)
    wide = rng.standard_normal((2, 3000)).astype(np.float32)       # the block kernel
    run_both(monkeypatch, fake, lambda: sk.softmax(put(wide)))

    w = rng.standard_normal(200).astype(np.float32)
    got = run_both(monkeypatch, fake, lambda: sk.rmsnorm(put(x), put(w), 1e-5))
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)

    wq = quant.quantize((rng.standard_normal((40, 256)) * 0.1).astype(np.float32), "q4_k")
    a = rng.standard_normal((2, 256)).astype(np.float32)
    for path in ("dp4a", "f32", "mma"):
        got = run_both(monkeypatch, fake, lambda: sk.q4k_matmul(put(a), put(wq), 40, path=path))
        ref = a.astype(np.float64) @ quant.dequantize_q4_k(wq).astype(np.float64).T
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def test_stdlib_flash_attention_f16_matches_the_cpu_executor(fake, monkeypatch):
    """flash_attention takes numpy arrays (tensor cores: mma, ldmatrix, cp.async)."""
    q, k, v = (rng.standard_normal((2, 40, 64)).astype(np.float16) for _ in range(3))
    got = run_both(monkeypatch, fake, lambda: sk.flash_attention(q, k, v, causal=True))
    assert np.isfinite(got).all()


# ---- faults ------------------------------------------------------------------------------------

@pyptx.kernel
def poke(out: f32[:], at: i32):
    if pyptx.thread_idx.x == 0:
        out[at] = 1.0


def test_out_of_bounds_surfaces_at_the_next_synchronising_call(fake):
    out = pyptx.to_device(np.zeros(8, np.float32))
    poke[1, 32](out, 3)
    streams.synchronize()
    assert out.copy_to_host()[3] == 1.0                  # in bounds: fine
    poke[1, 32](out, 1 << 22)                            # 16 MiB past an 32-byte allocation
    assert fake.sticky is None                           # queued: nothing has run yet
    with pytest.raises(DeviceError) as ei:
        streams.synchronize()
    assert ei.value.error_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "out-of-bounds global access in kernel 'poke'" in str(ei.value)
    # what pyptx adds to the driver's text: the likely kernel, the lost context, the way out
    msg = str(ei.value)
    assert "kernel 'poke' (the last one launched" in msg
    assert "context is now lost" in msg and "restart the process" in msg
    assert "PYPTX_DEVICE=cpu" in msg
    assert isinstance(fake.fault, MemoryFault)
    with pytest.raises(DeviceError, match="ILLEGAL_ADDRESS"):
        out.copy_to_host()                               # the context stays broken
    with pytest.raises(DeviceError, match="ILLEGAL_ADDRESS"):
        poke[1, 32](out, 0)


def test_out_of_bounds_with_numpy_arguments_fails_the_launch(fake):
    """A written numpy argument is copied back, so the launch itself synchronises."""
    out = np.zeros(8, np.float32)
    with pytest.raises(DeviceError) as ei:
        poke[1, 32](out, 1 << 22)
    assert ei.value.error_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "kernel 'poke' (the last one launched" in str(ei.value)   # a later call saw it
    assert (out == 0).all()


def test_errors_that_leave_the_context_usable_keep_the_drivers_text():
    from pyptx.runtime.gpu_faults import explain
    assert explain("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory") == \
        "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
    assert "restart the process" in explain("cuCtxSynchronize", "CUDA_ERROR_MISALIGNED_ADDRESS",
                                            "")
