"""DLPack both ways (pyptx/runtime/dlpack.py): `DeviceArray.__dlpack__` / `__dlpack_device__` as
a producer, and launch arguments that only expose `__dlpack__` used in place as a consumer.

CPU executor for real; the GPU path against the fake driver (tests/fake_driver.py)."""
import ctypes
import gc

import ml_dtypes
import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import f16, f32, i32
from pyptx.errors import LaunchError
from pyptx.runtime import dlpack, driver, streams

from fake_driver import FakeCompiler, FakeDriver, hand_compiled, idle_in_pool



rng = np.random.default_rng(2024)


class DLPackOnly:
    """Exposes nothing but the DLPack protocol, delegating to a numpy array (like a CPU tensor
    of a framework pyptx knows nothing about).  Records how it was called."""

    def __init__(self, arr, device=None):
        self.arr = arr
        self.device = device
        self.calls = []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        return self.arr.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.device or self.arr.__dlpack_device__()


class LegacyDLPackOnly(DLPackOnly):
    """A producer predating DLPack 1.0: `__dlpack__(stream=None)` only, legacy capsule."""

    def __dlpack__(self, stream=None):
        self.calls.append(dict(stream=stream))
        return self.arr.__dlpack__(stream=stream)


@pytest.fixture
def fake(monkeypatch):
    fd = FakeDriver()
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    yield fd
    gc.collect()
    driver.set_driver(prev)


# ---- producer on the CPU executor --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int16,
                                   np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                                   np.bool_])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_from_dlpack_is_a_zero_copy_view(cpu, dtype, shape):
    host = (rng.integers(0, 100, shape) % (2 if dtype is np.bool_ else 100)).astype(dtype)
    d = pyptx.to_device(host)
    assert d.__dlpack_device__() == (dlpack.kDLCPU, 0)
    before = dlpack.live_exports()
    v = np.from_dlpack(d)
    assert v.dtype == dtype and v.shape == shape
    assert v.ctypes.data == d._host.ctypes.data            # the DeviceArray's own buffer
    np.testing.assert_array_equal(v, host)
    v[(0,) * len(shape)] = not v[(0,) * len(shape)] if dtype is np.bool_ else 42
    np.testing.assert_array_equal(d.copy_to_host(), v)     # writes go to the DeviceArray
    assert dlpack.live_exports() == before + 1
    del v
    gc.collect()
    assert dlpack.live_exports() == before                 # numpy called the deleter


def test_capsule_names_versions_and_destructor(cpu):
    d = pyptx.to_device(np.arange(6, dtype=np.int32).reshape(2, 3))
    n0 = dlpack.live_exports()
    legacy = d.__dlpack__()
    versioned = d.__dlpack__(max_version=(1, 2))
    old = d.__dlpack__(max_version=(0, 8))
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    assert '"dltensor_versioned"' in repr(versioned)
    assert "versioned" not in repr(old)
    assert dlpack.live_exports() == n0 + 3
    del legacy, versioned, old                             # never consumed: destructor → deleter
    assert dlpack.live_exports() == n0


def test_exported_struct_layout(cpu):
    host = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    d = pyptx.to_device(host)
    cap = d.__dlpack__(max_version=(1, 0))
    t = dlpack.import_capsule(cap)
    assert "used_dltensor_versioned" in repr(cap)
    assert t.device == (1, 0) and t.shape == (2, 3, 4) and t.strides == (12, 4, 1)
    assert (t.code, t.bits, t.lanes) == (dlpack.kDLFloat, 16, 1) and t.dtype == np.float16
    assert t.data == d._host.ctypes.data and not t.read_only
    m = dlpack.DLManagedTensorVersioned.from_address(
        ctypes.pythonapi.PyCapsule_GetPointer(cap, b"used_dltensor_versioned"))
    assert (m.version.major, m.version.minor) == dlpack.VERSION and m.flags == 0
    n = dlpack.live_exports()
    del cap                              # consumed: the capsule's destructor must not delete
    assert dlpack.live_exports() == n
    t.release()
    t.release()                          # idempotent
    assert dlpack.live_exports() == n - 1


def test_dtype_codes():
    assert dlpack.dl_dtype(np.bool_) == (dlpack.kDLBool, 8, 1)
    assert dlpack.dl_dtype(np.int16) == (dlpack.kDLInt, 16, 1)
    assert dlpack.dl_dtype(np.uint32) == (dlpack.kDLUInt, 32, 1)
    assert dlpack.dl_dtype(np.float16) == (dlpack.kDLFloat, 16, 1)
    assert dlpack.np_dtype(dlpack.kDLBfloat, 16, 1) == ml_dtypes.bfloat16   # bf16 on the host
    assert dlpack.dl_dtype(ml_dtypes.bfloat16) == (dlpack.kDLBfloat, 16, 1)
    assert dlpack.np_dtype(dlpack.kDLBfloat, 32, 1) is None
    assert dlpack.np_dtype(dlpack.kDLFloat, 32, 4) is None


def test_copy_and_device_requests(cpu):
    d = pyptx.to_device(np.arange(5, dtype=np.float32))
    c = np.from_dlpack(d, copy=True)
    assert c.ctypes.data != d._host.ctypes.data
    c[0] = 99
    assert d.copy_to_host()[0] == 0
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(dlpack.kDLCUDA, 0))
    del c
    gc.collect()


# ---- consumer on the CPU executor --------------------------------------------------------------

@pyptx.kernel
def axpy_(out: f32[:], x: f32[:], a: f32, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = a * x[i] + out[i]


@pyptx.kernel
def bump2d(out: f16[:, :]):
    i = pyptx.thread_idx.x
    j = pyptx.thread_idx.y
    out[j, i] = out[j, i] + f16(1.0)


@pyptx.kernel
def add_one_untyped(out):
    i = pyptx.thread_idx.x
    out[i] = out[i] + 1


@pytest.mark.parametrize("wrapper", [DLPackOnly, LegacyDLPackOnly])
def test_dlpack_only_argument_is_written_in_place(cpu, wrapper):
    n = 100
    x = rng.standard_normal(n).astype(np.float32)
    out = rng.standard_normal(n).astype(np.float32)
    expect = np.float32(2.0) * x + out
    wo, wx = wrapper(out), wrapper(x)
    n0 = dlpack.live_exports()
    axpy_[1, 128](wo, wx, 2.0, n)
    np.testing.assert_allclose(out, expect, rtol=1e-6)     # the producer's memory, in place
    assert len(wo.calls) == 1 and wo.calls[0]["stream"] is None
    gc.collect()
    assert dlpack.live_exports() == n0


def test_dlpack_f16_2d_and_device_array_as_producer(cpu):
    host = np.arange(12, dtype=np.float16).reshape(3, 4)
    d = pyptx.to_device(host)
    bump2d[1, (4, 3)](DLPackOnly(np.from_dlpack(d)))       # pyptx → numpy → DLPack → pyptx
    np.testing.assert_array_equal(d.copy_to_host(), host + np.float16(1))


def test_dlpack_argument_for_an_unannotated_parameter(cpu):
    a = np.arange(8, dtype=np.int64)
    add_one_untyped[1, 8](DLPackOnly(a))
    np.testing.assert_array_equal(a, np.arange(1, 9))


def test_dlpack_mismatches_are_launch_errors(cpu):
    n = 16
    good = np.zeros(n, np.float32)
    n0 = dlpack.live_exports()
    with pytest.raises(LaunchError, match=r"'x'.*float64 with 1 dimension"):
        axpy_[1, 16](good, DLPackOnly(np.zeros(n, np.float64)), 1.0, n)
    with pytest.raises(LaunchError, match=r"'out'.*float32 with 2 dimensions"):
        axpy_[1, 16](DLPackOnly(np.zeros((4, 4), np.float32)), good, 1.0, n)
    strided = np.arange(2 * n, dtype=np.float32)
    axpy_[1, 16](good, DLPackOnly(strided[::2]), 1.0, n)    # strides travel with it (SPEC 8.5)
    np.testing.assert_array_equal(good, strided[::2])
    good[:] = 0
    ro = np.zeros(n, np.float32)
    ro.flags.writeable = False
    with pytest.raises(LaunchError, match=r"'out'.*read-only"):
        axpy_[1, 16](DLPackOnly(ro), good, 1.0, n)
    with pytest.raises(LaunchError, match=r"'x'.*kDLCUDA:0.*CPU executor.*host memory"):
        axpy_[1, 16](good, DLPackOnly(good, device=(dlpack.kDLCUDA, 0)), 1.0, n)
    gc.collect()
    assert dlpack.live_exports() == n0


# ---- GPU path with the fake driver -------------------------------------------------------------

SCALE = [("out", "array", f32, 1, True), ("x", "array", f32, 1, False),
         ("a", "scalar", f32, 0, False), ("n", "scalar", i32, 0, False)]


@pyptx.kernel
def scale(out: f32[:], x: f32[:], a: f32, n: i32):
    pass


def scale_body(fake, launch):
    p = launch.params
    x = fake.view(p["x"], np.float32, p["x_shape0"])
    out = fake.view(p["out"], np.float32, p["out_shape0"])
    out[:] = x * np.float32(p["a"])


def use_scale(monkeypatch, fake):
    ck = hand_compiled("scale", SCALE)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", FakeCompiler(lambda k, cx, t: ck))
    fake.bodies["scale"] = scale_body


class Capsules:
    """A GPU DLPack producer that hands out capsules made by a DeviceArray (with the stream
    argument it was given recorded), without exposing the DeviceArray itself."""

    def __init__(self, d):
        self.d = d
        self.streams = []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        return self.d.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.d.__dlpack_device__()


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_gpu_capsule_round_trip(fake, max_version):
    host = rng.standard_normal((4, 5)).astype(np.float32)
    d = pyptx.to_device(host)
    assert d.__dlpack_device__() == (dlpack.kDLCUDA, 0)
    n0 = dlpack.live_exports()
    syncs = fake.count("cuCtxSynchronize")
    cap = d.__dlpack__(stream=1, max_version=max_version)
    assert fake.count("cuCtxSynchronize") == syncs + 1      # pending work done for the consumer
    t = dlpack.import_capsule(cap)
    assert t.data == d.device_pointer and t.shape == (4, 5) and t.dtype == np.float32
    assert t.device == (dlpack.kDLCUDA, 0) and t.is_c_contiguous()
    assert dlpack.live_exports() == n0 + 1
    ptr = d.device_pointer
    del d, cap
    gc.collect()
    assert not idle_in_pool(ptr)             # the capsule's tensor keeps the memory alive
    t.release()
    gc.collect()
    assert dlpack.live_exports() == n0 and idle_in_pool(ptr)        # deleter ran exactly once
    t.release()
    assert dlpack.live_exports() == n0


def test_gpu_unconsumed_capsule_runs_the_deleter_once(fake):
    d = pyptx.to_device(np.ones(8, np.float32))
    n0 = dlpack.live_exports()
    cap = d.__dlpack__(stream=-1, max_version=(1, 0))
    syncs = fake.count("cuCtxSynchronize")
    assert dlpack.live_exports() == n0 + 1
    ptr = d.device_pointer
    del d
    gc.collect()
    assert not idle_in_pool(ptr)
    del cap
    gc.collect()
    assert dlpack.live_exports() == n0 and idle_in_pool(ptr)
    assert fake.count("cuCtxSynchronize") == syncs           # stream=-1: no synchronisation
    with pytest.raises(ValueError, match="stream=0"):
        pyptx.to_device(np.ones(2, np.float32)).__dlpack__(stream=0)


def test_gpu_dlpack_to_host_copy(fake):
    host = np.arange(6, dtype=np.int32)
    d = pyptx.to_device(host)
    v = np.from_dlpack(d, device="cpu", copy=True)           # asks for dl_device=(kDLCPU, 0)
    np.testing.assert_array_equal(v, host)
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(dlpack.kDLCPU, 0), copy=False)


def test_gpu_launch_with_a_dlpack_argument(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    n = 40
    xs = rng.standard_normal(n).astype(np.float32)
    dx, dout = pyptx.to_device(xs), pyptx.to_device(np.zeros(n, np.float32))
    px, pout = Capsules(dx), Capsules(dout)
    n0 = dlpack.live_exports()
    copies = fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyDtoH")
    scale[1, 64](pout, px, 3.0, n)
    (launch,) = fake.launches
    assert launch.params["x"] == dx.device_pointer and launch.params["out"] == dout.device_pointer
    assert launch.params["x_shape0"] == n
    assert fake.count("cuMemcpyHtoD") + fake.count("cuMemcpyDtoH") == copies    # in place
    assert dlpack.live_exports() == n0 + 2                  # the kernel may still read them
    streams.synchronize()
    assert dlpack.live_exports() == n0                      # deleters ran once it finished
    np.testing.assert_array_equal(dout.copy_to_host(), xs * np.float32(3.0))
    assert px.streams == [1] and pout.streams == [1]        # legacy default stream
    s = streams.Stream()
    scale[1, 64](pout, px, 1.0, n, stream=s)
    assert px.streams[-1] == int(s.handle) and fake.launches[-1].stream == int(s.handle)
    s.close()


def test_gpu_dlpack_mismatches(fake, monkeypatch):
    use_scale(monkeypatch, fake)
    n = 8
    out = pyptx.to_device(np.zeros(n, np.float32))
    n0 = dlpack.live_exports()
    with pytest.raises(LaunchError, match=r"'x'.*float64 with 1 dimension"):
        scale[1, 8](out, Capsules(pyptx.to_device(np.zeros(n, np.float64))), 1.0, n)
    with pytest.raises(LaunchError, match=r"'x'.*2 dimensions"):
        scale[1, 8](out, Capsules(pyptx.to_device(np.zeros((2, 4), np.float32))), 1.0, n)
    with pytest.raises(LaunchError, match=r"'x'.*kDLCPU.*launches run on the GPU.*np.from_dlpack"):
        scale[1, 8](out, DLPackOnly(np.zeros(n, np.float32)), 1.0, n)
    with pytest.raises(LaunchError, match=r"'x'.*kDLCUDA:1.*device 0"):
        scale[1, 8](out, DLPackOnly(np.zeros(n, np.float32), device=(dlpack.kDLCUDA, 1)), 1.0, n)
    assert fake.count("cuLaunchKernel") == 0
    gc.collect()
    assert dlpack.live_exports() == n0


# ---- optional: a real framework ---------------------------------------------------------------

def test_torch_cpu_tensor_in_place(cpu):
    torch = pytest.importorskip("torch")
    t = torch.arange(10, dtype=torch.int64)
    add_one_untyped[1, 10](t)
    assert t.tolist() == list(range(1, 11))
    d = pyptx.to_device(np.arange(4, dtype=np.float32))
    v = torch.from_dlpack(d)
    v += 1
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(1, 5, dtype=np.float32))


@pyptx.kernel
def bf16_double(x: pyptx.bf16[:]):
    i = pyptx.grid(1)
    if i < len(x):
        x[i] = pyptx.bf16(f32(x[i]) * 2.0)


def test_bfloat16_travels_as_kDLBfloat_both_ways(cpu):
    """A torch bfloat16 tensor is a kDLBfloat tensor: a bf16[:] parameter takes it (and an
    ml_dtypes array, and the documented uint16 bit patterns), and a bfloat16 DeviceArray exports
    as kDLBfloat, so torch sees bfloat16, not uint16."""
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -2.0, 3.0], dtype=torch.bfloat16)
    bf16_double[1, 32](t)
    assert t.tolist() == [3.0, -4.0, 6.0]
    a = np.array([1.0, 0.25], ml_dtypes.bfloat16)
    bf16_double[1, 32](a)
    assert a.astype(np.float32).tolist() == [2.0, 0.5]
    bits = a.view(np.uint16).copy()
    bf16_double[1, 32](bits)
    assert bits.view(ml_dtypes.bfloat16).astype(np.float32).tolist() == [4.0, 1.0]
    d = pyptx.to_device(a)
    assert d.dtype == ml_dtypes.bfloat16
    bf16_double[1, 32](d)
    back = torch.from_dlpack(d)
    assert back.dtype == torch.bfloat16 and back.tolist() == [4.0, 1.0]
    with pytest.raises(LaunchError, match="bfloat16 or uint16 array"):
        bf16_double[1, 32](np.zeros(2, np.float16))
