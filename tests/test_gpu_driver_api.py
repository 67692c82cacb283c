"""Driver-API details of the GPU path, against the fake driver: `pyptx.cuda.synchronize()` really
waits, driver handles become ints the supported way (no `int(handle)`, deprecated by
cuda-bindings), a missing PTX JIT library gets a DeviceError that says what to install."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import pyptx
from pyptx import cuda, f32, i32
from pyptx.errors import DeviceError
from pyptx.runtime import driver

from fake_driver import FakeDriver


@pytest.fixture
def fake(monkeypatch):
    fd = FakeDriver()
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    yield fd
    gc.collect()
    driver.set_driver(prev)


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
    fill[1, 64](out, 1.0, 1 << 22)                           # writes far past the 8 floats
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
