"""Several GPUs (pyptx/runtime/devices.py, docs/launching.md "Devices"): `pyptx.devices()`,
`pyptx.use_device` per thread, `DeviceArray.device`, one context / module / launch plan per
device, launches that mix devices, foreign pointers whose device is told by their context, the
Numba spellings (`cuda.select_device`, `cuda.gpus`, `cuda.get_current_device`,
`cuda.detect`), and the CPU executor's answers.  Against multi-device fake drivers."""
import gc
import re
import threading

import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import cuda, f32, i32
from pyptx.errors import DeviceError, LaunchError
from pyptx.runtime import driver, driver_memory, profile

from fake_driver import FakeCompiler, FakeDriver, hand_compiled, idle_in_pool

CTX0, CTX1 = FakeDriver.CONTEXT_BASE, FakeDriver.CONTEXT_BASE + 1


def install(monkeypatch, **kw):
    fd = FakeDriver(**kw)
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    driver.set_driver(fd)
    return fd


@pytest.fixture
def restore_driver():
    prev = driver._injected
    yield
    gc.collect()
    driver.set_driver(prev)


@pytest.fixture
def two(monkeypatch, restore_driver):
    """Two GPUs of different compute capability (an A100 and an H100)."""
    return install(monkeypatch, devices=2, cc=[(8, 0), (9, 0)], name=["Fake A100", "Fake H100"],
                   total_memory=[40 << 30, 80 << 30])


from test_driver_fake import SCALE, scale, scale_body  # noqa: E402  (one definition)


def use_scale(monkeypatch, fake):
    ck = hand_compiled("scale", SCALE)
    fc = FakeCompiler(lambda k, cx, t: ck)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", fc)
    fake.bodies["scale"] = scale_body
    return fc


@pyptx.kernel
def double(x: f32[:], n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        x[i] = x[i] * 2.0


class CaiArray:
    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": None}


class DLPackView:
    """Only the DLPack protocol, delegating to a DeviceArray."""

    def __init__(self, d):
        self.d = d

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.d.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.d.__dlpack_device__()


def in_thread(fn):
    box = []

    def run():
        try:
            box.append(fn())
        except BaseException as e:  # noqa: BLE001
            box.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def ones(n=8):
    return np.ones(n, np.float32)


# ---- pyptx.devices() ----------------------------------------------------------------------------

def test_devices_lists_every_gpu_without_making_contexts(two):
    devs = pyptx.devices()
    assert [(d.id, d.name, d.compute_capability, d.total_memory) for d in devs] == [
        (0, "Fake A100", (8, 0), 40 << 30), (1, "Fake H100", (9, 0), 80 << 30)]
    assert [d.arch for d in devs] == ["sm_80", "sm_90"]
    assert isinstance(devs[0], pyptx.Device) and "Fake H100" in repr(devs[1])
    # listing asks the driver about each device but retains only device 0's context (made
    # when the launch device was decided)
    assert [c[1][0] for c in two.calls if c[0] == "cuDevicePrimaryCtxRetain"] == [0]


def test_cpu_executor_has_no_gpus_and_only_device_0(monkeypatch, capsys):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    assert pyptx.devices() == []
    with pyptx.use_device(0) as d:                     # allowed, and changes nothing
        a = pyptx.to_device(ones())
    assert d.name == "pyptx CPU executor" and d.id == 0
    assert a.device == "cpu" and a[2:4].device == "cpu"
    with pytest.raises(DeviceError, match="no CUDA device 1.*CPU executor.*PYPTX_DEVICE=cpu"):
        pyptx.use_device(1)
    assert len(cuda.gpus) == 0 and list(cuda.gpus) == [] and cuda.gpus.current is None
    assert cuda.get_current_device().name == "pyptx CPU executor"
    assert cuda.select_device(0).id == 0
    with pytest.raises(IndexError):
        cuda.gpus[0]
    assert cuda.detect() is False
    out = capsys.readouterr().out
    assert "Found 0 CUDA devices" in out and "CPU executor" in out and "0/0" in out


# ---- use_device: function, context manager, threads ---------------------------------------------

def test_use_device_selects_where_arrays_are_allocated(two):
    a = pyptx.to_device(ones())
    pyptx.use_device(1)                                # as a function: from now on
    b = pyptx.to_device(ones())
    c = pyptx.to_device(np.zeros(0, np.float32))       # empty: no memory, still device 1
    with pyptx.use_device(0) as dev:                   # as a context manager: for the block
        assert dev.id == 0 and dev.name == "Fake A100"
        d = pyptx.to_device(ones())
        with pyptx.use_device(1):
            e = cuda.device_array(4, np.float32)
        f = cuda.device_array(4, np.float32)
    g = pyptx.to_device(ones())                        # back on device 1
    assert [x.device for x in (a, b, c, d, e, f, g)] == [0, 1, 1, 0, 1, 0, 1]
    mem_ctx = {x.device: [] for x in (a, b)}
    for x in (a, b, d, e, f, g):
        mem_ctx[x.device].append(two.memory_ctx[x.device_pointer])
    assert set(mem_ctx[0]) == {CTX0} and set(mem_ctx[1]) == {CTX1}
    assert "gpu 1" in repr(b)
    pyptx.use_device(0)


def test_a_new_thread_starts_on_device_0(two):
    with pyptx.use_device(1):
        assert in_thread(lambda: pyptx.to_device(ones()).device) == 0

        def other():
            pyptx.use_device(1)                        # this thread's choice only
            return pyptx.to_device(ones()).device
        assert in_thread(other) == 1
        assert pyptx.to_device(ones()).device == 1
    assert pyptx.to_device(ones()).device == 0


def test_bad_devices_are_refused_at_selection(two):
    for bad in (2, -1, 99):
        with pytest.raises(DeviceError, match=f"no CUDA device {bad}.*2 devices") as ei:
            pyptx.use_device(bad)
        assert ei.value.error_name == "CUDA_ERROR_INVALID_DEVICE"
    for bad in (True, 1.0, "1", None):
        with pytest.raises(TypeError, match="int ordinal or a pyptx.Device"):
            pyptx.use_device(bad)
    assert pyptx.to_device(ones()).device == 0         # the selection did not change
    with pytest.raises(DeviceError, match="no CUDA device 5"):
        cuda.select_device(5)
    with pytest.raises(IndexError):
        cuda.gpus[5]
    with pyptx.use_device(np.int64(1)):                 # numpy ints are ordinals
        assert pyptx.to_device(ones()).device == 1
    with pyptx.use_device(pyptx.devices()[1]):          # so are Device objects
        assert pyptx.to_device(ones()).device == 1


def test_a_device_too_old_or_unusable_fails_at_selection(monkeypatch, restore_driver):
    fd = install(monkeypatch, devices=3, cc=[(8, 0), (7, 0), (8, 6)])
    with pytest.raises(DeviceError, match="7.0 is too old"):
        pyptx.use_device(1)
    driver.context()                                    # device 0 works
    fd.fail["cuDevicePrimaryCtxRetain"] = [fd.CUresult.CUDA_ERROR_OUT_OF_MEMORY]
    with pytest.raises(DeviceError, match="cuDevicePrimaryCtxRetain.*OUT_OF_MEMORY"):
        pyptx.use_device(2)
    with pytest.raises(DeviceError, match="OUT_OF_MEMORY"):   # remembered, not retried
        pyptx.use_device(2)
    assert fd.count("cuDevicePrimaryCtxRetain") == 3
    assert pyptx.to_device(ones()).device == 0          # still on device 0


# ---- DeviceArray.device, DLPack, copies and frees in the array's own context ---------------------

def test_device_array_knows_its_device_and_uses_its_context(two):
    with pyptx.use_device(1):
        b = pyptx.to_device(np.arange(8, dtype=np.float32))
    assert b.device == 1 and b[2:4].device == 1 and b.reshape(2, 4).device == 1
    assert b.__dlpack_device__() == (2, 1)              # kDLCUDA, device 1: not the current 0
    seen = []

    def spy(name):
        real = getattr(two, name)

        def call(*args):
            seen.append((name, two.current()))
            return real(*args)
        setattr(two, name, call)
    for name in ("cuMemcpyDtoH", "cuMemcpyHtoD", "cuCtxSynchronize"):
        spy(name)
    np.testing.assert_array_equal(b.copy_to_host(), np.arange(8, dtype=np.float32))
    b.copy_from_host(np.full(8, 3, np.float32))
    b.__dlpack__(stream=1)                              # synchronises the array's context
    assert seen == [("cuMemcpyDtoH", CTX1), ("cuMemcpyHtoD", CTX1), ("cuCtxSynchronize", CTX1)]
    ptr = b.device_pointer
    del b
    gc.collect()
    assert idle_in_pool(ptr, driver.context(1))         # released in its own context


def test_arrays_are_freed_in_their_context_from_any_thread(two):
    with pyptx.use_device(1):
        b = pyptx.to_device(ones())
    a = pyptx.to_device(ones())
    pa, pb = a.device_pointer, b.device_pointer
    in_thread(b.free)                                   # a thread on device 0 frees device 1's

    def free_a_from_device_1():
        pyptx.use_device(1)
        a.free()
    in_thread(free_a_from_device_1)
    assert idle_in_pool(pb, driver.context(1)) and idle_in_pool(pa, driver.context(0))
    assert not idle_in_pool(pa, driver.context(1)) and not idle_in_pool(pb, driver.context(0))


def test_reset_and_fork_forget_every_device(two):
    a = pyptx.to_device(ones())
    with pyptx.use_device(1):
        b = pyptx.to_device(ones())
    ctxs = driver.contexts()
    assert [c.ordinal for c in ctxs] == [0, 1]
    pyptx.use_device(1)
    driver._after_fork_in_child()                       # what a forked child runs
    assert not any(c.alive for c in ctxs)
    with pytest.raises(DeviceError, match="forked"):
        driver.context(1)
    a.free()
    b.free()
    assert two.count("cuMemFree") == 0                  # the parent's memory is left alone
    driver.set_driver(two)                              # a reset: every thread on device 0 again
    assert driver.current_ordinal() == 0 and driver.contexts() == []
    assert pyptx.to_device(ones()).device == 0


def test_free_cached_memory_covers_every_device(two, monkeypatch):
    use_scale(monkeypatch, two)
    scale[1, 8](ones(), ones(), 2.0, 8)                 # numpy arguments: staged via the pool
    with pyptx.use_device(1):
        scale[1, 8](ones(), ones(), 2.0, 8)
    pools = [c.pool for c in driver.contexts()]
    assert len(pools) == 2 and all(p.cached_bytes for p in pools)
    driver_memory.free_cached_memory()
    assert not any(p.cached_bytes for p in pools)
    assert {ctx for _p, ctx in two.freed_in} == {CTX0, CTX1}


# ---- launches: per-device plans and modules, mixed devices ----------------------------------------

def loaded_modules(fd):
    """(context, PTX text) of each cuModuleLoadDataEx, in order."""
    images = [c[1][0][:-1].decode() for c in fd.calls if c[0] == "cuModuleLoadDataEx"]
    handles = sorted(fd.module_ctx, key=int)
    return [(fd.module_ctx[h], ptx) for h, ptx in zip(handles, images)]


def test_each_device_loads_the_kernel_once_for_its_own_arch(two):
    x0 = pyptx.to_device(ones())
    with pyptx.use_device(1):
        x1 = pyptx.to_device(ones())
    for _ in range(2):
        double[1, 8](x0, 8)
        with pyptx.use_device(1):
            double[1, 8](x1, 8)
    mods = loaded_modules(two)
    assert [ctx for ctx, _ in mods] == [CTX0, CTX1]     # once per device
    targets = [re.search(r"^\s*\.target\s+(\w+)", ptx, re.M).group(1) for _, ptx in mods]
    assert targets == ["sm_80", "sm_90"]
    assert [two.function_ctx[launch_fn] for launch_fn in
            [c[1][0] for c in two.calls if c[0] == "cuLaunchKernel"]] == [CTX0, CTX1] * 2
    # plans and profiles are per device too
    plans = double._pyptx_binder.plans
    assert plans[0].ck.arch == "sm_80" and plans[1].ck.arch == "sm_90"
    assert profile.gpu_profile().arch == "sm_80"
    with pyptx.use_device(1):
        assert profile.gpu_profile().arch == "sm_90" and profile.current_arch() == "sm_90"


def test_same_arch_devices_share_the_compile_but_not_the_loaded_function(monkeypatch,
                                                                            restore_driver):
    fd = install(monkeypatch, devices=2)
    fc = use_scale(monkeypatch, fd)
    for dev in (0, 1, 0, 1):
        with pyptx.use_device(dev):
            out = pyptx.to_device(np.zeros(8, np.float32))
            scale[1, 8](out, pyptx.to_device(ones()), 2.0, 8)
            np.testing.assert_array_equal(out.copy_to_host(), np.full(8, 2, np.float32))
    assert {r["arch"] for r in fc.requests} == {"sm_80"}
    assert [ctx for ctx, _ in loaded_modules(fd)] == [CTX0, CTX1]
    # the fake refuses a function of another context (CUDA_ERROR_INVALID_HANDLE): all 4 ran
    assert fd.count("cuLaunchKernel") == 4 and all(ln.done for ln in fd.launches)


def test_mixing_devices_in_one_launch_is_a_launch_error(two, monkeypatch):
    use_scale(monkeypatch, two)
    out0 = pyptx.to_device(np.zeros(8, np.float32))
    with pyptx.use_device(1):
        x1 = pyptx.to_device(ones())
        out1 = pyptx.to_device(np.zeros(8, np.float32))
    cases = [(lambda: scale[1, 8](out0, x1, 1.0, 8), "x", 1, 0),
             (lambda: scale[1, 8](out0, x1[0:8], 1.0, 8), "x", 1, 0),        # a view
             (lambda: scale[1, 8](out1, ones(), 1.0, 8), "out", 1, 0),
             (lambda: scale[1, 8](out0, DLPackView(x1), 1.0, 8), "x", 1, 0)]
    for launch, param, other, here in cases:
        with pytest.raises(LaunchError, match=f"argument '{param}' .*device {other}\\)?, but "
                           f"this launch runs on CUDA device {here}.*use_device\\({other}\\)"):
            launch()
    with pyptx.use_device(1):
        with pytest.raises(LaunchError, match="argument 'out' .*device 0, but this launch runs "
                           "on CUDA device 1"):
            scale[1, 8](out0, x1, 1.0, 8)
        scale[1, 8](out1, DLPackView(x1), 3.0, 8)     # all on device 1: fine
    assert two.count("cuLaunchKernel") == 1
    np.testing.assert_array_equal(out1.copy_to_host(), np.full(8, 3, np.float32))


@pytest.mark.parametrize("ordinal_says_zero", [False, True])
def test_foreign_pointers_belong_to_their_context(two, monkeypatch, ordinal_says_zero):
    """A `__cuda_array_interface__` pointer's device is its context's, so bindings whose
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL always says 0 cannot fool the check."""
    use_scale(monkeypatch, two)
    two.pointer_ordinal_always_zero = ordinal_says_zero
    c0, c1 = driver.context(0), driver.context(1)
    p0 = int(c0.call("alloc", two.cuMemAlloc, 32))     # "another library's" memory
    p1 = int(c1.call("alloc", two.cuMemAlloc, 32))
    out0 = pyptx.to_device(np.zeros(8, np.float32))
    with pytest.raises(LaunchError, match="argument 'x' .*CUDA device 1, but this launch runs "
                       "on CUDA device 0"):
        scale[1, 8](out0, CaiArray(p1, 8), 1.0, 8)
    scale[1, 8](out0, CaiArray(p0, 8), 1.0, 8)
    with pyptx.use_device(1):
        out1 = pyptx.to_device(np.zeros(8, np.float32))
        scale[1, 8](out1, CaiArray(p1, 8), 1.0, 8)     # device 1's own memory: accepted
        with pytest.raises(LaunchError, match="argument 'x' .*CUDA device 0, but this launch "
                           "runs on CUDA device 1"):
            scale[1, 8](out1, CaiArray(p0, 8), 1.0, 8)
    assert two.count("cuLaunchKernel") == 2


def test_memory_of_a_context_pyptx_does_not_hold(two, monkeypatch):
    """The pointer's context is not a primary context pyptx retained: its device is asked
    (cuCtxGetDevice), and device 1's memory is refused on device 0 even when pyptx never
    used device 1."""
    use_scale(monkeypatch, two)
    two.pointer_ordinal_always_zero = True
    out0 = pyptx.to_device(np.zeros(8, np.float32))
    two.foreign[0x6000_0000_0000] = (1, 1 << 20)        # device 1, its primary context
    with pytest.raises(LaunchError, match="argument 'x' .*CUDA device 1, but this launch runs "
                       "on CUDA device 0"):
        scale[1, 8](out0, CaiArray(0x6000_0000_0000, 8), 1.0, 8)
    assert two.count("cuCtxGetDevice") == 1 and [c.ordinal for c in driver.contexts()] == [0]


# ---- the Numba spellings ---------------------------------------------------------------------------

def test_numba_device_spellings(two, capsys):
    assert cuda.get_current_device().id == 0
    dev = cuda.select_device(1)
    assert (dev.id, dev.name, dev.compute_capability) == (1, "Fake H100", (9, 0))
    cur = cuda.get_current_device()
    assert (cur.id, cur.name, cur.compute_capability) == (1, "Fake H100", (9, 0))
    assert cuda.to_device(ones()).device == 1
    assert len(cuda.gpus) == 2 and [g.id for g in cuda.gpus] == [0, 1]
    assert cuda.gpus.current.id == 1
    with cuda.gpus[0]:
        assert cuda.get_current_device().id == 0
        assert cuda.device_array(4, np.float32).device == 0
        with cuda.gpus[1]:
            assert cuda.gpus.current.id == 1
        assert cuda.gpus.current.id == 0
    assert cuda.get_current_device().id == 1            # back to the selected device
    cuda.select_device(0)
    assert cuda.detect() is True
    out = capsys.readouterr().out
    assert "Found 2 CUDA devices" in out and "2/2 devices are supported" in out
    assert re.search(r"id 1 +Fake H100 +\[SUPPORTED\]", out)
    assert "9.0" in out and "sm_90" in out


def test_detect_reports_unsupported_devices(monkeypatch, restore_driver, capsys):
    install(monkeypatch, devices=2, cc=[(8, 6), (7, 0)], name=["New", "Old"])
    assert cuda.detect() is True
    out = capsys.readouterr().out
    assert re.search(r"id 1 +Old +\[NOT SUPPORTED: CC < 7.5\]", out) and "1/2" in out


def test_detect_without_a_usable_gpu(monkeypatch, restore_driver, capsys):
    install(monkeypatch, devices=0)
    assert cuda.detect() is False
    out = capsys.readouterr().out
    assert "Found 0 CUDA devices" in out and "no CUDA device" in out
    with pytest.raises(DeviceError, match="PYPTX_DEVICE=gpu but no usable GPU"):
        pyptx.devices()
