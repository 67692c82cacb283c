"""pyptx/runtime/driver.py + gpu.py against the fake driver (tests/fake_driver.py): parameter
packing byte layout, CUresult → DeviceError translation, JIT logs, module cache, shared-memory
opt-in, copies in and out, DeviceArray, `__cuda_array_interface__` objects, streams and events.
"""
import gc
import struct

import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import bool_, f16, f32, f64, i8, i32, i64, u16, u64
from pyptx.errors import DeviceError, LaunchError
from pyptx.runtime import driver, driver_memory, param_packer, streams

from fake_driver import FakeCompiler, FakeDriver, hand_compiled, idle_in_pool, on_fake_gpu

rng = np.random.default_rng(99)


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


def use_compiled(monkeypatch, *compiled):
    """Launching kernel `k` returns the hand-built CompiledKernel of the same name."""
    table = {c.name: c for c in compiled}
    fc = FakeCompiler(lambda k, cx, types: table[k.name])
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", fc)
    return fc


# ---- packing ------------------------------------------------------------------------------

MIXED = [("x", "array", f32, 2, True), ("flag", "scalar", bool_, 0, False),
         ("d", "scalar", f64, 0, False), ("c", "scalar", i8, 0, False),
         ("h", "scalar", f16, 0, False), ("n", "scalar", i32, 0, False),
         ("w", "scalar", u16, 0, False), ("q", "scalar", i64, 0, False),
         ("p", "scalar", u64, 0, False)]


@pyptx.kernel
def mixed(x: f32[:, :], flag: bool_, d: f64, c: i8, h: f16, n: i32, w: u16, q: i64, p: u64):
    pass


def test_parameter_bytes_match_the_ptx_param_list(fake, monkeypatch):
    ck = hand_compiled("mixed", MIXED)
    use_compiled(monkeypatch, ck)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    vals = dict(flag=bool(rng.integers(2)), d=float(rng.standard_normal()),
                c=int(rng.integers(-128, 128)), h=float(rng.standard_normal()),
                n=int(rng.integers(-2**31, 2**31)), w=int(rng.integers(0, 2**16)),
                q=int(rng.integers(-2**63, 2**63)), p=int(rng.integers(0, 2**63)) * 2 + 1)
    mixed[2, 64](x, *vals.values())
    (launch,) = fake.launches
    sizes = {"u64": 8, "s32": 4, "u8": 1, "f64": 8, "s8": 1, "b16": 2, "u16": 2, "s64": 8}
    for p in ck.params:                       # every parameter: its size, natural alignment
        assert len(launch.raw[p.name]) == sizes[p.ptx_type]
        assert launch.pointers[p.name] % sizes[p.ptx_type] == 0
    spans = sorted((launch.pointers[p.name], sizes[p.ptx_type]) for p in ck.params)
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:]))   # no overlap
    got = launch.params
    assert got["x_shape0"] == 3 and got["x_shape1"] == 5
    assert got["x"] >= 0x7F00_0000_0000       # a (fake) device address, not a host one
    assert got["flag"] == int(vals["flag"]) and got["c"] == vals["c"]
    assert got["d"] == vals["d"] and got["n"] == vals["n"] and got["w"] == vals["w"]
    assert got["q"] == vals["q"] and got["p"] == vals["p"]
    assert launch.raw["h"] == np.float16(vals["h"]).tobytes()          # IEEE half bits
    assert launch.grid == (2, 1, 1) and launch.block == (64, 1, 1)


def test_packer_layout_is_computed_once_per_compiled_kernel(fake, monkeypatch):
    ck = hand_compiled("mixed", MIXED)
    use_compiled(monkeypatch, ck)
    x = np.ones((2, 2), np.float32)
    mixed[1, 1](x, True, 1.0, 1, 1.0, 1, 1, 1, 1)
    packer = ck.__dict__["_pyptx_gpu_launchers"][0].packer
    mixed[1, 1](x, False, 2.0, 2, 2.0, 2, 2, 2, 2)
    assert ck.__dict__["_pyptx_gpu_launchers"][0].packer is packer
    assert fake.launches[1].params["n"] == 2 and fake.launches[1].params["flag"] == 0


def test_packer_direct():
    from pyptx.compiler import KernelParam as P
    pk = param_packer.ParamPacker([P("a", "u8"), P("b", "f64"), P("c", "s16"), P("d", "s32")])
    assert pk.offsets == [0, 8, 16, 20]
    addr = pk.pack([200, -1.5, -3, 77])
    import ctypes
    ptrs = [ctypes.c_void_p.from_address(addr + 8 * i).value for i in range(4)]
    raw = [ctypes.string_at(p, n) for p, n in zip(ptrs, (1, 8, 2, 4))]
    assert raw == [struct.pack("<B", 200), struct.pack("<d", -1.5), struct.pack("<h", -3),
                   struct.pack("<i", 77)]


# ---- errors -------------------------------------------------------------------------------

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


@pytest.mark.parametrize("err", [
    "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_INVALID_VALUE",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_HANDLE", "CUDA_ERROR_UNKNOWN"])
def test_launch_failure_carries_the_error_name_and_frees_temporaries(fake, monkeypatch, err):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.fail["cuLaunchKernel"] = getattr(fake.CUresult, err)
    x = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(DeviceError) as ei:
        scale[1, 64](np.empty_like(x), x, 2.0, 64)
    assert ei.value.error_name == err and err in str(ei.value)
    assert driver.context().pool.in_use_bytes == 0      # staging buffers back in the pool
    driver_memory.free_cached_memory()
    assert fake.memory == {}


@pytest.mark.parametrize("call, err", [
    ("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY"),
    ("cuMemcpyHtoDAsync", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("cuMemcpyDtoHAsync", "CUDA_ERROR_LAUNCH_FAILED"),
    ("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND"),
    ("cuStreamSynchronize", "CUDA_ERROR_LAUNCH_TIMEOUT"),
    ("cuFuncGetAttribute", "CUDA_ERROR_INVALID_HANDLE"),
    ("cuDeviceGetAttribute", "CUDA_ERROR_INVALID_DEVICE"),
])
def test_every_driver_call_checks_its_result(fake, monkeypatch, call, err):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.fail[call] = getattr(fake.CUresult, err)
    x = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(DeviceError) as ei:
        scale[1, 8](np.empty_like(x), x, 2.0, 8)
    assert ei.value.error_name == err


def test_all_cuda_results_translate():
    fd = FakeDriver()
    for e in fd.CUresult:
        if e == fd.CUresult.CUDA_SUCCESS:
            assert driver.check((e, 5), "x", fd) == 5
            continue
        with pytest.raises(DeviceError) as ei:
            driver.check((e, None), "cuSomething", fd)
        assert ei.value.error_name == e.name and str(ei.value).startswith("cuSomething failed")


def test_jit_failure_raises_with_the_log(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.jit_log = "ptxas application ptx input, line 9; error   : Unknown symbol 'bogus'"
    x = np.ones(4, np.float32)
    with pytest.raises(DeviceError) as ei:
        scale[1, 4](np.empty_like(x), x, 1.0, 4)
    assert ei.value.error_name == "CUDA_ERROR_INVALID_PTX"
    assert "Unknown symbol 'bogus'" in ei.value.jit_log and "bogus" in str(ei.value)
    assert fake.count("cuLaunchKernel") == 0


def test_too_new_ptx_version_is_reported(monkeypatch):
    fd = FakeDriver(version=12040)
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    try:
        use_compiled(monkeypatch, hand_compiled("scale", SCALE, version="8.7"))
        with pytest.raises(DeviceError) as ei:
            scale[1, 4](np.ones(4, np.float32), np.ones(4, np.float32), 1.0, 4)
        assert ei.value.error_name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
        # caught before the JIT is asked, with what to do about it
        assert fd.count("cuModuleLoadDataEx") == 0 and "update the NVIDIA driver" in str(ei.value)
        from pyptx.runtime import profile
        assert profile.max_ptx_version() == "8.4"
    finally:
        driver.set_driver(prev)


# ---- caching, copies, shared memory -----------------------------------------------------------

def test_module_is_loaded_once_and_copies_follow_writability(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = rng.standard_normal(300).astype(np.float32)
    x_before = x.copy()
    for a in (2.0, -0.5):
        out = np.zeros_like(x)
        scale[2, 256](out, x, a, 300)
        np.testing.assert_array_equal(out, x_before * np.float32(a))
    assert np.array_equal(x, x_before)
    assert fake.count("cuModuleLoadDataEx") == 1 and fake.count("cuModuleGetFunction") == 1
    assert fake.count("cuMemcpyHtoDAsync") == 4 and fake.count("cuMemcpyDtoHAsync") == 2
    dtoh_src = [c[1][1] for c in fake.calls if c[0] == "cuMemcpyDtoHAsync"]
    out_ptrs = [ln.params["out"] for ln in fake.launches]
    assert dtoh_src == out_ptrs                # only the written array comes back
    # the second launch reused the first one's staging buffers: no allocation, no free
    assert fake.count("cuMemAlloc") == 2 and fake.count("cuMemFree") == 0
    assert fake.count("cuCtxSynchronize") == 0 and fake.count("cuStreamSynchronize") == 2
    driver_memory.free_cached_memory()
    assert fake.memory == {}


def test_same_array_twice_is_one_buffer(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = rng.standard_normal(16).astype(np.float32)
    expect = x * np.float32(3.0)
    scale[1, 16](x, x, 3.0, 16)
    np.testing.assert_array_equal(x, expect)
    assert fake.count("cuMemAlloc") == 1
    assert fake.launches[0].params["out"] == fake.launches[0].params["x"]


def test_dynamic_shared_memory_opt_in(fake, monkeypatch):
    body = "    .shared .align 16 .b8 tile[8192];\n"
    use_compiled(monkeypatch, hand_compiled("scale", SCALE, body=body))
    x = np.ones(4, np.float32)
    scale[1, 4](np.empty_like(x), x, 1.0, 4, shared_mem=40 * 1024)   # 48 KiB total: no opt-in
    assert fake.count("cuFuncSetAttribute") == 0
    scale[1, 4](np.empty_like(x), x, 1.0, 4, shared_mem=64 * 1024)
    scale[1, 4](np.empty_like(x), x, 1.0, 4, shared_mem=60 * 1024)   # already allowed
    (call,) = [c for c in fake.calls if c[0] == "cuFuncSetAttribute"]
    assert call[1][1].name == "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"
    assert call[1][2] == 64 * 1024
    assert [ln.shared for ln in fake.launches] == [40 * 1024, 64 * 1024, 60 * 1024]
    n_launches = fake.count("cuLaunchKernel")
    with pytest.raises(LaunchError, match="over the 166912-byte limit"):   # sm_80: 163 KiB
        scale[1, 4](np.empty_like(x), x, 1.0, 4, shared_mem=166912 - 8192 + 1)
    assert fake.count("cuLaunchKernel") == n_launches


# ---- resident memory ----------------------------------------------------------------------------

def test_device_array_round_trip_and_in_place_launch(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    host = rng.standard_normal(100).astype(np.float32)
    d = pyptx.to_device(host)
    assert d.shape == (100,) and d.dtype == np.float32 and d.size == 100 and d.on_gpu
    np.testing.assert_array_equal(d.copy_to_host(), host)
    cai = d.__cuda_array_interface__
    assert cai["data"][0] == d.device_pointer and cai["typestr"] == "<f4" and cai["shape"] == (100,)
    assert cai["stream"] == 1          # consumers order their work after pyptx's (CAI v3)
    out = pyptx.to_device(np.zeros(100, np.float32))
    copies = fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyDtoH")
    scale[1, 128](out, d, 4.0, 100)
    assert fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyDtoH") == copies   # in place
    assert fake.launches[0].params["x"] == d.device_pointer
    np.testing.assert_array_equal(out.copy_to_host(), host * np.float32(4.0))
    ptrs = {d.device_pointer, out.device_pointer}
    del d, out
    gc.collect()
    assert all(idle_in_pool(p) for p in ptrs)    # released to the pool when garbage-collected
    n = fake.count("cuMemAlloc")
    again = pyptx.to_device(host)                # the same size: a released buffer, no cuMemAlloc
    assert again.device_pointer in ptrs and fake.count("cuMemAlloc") == n
    driver_memory.free_cached_memory()                  # synchronises, then back to the driver
    assert not (ptrs - {again.device_pointer}) & set(fake.memory)


class ForeignGpuArray:
    """What CuPy/PyTorch/Numba arrays look like to pyptx."""

    def __init__(self, ptr, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def test_cuda_array_interface_objects_are_used_in_place(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    driver.context()
    n = 50
    xs = rng.standard_normal(n).astype(np.float32)
    px = int(fake.cuMemAlloc(4 * n)[1])
    po = int(fake.cuMemAlloc(4 * n)[1])
    fake.view(px, np.float32, n)[:] = xs
    scale[1, 64](ForeignGpuArray(po, (n,), "<f4", (4,)), ForeignGpuArray(px, (n,), "<f4"), 0.5, n)
    assert fake.launches[0].params["out"] == po and fake.launches[0].params["x"] == px
    assert not fake.launches[0].done           # asynchronous, like a CUDA launch
    streams.synchronize()
    np.testing.assert_array_equal(fake.view(po, np.float32, n), xs * np.float32(0.5))
    assert fake.count("cuMemcpyHtoD") == 0 and fake.count("cuMemcpyDtoH") == 0
    with pytest.raises(LaunchError, match="'x'.*non-contiguous"):
        scale[1, 64](ForeignGpuArray(po, (n,), "<f4"), ForeignGpuArray(px, (n // 2,), "<f4", (8,)),
                     0.5, n)
    with pytest.raises(LaunchError, match="'x'.*float64"):
        scale[1, 64](ForeignGpuArray(po, (n,), "<f4"), ForeignGpuArray(px, (n,), "<f8"), 0.5, n)


def test_streams_use_async_copies_and_synchronise(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    s = streams.Stream()
    x = rng.standard_normal(8).astype(np.float32)
    out = np.zeros_like(x)
    scale[1, 8](out, x, 2.0, 8, stream=s)
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    assert fake.count("cuMemcpyHtoDAsync") == 2 and fake.count("cuMemcpyDtoHAsync") == 1
    assert fake.launches[0].stream == int(s.handle)
    assert ("cuStreamSynchronize", (int(s.handle),)) in fake.calls
    e0, e1 = streams.Event(), streams.Event()
    e0.record(s)
    e1.record(s)
    assert e1.elapsed_ms(e0) > 0
    s.close()


def test_bad_arguments_fail_before_any_device_work(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    x = rng.standard_normal(8).astype(np.float32)
    bad_calls = [lambda: scale[1, 8](np.empty_like(x), x.astype(np.float64), 2.0, 8),
                 lambda: scale[1, 8](np.empty_like(x), x, 2.0, 2**31),
                 lambda: scale[1, 2048](np.empty_like(x), x, 2.0, 8),
                 lambda: scale[1, 8](np.empty_like(x), x[::2], 2.0, 8),
                 lambda: scale[1, 8](np.empty_like(x), x, 2.0),
                 lambda: scale[1, 8](np.empty_like(x), x, 2.0, 8, shared_mem=10**6)]
    for call in bad_calls:
        with pytest.raises(LaunchError):
            call()
    for name in ("cuMemAlloc", "cuMemcpyHtoD", "cuLaunchKernel", "cuModuleLoadDataEx"):
        assert fake.count(name) == 0
