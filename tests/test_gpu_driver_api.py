"""Driver-API details of the GPU path, against the fake driver: `pyptx.cuda.synchronize()` really
waits, driver handles become ints the supported way (no `int(handle)`, deprecated by
cuda-bindings), a missing PTX JIT library gets a DeviceError that says what to install."""
from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import pyptx
from pyptx import cuda, f32, i32
from pyptx.errors import DeviceError
from pyptx.runtime import driver, driver_memory, streams

from fake_driver import FakeDriver, on_fake_gpu


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@pyptx.kernel
def fill(out: f32[:], v: f32, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = v


# ---- pyptx.cuda.synchronize ---------------------------------------------------------------------

def test_cuda_synchronize_waits_for_queued_launches(fake):
    out = pyptx.to_device(np.zeros(64, np.float32))
    fill[1, 64](out, 3.0, 64)
    mem = fake.view(out.device_pointer, np.float32, 64)      # device memory, not waiting
    assert (mem == 0).all() and not fake.launches[-1].done   # queued, not run
    before = fake.count("cuCtxSynchronize")
    cuda.synchronize()
    assert fake.count("cuCtxSynchronize") == before + 1
    assert fake.launches[-1].done and (mem == 3).all()


def test_cuda_synchronize_raises_a_queued_kernels_fault(fake):
    out = pyptx.to_device(np.zeros(8, np.float32))
    fill[4, 256](out, 1.0, 1 << 22)     # 4 KiB: past the 8 floats and their 512-byte buffer
    with pytest.raises(DeviceError) as ei:
        cuda.synchronize()
    assert ei.value.error_name == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_cuda_synchronize_is_a_no_op_on_the_cpu_executor(fake, monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    out = pyptx.to_device(np.zeros(4, np.float32))
    fill[1, 4](out, 2.0, 4)
    n = len(fake.calls)
    cuda.synchronize()
    assert len(fake.calls) == n                              # no driver call at all
    assert (out.copy_to_host() == 2).all()


# ---- handles → ints -----------------------------------------------------------------------------

class DeprecatedIntHandle:
    """A driver handle whose int() warns, as cuda-bindings announced for its handle types in
    12.9.1 / 13.0 ("int(cuda_obj) ... is deprecated ... use get_cuda_native_handle()");
    registered with cuda.bindings.utils the way the bindings register their own types."""

    __slots__ = ("real",)

    def __init__(self, real):
        self.real = real

    def __int__(self):
        warnings.warn("int() of a CUDA object is deprecated: use "
                      "cuda.bindings.utils.get_cuda_native_handle()", DeprecationWarning,
                      stacklevel=2)
        return int(self.real)

    def __eq__(self, other):
        return isinstance(other, DeprecatedIntHandle) and other.real == self.real

    def __hash__(self):
        return hash(self.real)


class DeprecatingDriver:
    """The fake driver behind a layer that hands out DeprecatedIntHandles for every opaque
    handle (context, stream, event, module, function) and unwraps them on the way in."""

    def __init__(self, fake):
        from cuda.bindings import driver as real
        self._fake = fake
        self._opaque = (real.CUcontext, real.CUstream, real.CUevent, real.CUmodule,
                        real.CUfunction)

    def __getattr__(self, name):
        attr = getattr(self._fake, name)
        if not (name.startswith("cu") and callable(attr)):
            return attr

        def call(*args):
            res = attr(*[a.real if isinstance(a, DeprecatedIntHandle) else a for a in args])
            return tuple(DeprecatedIntHandle(x) if isinstance(x, self._opaque) else x
                         for x in res)
        return call


def test_no_int_of_a_driver_handle(monkeypatch):
    utils = pytest.importorskip("cuda.bindings.utils")
    register = getattr(utils, "_add_cuda_native_handle_getter", None)
    if register is None or not hasattr(utils, "get_cuda_native_handle"):
        pytest.skip("these cuda.bindings have no get_cuda_native_handle registry")
    register(DeprecatedIntHandle, lambda h: utils.get_cuda_native_handle(h.real))
    fake = FakeDriver()
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(DeprecatingDriver(fake))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            out = pyptx.to_device(np.zeros(32, np.float32))
            fill[1, 32](out, 1.0, 32)                        # context, module, function
            s = streams.Stream()
            fill[1, 32](out, 2.0, 32, stream=s)
            assert s.__cuda_stream__()[1] == driver.handle_int(s.handle) != 0
            s.synchronize()
            e0, e1 = streams.Event(), streams.Event()
            e0.record(s)
            host = np.zeros(32, np.float32)
            fill[1, 32](host, 4.0, 32, stream=s)             # numpy: the pool allocates
            e1.record(s)
            assert e1.elapsed_ms(e0) >= 0
            cuda.synchronize()
            assert (out.copy_to_host() == 2).all() and (host == 4).all()
            assert out.__dlpack_device__() == (2, 0)
            s.close()
            driver_memory.free_cached_memory()
        assert fake.count("cuLaunchKernel") == 3
    finally:
        gc.collect()
        driver.set_driver(prev)
        getattr(utils, "_handle_getters", {}).pop(DeprecatedIntHandle, None)


def test_handle_int_of_every_kind_of_handle():
    real = pytest.importorskip("cuda.bindings.driver")
    for cls in (real.CUcontext, real.CUstream, real.CUevent, real.CUmodule, real.CUfunction,
                real.CUdeviceptr, real.CUdevice):
        assert driver.handle_int(cls(0x1234)) == 0x1234, cls
    assert driver.handle_int(None) == 0 and driver.handle_int(7) == 7


# ---- a missing PTX JIT -------------------------------------------------------------------------

def test_missing_ptx_jit_library_says_what_to_install(fake):
    fake.fail["cuModuleLoadDataEx"] = fake.CUresult.CUDA_ERROR_JIT_COMPILER_NOT_FOUND
    out = pyptx.to_device(np.zeros(4, np.float32))
    with pytest.raises(DeviceError) as ei:
        fill[1, 4](out, 1.0, 4)
    e = ei.value
    assert e.error_name == "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    msg = str(e)
    assert "could not load the PTX of kernel 'fill'" in msg
    assert "libnvidia-ptxjitcompiler.so" in msg                  # what is missing
    assert "libnvidia-compute-" in msg and "container" in msg    # how to get it
    assert fake.count("cuLaunchKernel") == 0
