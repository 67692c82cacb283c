"""cuda-python's two default-stream modes (`CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM`).

In per-thread mode the bindings call the `_ptsz`/`_ptds` entry points, where stream handle 0 is
a different stream in every thread; pyptx's memory pool and its ordering of arrays assume one
home stream that all threads share, so in that mode every piece of "default stream" work pyptx
queues names CU_STREAM_LEGACY (1) explicitly — a stream every blocking stream, per-thread
default streams included, synchronises with (CUDA's stream synchronisation behaviour).  In legacy
mode nothing changes: handle 0.  Checked on the fake driver by the stream argument of every
call that takes one."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from pyptx import f32
from pyptx.runtime import driver, streams

from fake_driver import on_fake_gpu
from fake_graph import GraphFakeDriver

#: driver call -> position of its stream argument
STREAM_ARG = {"cuLaunchKernel": 8, "cuMemcpyHtoDAsync": 3, "cuMemcpyDtoHAsync": 3,
              "cuStreamSynchronize": 0, "cuEventRecord": 1, "cuStreamWaitEvent": 0,
              "cuGraphLaunch": 1}


@pyptx.kernel
def scale2(out: f32[:], x: f32[:]):
    i = pyptx.grid(1)
    if i < len(out):
        out[i] = 2.0 * x[i]


def _workload():
    """Default-stream work of every kind: staging copies, DeviceArrays, a stdlib call, a graph,
    an event, a free and reuse from the pool, copies back."""
    x = np.arange(64, dtype=np.float32)
    host_out = np.zeros_like(x)
    scale2[1, 64](host_out, x)                       # numpy arguments: staged through the pool
    d = pyptx.to_device(x)
    r = pyptx.to_device(np.zeros_like(x))
    scale2[1, 64](r, d)
    s = sk.softmax(d.reshape(8, 8))
    with pyptx.graph() as g:
        scale2[1, 64](r, d)
    g.launch()
    e = streams.Event()
    e.record()
    tmp = pyptx.to_device(x)
    tmp.free()                                       # back to the pool, then reused
    again = pyptx.to_device(x + 1)
    return host_out, r.copy_to_host(), s.copy_to_host(), again.copy_to_host()


def _streams_used(fake):
    return [(name, args[STREAM_ARG[name]]) for name, args in fake.calls if name in STREAM_ARG]


@pytest.mark.parametrize("per_thread", [False, True])
def test_default_stream_work_goes_to_one_shared_stream(monkeypatch, per_thread):
    monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "1" if per_thread else "0")
    gen = on_fake_gpu(monkeypatch, GraphFakeDriver())
    fake = next(gen)
    try:
        host_out, r, s, again = _workload()
        used = _streams_used(fake)
    finally:
        gen.close()
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(host_out, 2 * x)
    np.testing.assert_array_equal(r, 2 * x)
    np.testing.assert_array_equal(again, x + 1)
    np.testing.assert_allclose(s.sum(1), 1.0, rtol=1e-6)
    home = [(n, h) for n, h in used if int(h or 0) in (0, 1)]
    assert {n for n, _ in home} >= {"cuLaunchKernel", "cuEventRecord"}
    if per_thread:       # never the per-thread handle 0: always CU_STREAM_LEGACY
        assert all(int(h or 0) == 1 for _, h in home), home
    else:                # legacy mode: the NULL stream, as before
        assert all(int(h or 0) == 0 for _, h in home), home


def test_only_the_value_1_selects_per_thread_mode(monkeypatch):
    for value, want in (("1", 1), ("0", 0), ("", 0), ("yes", 0)):
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", value)
        assert driver.home_stream_handle() == want
    monkeypatch.delenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM")
    assert driver.home_stream_handle() == 0
