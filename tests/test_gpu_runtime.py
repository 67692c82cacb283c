"""The GPU path's robustness against the (honest) fake driver: the current context in other
threads, finalizers and other libraries' contexts; entries and parameters the PTX namer renamed;
cleanup that never stops half way; DLPack releases after the stream completes; the CAI `stream`
key; foreign-device pointers; fork; the driver's per-function limits; freed arrays; `stream=`
validation; stream/event destruction; the bindings/driver version check."""
import gc
import os
import sys
import threading

import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import f32, i32
from pyptx.errors import DeviceError, LaunchError
from pyptx.runtime import driver, driver_memory, streams

from fake_driver import (FakeCompiler, FakeDriver, hand_compiled, idle_in_pool, in_forked_child,
                         on_fake_gpu)

rng = np.random.default_rng(2024)


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@pyptx.kernel
def scale(out: f32[:], x: f32[:], a: f32, n: i32):
    pass


SCALE = [("out", "array", f32, 1, True), ("x", "array", f32, 1, False),
         ("a", "scalar", f32, 0, False), ("n", "scalar", i32, 0, False)]


def scale_body(fake, launch):
    p = launch.params
    x = fake.view(p["x"], np.float32, p["x_shape0"])
    out = fake.view(p["out"], np.float32, p["out_shape0"])
    out[:] = x * np.float32(p["a"])


def use_scale(monkeypatch, fake, body=""):
    ck = hand_compiled("scale", SCALE, body=body)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", FakeCompiler(lambda k, cx, t: ck))
    fake.bodies["scale"] = scale_body
    return ck


def in_thread(fn):
    """Run fn in a fresh thread; re-raise what it raised."""
    box = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            box.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if box:
        raise box[0]


# ---- the current context ----------------------------------------------------------------------

def test_fake_refuses_calls_without_a_current_context():
    fd = FakeDriver()
    fd.cuInit(0)
    assert fd.cuMemAlloc(64)[0] == fd.CUresult.CUDA_ERROR_INVALID_CONTEXT
    fd.cuCtxSetCurrent(fd.cuDevicePrimaryCtxRetain(0)[1])
    assert fd.cuMemAlloc(64)[0] == fd.CUresult.CUDA_SUCCESS
    box = []
    in_thread(lambda: box.append(fd.cuMemAlloc(64)[0]))       # current context is per thread
    assert box == [fd.CUresult.CUDA_ERROR_INVALID_CONTEXT]


def test_second_thread_copies_launches_and_frees(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    host = rng.standard_normal(64).astype(np.float32)
    d = pyptx.to_device(host)
    out = pyptx.to_device(np.full(64, np.nan, np.float32))
    got = {}

    def work():
        got["copy"] = d.copy_to_host()
        scale[1, 64](out, d, 2.0, 64)
        got["out"] = out.copy_to_host()
        tmp = pyptx.to_device(host)
        tmp.free()
    in_thread(work)
    np.testing.assert_array_equal(got["copy"], host)
    np.testing.assert_array_equal(got["out"], host * np.float32(2.0))


def test_finalizer_in_another_thread_frees_and_never_raises(fake):
    d = pyptx.to_device(rng.standard_normal(32).astype(np.float32))
    ptr = d.device_pointer
    box = [d]
    del d
    unraisable = []
    old = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        in_thread(lambda: (box.clear(), gc.collect()))
        assert idle_in_pool(ptr)                            # released from the other thread
        e = pyptx.to_device(np.ones(4, np.float32))
        pool = driver.context().pool

        def broken(*a):
            raise RuntimeError("the pool is broken")
        pool.give_back = broken
        del e
        gc.collect()                                        # a failing release: still silent
        del pool.give_back
    finally:
        sys.unraisablehook = old
    assert unraisable == []


def test_other_librarys_context_is_respected_and_restored(fake, monkeypatch):
    fake.devices = 2
    fake.contexts.add(0xC7001)
    use_scale(monkeypatch, fake)
    x = pyptx.to_device(rng.standard_normal(16).astype(np.float32))
    out = pyptx.to_device(np.full(16, np.nan, np.float32))
    scale[1, 16](out, x, 1.0, 16)                  # module loaded in pyptx's context
    fake.cuCtxPushCurrent(0xC7001)                 # e.g. CuPy made device 1 current
    scale[1, 16](out, x, 3.0, 16)                  # must run in pyptx's context anyway
    assert fake.current() == 0xC7001               # ... and leave the other one current
    fake.cuCtxPopCurrent()
    np.testing.assert_array_equal(out.copy_to_host(), x.copy_to_host() * np.float32(3.0))


# ---- names the PTX namer changed ----------------------------------------------------------------

def _renamed_kernels():
    import renamed_kernels as rk
    return rk.ядро, rk.param0


def test_renamed_entry_and_params_on_the_cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    k_ru, k_p0 = _renamed_kernels()
    ck = pyptx.compile(k_ru)
    assert f".entry {ck.name}(" in ck.ptx and k_ru.name == ck.name and ck.name.isascii()
    x = rng.standard_normal(40).astype(np.float32)
    out = np.full_like(x, np.nan)
    k_ru[1, 64](out, x, 40)
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    assert [p.name for p in pyptx.compile(k_p0).params][:2] != ["param0", "param0_shape0"]
    out = np.full_like(x, np.nan)
    k_p0[1, 64](out, x, 40)
    np.testing.assert_array_equal(out, x + np.float32(1.0))


def test_renamed_entry_and_params_on_the_gpu(fake):
    k_ru, k_p0 = _renamed_kernels()
    x = rng.standard_normal(40).astype(np.float32)
    for k in (k_ru, k_p0):
        out = np.full_like(x, np.nan)
        k[1, 64](out, x, 40)                  # finds the entry, packs pointers by position
        launch = fake.launches[-1]
        assert launch.entry == k.name
        names = [p.name for p in pyptx.compile(k, arch="sm_80").params]
        assert launch.params[names[0]] in fake.memory or launch.params[names[0]] >= 0x7F00_0000_0000
        assert launch.params[names[1]] == 40 and launch.params[names[4]] == 40


# ---- cleanup -------------------------------------------------------------------------------------

def test_cached_buffers_are_all_freed_even_when_one_free_fails(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    x = rng.standard_normal(8).astype(np.float32)
    y = rng.standard_normal(3000).astype(np.float32)
    scale[1, 8](np.empty_like(x), x, 2.0, 8)
    scale[1, 8](np.empty_like(y), y, 2.0, 8)
    assert len(fake.memory) == 4
    fake.fail["cuMemFree"] = fake.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(DeviceError):
        driver_memory.free_cached_memory()
    assert fake.count("cuMemFree") == 4        # every buffer tried, not only the first


def test_failed_staging_returns_every_buffer_and_releases_dlpack(fake, monkeypatch):
    from pyptx.runtime import dlpack
    use_scale(monkeypatch, fake)

    class Capsule:
        def __init__(self, d):
            self.d = d

        def __dlpack__(self, stream=None, max_version=None, **kw):
            return self.d.__dlpack__(stream=-1, max_version=max_version)

        def __dlpack_device__(self):
            return self.d.__dlpack_device__()
    d = pyptx.to_device(rng.standard_normal(8).astype(np.float32))
    n0 = dlpack.live_exports()
    used0 = driver.context().pool.in_use_bytes          # d's own buffer
    fake.fail["cuMemcpyHtoDAsync"] = fake.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(DeviceError):
        scale[1, 8](Capsule(d), np.ones(8, np.float32), 1.0, 8)
    assert driver.context().pool.in_use_bytes == used0 and dlpack.live_exports() == n0
    assert fake.count("cuLaunchKernel") == 0


def test_dlpack_released_only_after_the_stream_completes(fake, monkeypatch):
    from pyptx.runtime import dlpack
    use_scale(monkeypatch, fake)

    class Capsule:
        def __init__(self, d):
            self.d = d

        def __dlpack__(self, stream=None, max_version=None, **kw):
            return self.d.__dlpack__(stream=-1, max_version=max_version)
    d = pyptx.to_device(rng.standard_normal(8).astype(np.float32))
    out = pyptx.to_device(np.full(8, np.nan, np.float32))
    n0 = dlpack.live_exports()
    s = streams.Stream()
    scale[1, 8](out, Capsule(d), 1.0, 8, stream=s)
    assert dlpack.live_exports() == n0 + 1 and not fake.launches[-1].done
    scale[1, 8](out, d, 1.0, 8, stream=s)           # still queued: still held
    assert dlpack.live_exports() == n0 + 1
    s.synchronize()
    assert dlpack.live_exports() == n0


# ---- __cuda_array_interface__: stream and device -------------------------------------------------

class CaiArray:
    def __init__(self, ptr, n, stream=None):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": stream}


def test_cai_stream_is_waited_on(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    ctx = driver.context()
    producer = streams.Stream()
    mine = streams.Stream()
    px = ctx.call("alloc", fake.cuMemAlloc, 32)
    po = ctx.call("alloc", fake.cuMemAlloc, 32)
    scale[1, 8](CaiArray(po, 8), CaiArray(px, 8, stream=int(producer.handle)), 1.0, 8, stream=mine)
    rec = [c for c in fake.calls if c[0] in ("cuEventRecord", "cuStreamWaitEvent")]
    assert rec[0][0] == "cuEventRecord" and rec[0][1][1] == int(producer.handle)
    assert rec[1][0] == "cuStreamWaitEvent" and rec[1][1][0] == int(mine.handle)
    assert rec[0][1][0] == rec[1][1][1]                  # the same event
    n = len(fake.calls)
    scale[1, 8](CaiArray(po, 8), CaiArray(px, 8, stream=int(mine.handle)), 1.0, 8, stream=mine)
    assert not [c for c in fake.calls[n:] if c[0] == "cuStreamWaitEvent"]   # same stream
    with pytest.raises(LaunchError, match="'x'.*stream 0"):
        scale[1, 8](CaiArray(po, 8), CaiArray(px, 8, stream=0), 1.0, 8)


def test_pointers_of_another_device_are_rejected(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    driver.context()
    fake.foreign[0x6000_0000_0000] = (1, 1 << 20)
    po = driver.context().call("alloc", fake.cuMemAlloc, 32)
    with pytest.raises(LaunchError, match="'x'.*CUDA device 1"):
        scale[1, 8](CaiArray(po, 8), CaiArray(0x6000_0000_0000, 8), 1.0, 8)
    with pytest.raises(LaunchError, match="'x'.*does not know"):
        scale[1, 8](CaiArray(po, 8), CaiArray(0x1234_0000, 8), 1.0, 8)
    assert fake.count("cuLaunchKernel") == 0


# ---- fork -----------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_forked_child_gets_a_clear_error(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    d = pyptx.to_device(np.ones(4, np.float32))
    scale[1, 4](d, d, 1.0, 4)                        # the parent has a loaded launcher
    def child():
        try:
            scale[1, 4](d, d, 1.0, 4)
            return "no error"
        except DeviceError as e:
            return str(e)
        finally:
            d.free()                                 # must not touch the parent's memory
    msg = in_forked_child(child)
    assert "forked" in msg and "spawn" in msg
    assert d.device_pointer in fake.memory           # the parent's array is intact
    np.testing.assert_array_equal(d.copy_to_host(), np.ones(4, np.float32))


# ---- the driver's own limits for a function ----------------------------------------------------------

def test_block_over_the_register_limited_maximum(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    fake.max_threads["scale"] = 256
    x = pyptx.to_device(np.ones(512, np.float32))
    with pytest.raises(LaunchError, match="at most 256 threads"):
        scale[1, 512](x, x, 1.0, 512)
    assert fake.count("cuLaunchKernel") == 0
    scale[2, 256](x, x, 1.0, 512)


def test_static_shared_memory_as_the_driver_counts_it(fake, monkeypatch):
    # a 2-d declaration the PTX regex undercounts (12 bytes); ptxas (the fake's JIT) says 48 KiB
    use_scale(monkeypatch, fake, body="    .shared .align 4 .b8 tile[12][4096];\n")
    x = pyptx.to_device(np.ones(8, np.float32))
    with pytest.raises(LaunchError, match="49152 bytes of static shared"):
        scale[1, 8](x, x, 1.0, 8, shared_mem=120 * 1024)    # 168 KiB > sm_80's 163
    assert fake.count("cuLaunchKernel") == 0
    scale[1, 8](x, x, 1.0, 8, shared_mem=4096)


# ---- freed arrays, stream=, handles ----------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_freed_device_array_is_a_launch_error(fake, monkeypatch, device):
    monkeypatch.setenv("PYPTX_DEVICE", device)
    use_scale(monkeypatch, fake)
    if device == "cpu":
        from pyptx.runtime import cpu as cpu_pkg
        monkeypatch.setattr(cpu_pkg, "launch", lambda *a: None)
    x = pyptx.to_device(np.ones(8, np.float32))
    out = pyptx.to_device(np.ones(8, np.float32))
    x.free()
    with pytest.raises(LaunchError, match="'x'.*freed"):
        scale[1, 8](out, x, 1.0, 8)
    with pytest.raises(ValueError, match="freed"):
        x.copy_to_host()
    assert fake.count("cuLaunchKernel") == 0


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("bad", ["0", 1.5, -1, True, object()])
def test_malformed_stream_is_a_launch_error(fake, monkeypatch, device, bad):
    monkeypatch.setenv("PYPTX_DEVICE", device)
    use_scale(monkeypatch, fake)
    x = np.ones(8, np.float32)
    with pytest.raises(LaunchError, match="stream"):
        scale[1, 8](np.empty_like(x), x, 1.0, 8, stream=bad)
    assert fake.count("cuLaunchKernel") == 0 and fake.count("cuMemAlloc") == 0


def test_closed_stream_is_a_launch_error(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    s = streams.Stream()
    s.close()
    x = np.ones(8, np.float32)
    with pytest.raises(LaunchError, match="closed"):
        scale[1, 8](np.empty_like(x), x, 1.0, 8, stream=s)


def test_streams_and_events_are_destroyed(fake):
    s, e = streams.Stream(), streams.Event()
    hs, he = s.handle, e.handle
    del s, e
    gc.collect()
    assert ("cuStreamDestroy", (hs,)) in fake.calls and ("cuEventDestroy", (he,)) in fake.calls
    assert int(hs) not in fake.streams and he not in fake.events


def test_bindings_newer_than_the_driver_are_refused(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(FakeDriver(version=12080, bindings_version="13.0.2"))
    try:
        with pytest.raises(DeviceError, match=r"cuda-python 13\.0\.2 needs a CUDA 13\.x driver.*"
                                              r"CUDA 12\.8") as ei:
            driver.context()
        assert ei.value.error_name == "CUDA_ERROR_INSUFFICIENT_DRIVER"
    finally:
        driver.set_driver(prev)


# ---- the fake behaves like a GPU where it matters --------------------------------------------------

def test_fake_kernels_are_asynchronous_and_launches_validated(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    x = pyptx.to_device(rng.standard_normal(8).astype(np.float32))
    out = pyptx.to_device(np.full(8, np.nan, np.float32))
    scale[1, 8](out, x, 2.0, 8)
    assert np.isnan(fake.view(out.device_pointer, np.float32, 8)).all()   # not run yet
    np.testing.assert_array_equal(out.copy_to_host(), x.copy_to_host() * np.float32(2.0))
    fn = driver.context().functions[(scale_ck(fake), "scale")].handle
    ctx = driver.context()
    pushed = ctx.enter()
    try:
        R = fake.CUresult
        assert fake.cuLaunchKernel(fn, 1, 1, 1, 1025, 1, 1, 0, 0, 0, 0)[0] == \
            R.CUDA_ERROR_INVALID_VALUE
        assert fake.cuLaunchKernel(fn, 1, 65536, 1, 1, 1, 1, 0, 0, 0, 0)[0] == \
            R.CUDA_ERROR_INVALID_VALUE
    finally:
        ctx.leave(pushed)


def scale_ck(fake):
    return next(ptx for ptx, entry in driver.context().functions if entry == "scale")


def test_fake_jit_runs_ptxas(fake):
    from pyptx.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    bad = (".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n"
           "    .reg .b32 %r<2>;\n    mov.u32 %r2, 1;\n    ret;\n}\n")
    with pytest.raises(DeviceError) as ei:
        driver.context().function(bad, "k")
    assert ei.value.error_name == "CUDA_ERROR_INVALID_PTX" and "%r2" in ei.value.jit_log


# ---- the real bindings accept every argument pyptx passes --------------------------------------------

def _real_library_loadable() -> bool:
    import cuda.bindings.driver as real
    try:
        real.cuDriverGetVersion()
        return True
    except Exception:  # noqa: BLE001 - DynamicLibNotFoundError: no libcuda here
        return False


@pytest.mark.skipif("_real_library_loadable()", reason="replaying fake handles on a real driver "
                                                       "is unsafe")
def test_real_bindings_accept_the_arguments_pyptx_passes(fake, monkeypatch):
    """Without a GPU the real cuda.bindings still convert (and so type-check) every argument
    before looking for libcuda: replay every call pyptx made to the fake against them."""
    import cuda.bindings.driver as real
    from cuda.pathfinder import DynamicLibNotFoundError
    use_scale(monkeypatch, fake, body="    .shared .align 16 .b8 tile[1024];\n")
    x = rng.standard_normal(16).astype(np.float32)
    d = pyptx.to_device(x)
    s = streams.Stream()
    e0, e1 = streams.Event(), streams.Event()
    e0.record(s)
    scale[1, 16](np.empty_like(x), x, 2.0, 16, stream=s, shared_mem=60 * 1024)
    scale[1, 16](d, d, 2.0, 16)
    po = int(driver.context().call("alloc", fake.cuMemAlloc, 64))
    scale[1, 16](CaiArray(po, 16), CaiArray(d.device_pointer, 16, stream=int(s.handle)), 1.0, 16)
    e1.record(s)
    e1.elapsed_ms(e0)
    d.copy_from_host(x)
    d.copy_to_host()
    d.free()
    streams.synchronize()
    driver_memory.free_cached_memory()
    with pytest.raises(DeviceError):
        driver.context().function(".version 7.0\n.target sm_75\n.address_size 64\n"
                                  ".visible .entry k()\n{\n bogus;\n}\n", "k")
    del s, e0, e1
    gc.collect()
    names = {name for name, _ in fake.calls}
    assert {"cuLaunchKernel", "cuMemcpyHtoDAsync", "cuStreamWaitEvent", "cuPointerGetAttribute",
            "cuFuncSetAttribute", "cuFuncGetAttribute", "cuModuleLoadDataEx", "cuEventDestroy",
            "cuStreamDestroy", "cuCtxGetCurrent", "cuMemFree"} <= names
    bad = []
    for name, args in fake.calls:
        try:
            getattr(real, name)(*args)
        except DynamicLibNotFoundError:
            pass                                  # converted fine, then found no libcuda
        except Exception as err:  # noqa: BLE001
            bad.append(f"{name}{args!r}: {type(err).__name__}: {err}")
    assert not bad, "\n".join(bad)


def test_pool_frees_its_cache_and_retries_when_out_of_memory(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    small = rng.standard_normal(8).astype(np.float32)
    scale[1, 8](np.empty_like(small), small, 2.0, 8)          # leaves 2 buffers cached
    assert len(fake.memory) == 2
    big = rng.standard_normal(4096).astype(np.float32)
    out = np.full_like(big, np.nan)
    fake.fail["cuMemAlloc"] = [fake.CUresult.CUDA_ERROR_OUT_OF_MEMORY]
    scale[1, 8](out, big, 2.0, 4096)
    assert fake.count("cuMemFree") == 2                       # the cache went back first
    np.testing.assert_array_equal(out, big * np.float32(2.0))


def test_fake_kernel_fault_is_sticky_like_a_gpu(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    x = pyptx.to_device(rng.standard_normal(8).astype(np.float32))
    out = pyptx.to_device(np.full(8, np.nan, np.float32))
    fake.bodies["scale"] = lambda fk, ln: fk.view(ln.params["x"], np.float32, 10 ** 6)
    scale[1, 8](out, x, 1.0, 8)                # queued fine; the fault shows at the wait
    with pytest.raises(DeviceError) as ei:
        streams.synchronize()
    assert ei.value.error_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    with pytest.raises(DeviceError, match="ILLEGAL_ADDRESS"):
        scale[1, 8](out, x, 1.0, 8)            # the context stays broken, as on a GPU


# ---- on a real GPU (skipped without one; passed on an H100, 2026-11-26) ----------------------------

def _real_gpu_present() -> bool:
    prev = driver.set_driver(None)
    try:
        return driver.probe() is None
    finally:
        driver.set_driver(prev)


@pytest.mark.gpu
@pytest.mark.skipif("not _real_gpu_present()", reason="no CUDA GPU")
def test_real_gpu_renamed_kernel_threads_streams(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(None)
    try:
        k_ru, k_p0 = _renamed_kernels()
        x = rng.standard_normal(1000).astype(np.float32)
        dx, dout = pyptx.to_device(x), pyptx.to_device(np.full_like(x, np.nan))
        in_thread(lambda: k_ru[4, 256](dout, dx, 1000))         # launched from another thread
        np.testing.assert_array_equal(dout.copy_to_host(), x * np.float32(2.0))
        s = streams.Stream()
        out = np.full_like(x, np.nan)
        k_p0[4, 256](out, x, 1000, stream=s)                    # numpy through the pool
        np.testing.assert_array_equal(out, x + np.float32(1.0))
        box = [dx]
        del dx
        in_thread(lambda: (box.clear(), gc.collect()))           # freed from another thread
        s.close()
        driver_memory.free_cached_memory()
    finally:
        driver.set_driver(prev)
