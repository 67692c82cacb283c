"""DeviceArray memory comes from the context's pool and goes back to it in stream order
(pyptx/runtime/devmem.py), against a fake driver whose cuMemFree frees at once, as the driver's
"may synchronise" allows (queued work that still uses freed memory faults when it runs)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32
from pyptx.runtime import driver, driver_memory, streams
from pyptx.runtime.device_array import device_empty
from pyptx.runtime.devmem import HOME

from fake_driver import FakeDriver, idle_in_pool, on_fake_gpu


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@pyptx.kernel
def axpb(out: f32[:], x: f32[:], a: f32, n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = a * x[i] + 1.0


def test_released_buffers_are_reused_without_cumemalloc(fake):
    """The decode loop's pattern: results of the same sizes allocated and dropped every step."""
    x = pyptx.to_device(np.arange(64, dtype=np.float32))
    for _ in range(2):                                   # warm: the pool learns the sizes
        out = device_empty(64, np.float32)
        axpb[1, 64](out, x, 2.0, 64)
        del out
    allocs, frees = fake.count("cuMemAlloc"), fake.count("cuMemFree")
    for _ in range(5):
        out = device_empty(64, np.float32)
        axpb[1, 64](out, x, 2.0, 64)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(64) + 1)
        del out
    assert fake.count("cuMemAlloc") == allocs and fake.count("cuMemFree") == frees


def test_free_cached_memory_waits_for_queued_work(fake):
    """Giving cached buffers back to the driver synchronises first: the kernel still queued on
    a released buffer runs on live memory (with the fake's immediate cuMemFree, freeing first
    would make it fault)."""
    x = pyptx.to_device(np.ones(64, np.float32))
    out = device_empty(64, np.float32)
    ptr = out.device_pointer
    axpb[1, 64](out, x, 3.0, 64)                         # queued, not run
    del out
    gc.collect()
    assert idle_in_pool(ptr) and not fake.launches[-1].done
    driver_memory.free_cached_memory()
    assert fake.launches[-1].done and ptr not in fake.memory
    streams.synchronize()                                 # no sticky fault


def test_free_cached_memory_without_the_synchronise_would_fault(fake, monkeypatch):
    """The test above can fail: the same steps with free_cached's cuCtxSynchronize skipped
    leave the queued kernel writing freed memory (the fake's illegal address)."""
    x = pyptx.to_device(np.ones(64, np.float32))
    out = device_empty(64, np.float32)
    axpb[1, 64](out, x, 3.0, 64)
    del out
    gc.collect()
    monkeypatch.setattr(fake, "cuCtxSynchronize", lambda: (fake.CUresult.CUDA_SUCCESS,))
    driver_memory.free_cached_memory()
    monkeypatch.undo()
    with pytest.raises(pyptx.DeviceError, match="ILLEGAL_ADDRESS"):
        streams.synchronize()


def _events(fake, since):
    """(call, stream) of the event records and waits after call number `since`."""
    out = []
    for name, args in fake.calls[since:]:
        if name == "cuEventRecord":
            out.append(("record", int(args[1] or 0)))
        elif name == "cuStreamWaitEvent":
            out.append(("wait", int(args[0] or 0)))
    return out


def test_an_array_used_on_another_stream_is_ordered_both_ways(fake):
    """First use on stream s: s waits for the home stream (the buffer's previous owner may
    still use it there).  Release: the home stream waits for s (its next owner runs there)."""
    s = streams.Stream(non_blocking=True)
    hs = driver.handle_int(s.handle)
    x = pyptx.to_device(np.ones(64, np.float32))
    out = device_empty(64, np.float32)
    n = len(fake.calls)
    axpb[1, 64](out, x, 2.0, 64, stream=s)
    assert _events(fake, n) == [("record", HOME), ("wait", hs)] * 2      # out and x
    n = len(fake.calls)
    axpb[1, 64](out, x, 2.0, 64, stream=s)
    assert _events(fake, n) == []                        # once per array and stream
    ptr = out.device_pointer
    n = len(fake.calls)
    del out
    gc.collect()
    assert _events(fake, n) == [("record", hs), ("wait", HOME)]
    assert idle_in_pool(ptr)
    n = len(fake.calls)
    axpb[1, 64](x, x, 1.0, 64)                           # the home stream: nothing extra
    assert _events(fake, n) == []
    s.synchronize()


def test_views_order_their_owner(fake):
    s = streams.Stream(non_blocking=True)
    a = device_empty((4, 16), np.float32)
    x = pyptx.to_device(np.ones(16, np.float32))
    axpb[1, 16](a[2:3].reshape(16), x, 1.0, 16, stream=s)
    assert a._streams == [driver.handle_int(s.handle)]
    s.synchronize()


def test_cuda_array_interface_orders_other_streams_before_the_legacy_stream(fake):
    """CAI says stream 1 (legacy); a kernel that wrote the array on a non-blocking stream
    (which the legacy stream does not wait for) is put before the legacy stream's next work."""
    s = streams.Stream(non_blocking=True)
    hs = driver.handle_int(s.handle)
    x = pyptx.to_device(np.ones(64, np.float32))
    out = device_empty(64, np.float32)
    axpb[1, 64](out, x, 2.0, 64, stream=s)
    n = len(fake.calls)
    assert out.__cuda_array_interface__["stream"] == 1
    assert _events(fake, n) == [("record", hs), ("wait", HOME)]
    n = len(fake.calls)
    assert x.reshape(8, 8).__cuda_array_interface__["stream"] == 1     # a view: its owner's
    assert _events(fake, n) == [("record", hs), ("wait", HOME)]
    y = pyptx.to_device(np.ones(4, np.float32))
    n = len(fake.calls)
    y.__cuda_array_interface__
    assert _events(fake, n) == []                        # only the home stream: nothing to do
    s.synchronize()
