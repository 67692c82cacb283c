"""The stdlib's array layer (stdlib_kernels/_args.py) itself: which objects it converts and how,
what comes back, streams and CPU scopes, and the errors — independent of any one kernel.

"Foreign" producers here are small stand-ins with only the protocol under test (a DLPack or
`__cuda_array_interface__` object from an unknown library), so each protocol path is exercised
on its own; torch CPU tensors check the real framework.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from pyptx.runtime.launch import launch_scope

from test_capture_rules import fake  # noqa: F401  (fixture: the fake GPU; `cpu` is conftest's)

torch = pytest.importorskip("torch", reason="torch is a test extra (pip install torch==2.13.0)")




class HostDLPack:
    """A host array from an unknown library that speaks DLPack only; counts exports."""

    def __init__(self, a: np.ndarray):
        self.a, self.exports = a, 0

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        self.exports += 1
        return self.a.__dlpack__(**kw)


class DeviceCAI:
    """Device memory from an unknown library: `__cuda_array_interface__` only."""

    def __init__(self, d: pyptx.DeviceArray, stream=None, strides=None):
        self.d, self.stream, self.strides = d, stream, strides

    @property
    def __cuda_array_interface__(self):
        cai = dict(self.d.__cuda_array_interface__)
        cai["stream"], cai["strides"] = self.stream, self.strides
        return cai


def _x():
    return np.random.default_rng(3).standard_normal((4, 40)).astype(np.float32)


def test_a_dlpack_host_array_is_read_once_without_a_copy_and_numpy_comes_back(cpu):
    x = _x()
    src = HostDLPack(x)
    got = sk.softmax(src)
    assert src.exports == 1                       # one capsule, consumed once
    assert type(got) is np.ndarray                # an unknown host producer: numpy back
    np.testing.assert_array_equal(got, sk.softmax(x))


def test_torch_inputs_mixed_with_numpy_give_torch_when_torch_comes_first(cpu):
    x, w = _x(), np.linspace(0.5, 2, 40, dtype=np.float32)
    got = sk.rmsnorm(torch.from_numpy(x), w)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), sk.rmsnorm(x, w))
    assert type(sk.rmsnorm(x, torch.from_numpy(w))) is np.ndarray   # the first array decides


def test_strided_and_read_only_torch_inputs_are_read_in_place(cpu):
    x = _x()
    t = torch.from_numpy(x).t()                    # a transposed (non-contiguous) view
    np.testing.assert_array_equal(sk.softmax(t).numpy(), sk.softmax(np.ascontiguousarray(x.T)))
    ro = x.copy()
    ro.flags.writeable = False                     # inputs may be read-only
    np.testing.assert_array_equal(sk.softmax(ro), sk.softmax(x))


def test_a_read_only_or_strided_out_is_refused_naming_out(cpu):
    x = _x()
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        sk.softmax(x, out=ro)
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        sk.softmax(x, out=np.empty((40, 4), np.float32).T)
    with pytest.raises(TypeError, match="out must be an array"):
        sk.softmax(x, out=[0.0] * 160)


def test_framework_errors_name_the_argument(cpu):
    with pytest.raises(TypeError, match=r"softmax: x: could not read .*detach"):
        sk.softmax(torch.zeros(3, 4, requires_grad=True))
    with pytest.raises(TypeError, match=r"softmax: x must be float32, got float64.*x\.float\(\)"):
        sk.softmax(torch.zeros(3, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"rmsnorm: weight must be float32, got int64"):
        sk.rmsnorm(torch.zeros(3, 4), torch.zeros(4, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"softmax: x must be a float32 array \(numpy, "):
        sk.softmax([[1.0, 2.0]])


def test_a_gpu_array_on_the_cpu_executor_is_an_error_naming_it(cpu, monkeypatch):
    class CudaLike(HostDLPack):
        def __dlpack_device__(self):
            return (2, 0)
    with pytest.raises(ValueError, match=r"softmax: x is a CudaLike in GPU memory, but launches "
                                         r"run on the CPU executor"):
        sk.softmax(CudaLike(_x()))


def test_bfloat16_torch_tensors_arrive_as_ml_dtypes_arrays(cpu):
    import ml_dtypes
    from stdlib_kernels._args import _Call
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    inner = _Call("f", ["x"]).take("x", t)
    assert inner.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(inner.astype(np.float32), t.float().numpy())
    inner[0, 0] = 7                                  # a view of the tensor's memory
    assert float(t[0, 0]) == 7.0


def test_the_numpy_fast_path_converts_nothing(cpu, monkeypatch):
    from stdlib_kernels import _args
    monkeypatch.setattr(_args._Call, "run", lambda *a, **k: pytest.fail("slow path taken"))
    x = _x()
    assert type(sk.softmax(x)) is np.ndarray
    assert isinstance(sk.softmax(pyptx.to_device(x)), pyptx.DeviceArray)


# ---- device memory from another library, on the fake GPU ------------------------------------------

def _copies(fake):
    return [c for c in fake.calls if c[0].startswith("cuMemcpy")]


def test_foreign_device_memory_is_launched_on_in_place_and_stays_on_the_device(fake):
    x = _x()
    d = pyptx.to_device(x)
    want = sk.softmax(d).copy_to_host()
    before = len(_copies(fake))
    got = sk.softmax(DeviceCAI(d))
    assert isinstance(got, pyptx.DeviceArray)      # an unknown device producer: DeviceArray
    assert len(_copies(fake)) == before            # no host round trip
    np.testing.assert_array_equal(got.copy_to_host(), want)
    out = pyptx.to_device(np.zeros_like(x))
    assert sk.softmax(DeviceCAI(d), out=DeviceCAI(out)).__class__ is DeviceCAI
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_a_cai_producer_stream_is_waited_for(fake):
    d = pyptx.to_device(_x())
    from pyptx.runtime.streams import Stream, stream_handle
    s = Stream()
    n = sum(c[0] == "cuStreamWaitEvent" for c in fake.calls)
    sk.softmax(DeviceCAI(d, stream=stream_handle(s)))
    assert sum(c[0] == "cuStreamWaitEvent" for c in fake.calls) == n + 1


def test_bad_cai_is_refused_naming_the_argument(fake):
    d = pyptx.to_device(_x())
    with pytest.raises(ValueError, match="softmax: x has a __cuda_array_interface__ with stream 0"):
        sk.softmax(DeviceCAI(d, stream=0))
    with pytest.raises(ValueError, match="softmax: x is a non-contiguous GPU array"):
        sk.softmax(DeviceCAI(d, strides=(4, 16)))


def test_a_dlpack_only_device_object_is_refused_inside_a_graph(fake):
    d = pyptx.to_device(_x())

    class DLOnly:
        def __dlpack_device__(self):
            return d.__dlpack_device__()

        def __dlpack__(self, **kw):
            pytest.fail("exported inside a capture")
    with pytest.raises(ValueError, match="softmax: x is a DLPack-only object inside a "
                                         "pyptx.graph"):
        with pyptx.graph():
            sk.softmax(DLOnly())


def test_launch_scope_sets_the_stream_and_can_force_the_executor(fake):
    from pyptx.runtime.streams import Stream, stream_handle
    x = _x()
    d = pyptx.to_device(x)
    s = Stream()
    with launch_scope(stream=s):
        sk.softmax(d)
    launches = [c for c in fake.calls if c[0] == "cuLaunchKernel"]
    assert launches and int(launches[-1][1][8] or 0) == stream_handle(s)
    n = len([c for c in fake.calls if c[0] == "cuLaunchKernel"])
    with launch_scope(cpu=True):
        got = sk.softmax(x)                        # numpy: run on the executor, no GPU launch
    assert len([c for c in fake.calls if c[0] == "cuLaunchKernel"]) == n
    np.testing.assert_array_equal(got, sk.softmax(x))


def _last_launch(fake, entry_part):
    return [l for l in fake.launches if entry_part in l.entry][-1]


def test_a_misaligned_device_view_is_copied_to_an_aligned_array_first(fake):
    """The stdlib's kernels read with 128-bit loads, which a GPU refuses on an address that is
    not 16-byte aligned: a view 4 bytes into an array (a row slice, a torch view with a storage
    offset) is first copied by a kernel; an aligned one is launched on directly; a misaligned
    out= is refused."""
    x = np.random.default_rng(8).standard_normal(81).astype(np.float32)
    d = pyptx.to_device(x)
    view = d[1:81].reshape(2, 40)
    assert view.device_pointer % 16 == 4
    got = sk.softmax(view)
    assert _last_launch(fake, "softmax").params["x"] % 16 == 0
    assert any("copy_kernel" in l.entry for l in fake.launches)
    np.testing.assert_array_equal(got.copy_to_host(), sk.softmax(x[1:].reshape(2, 40).copy()))
    n = len(fake.launches)
    sk.softmax(d[0:80].reshape(2, 40))                 # aligned: no copy
    assert len(fake.launches) == n + 1
    with pytest.raises(ValueError, match="out is not 16-byte aligned"):
        sk.softmax(d[0:80].reshape(2, 40), out=d[1:81].reshape(2, 40))


def test_an_in_place_numpy_target_comes_back_as_itself_whatever_came_first(cpu):
    src = torch.arange(32, dtype=torch.float32)
    cache = np.zeros((2, 8, 16), np.float32)
    assert sk.kv_scatter(src, cache, 3) is cache
    np.testing.assert_array_equal(cache[:, 3, :].reshape(-1), np.arange(32, dtype=np.float32))
