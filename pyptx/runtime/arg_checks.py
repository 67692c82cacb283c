"""The per-argument checks of a launch: `_Plan` (built once per kernel, device and launch
signature) holds one checker per parameter, which checks an argument (type, dtype, rank, device,
layout, range) and appends its flat PTX parameter values, or raises the `LaunchError` that names
it.

Separate from `launch.py` because it is most of the code and none of the launch: launch.py
chooses the device, checks the grid and block, binds the arguments to parameters (`_Binder`) and
runs; everything that looks inside one argument (numpy, DeviceArray, `__cuda_array_interface__`,
DLPack, foreign device pointers, TensorMaps, scalars) lives here.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .. import types as T
from ..errors import LaunchError
from . import profile
from .device_array import DeviceArray
from .driver import current_ordinal

_SHAPE_LIMIT = 2**31

_launch_state = threading.local()   # .stream: the `stream=` of the GPU launch being checked

class _Strided(Exception):
    """Internal: a contiguous array parameter's checker met a non-contiguous argument; the
    launch takes the kernel's strided plan instead (`_Binder.plan(..., strided=True)`).
    args: (the checker's fail function, what to say if no strided plan takes it)."""


def _cai_strided(cai) -> bool:
    strides = cai.get("strides")
    if strides is None:
        return False
    shape = tuple(int(s) for s in cai["shape"])
    return tuple(strides) != _c_strides(shape, np.dtype(cai["typestr"]).itemsize)


def _capturing():
    if not _graph_hook:
        from .graph import capturing
        _graph_hook.append(capturing)
    return _graph_hook[0]()


_graph_hook: list = []


def _cpu_array_arg():
    from . import cpu
    return cpu.ArrayArg


# ---- the plan: one checker per argument --------------------------------------------------------

class _Plan:
    """Everything a launch of one CompiledKernel on one device (the CPU executor or one GPU:
    `ordinal`) needs, built once."""

    def __init__(self, ck, dev, positions, names, kname):
        sig = list(ck.signature)
        user = [names[i] for i in positions]
        if [a.name for a in sig] != user:
            raise LaunchError(f"internal: {kname} compiled with parameters "
                              f"{[a.name for a in sig]} but launched with {user}")
        array_arg = _cpu_array_arg() if dev == "cpu" else _gpu_array_arg()
        self.ck = ck
        self.launcher = None
        self.ordinal = None if dev == "cpu" else current_ordinal()
        self.checkers = [(pos, _checker(spec, dev, array_arg, kname, self.ordinal))
                         for pos, spec in zip(positions, sig)]
        flat_len = sum(1 + a.ndim * (2 if a.strided else 1) if a.kind == "array" else 1
                       for a in sig)
        if flat_len != len(ck.params):
            raise LaunchError(f"internal: {kname} has {len(ck.params)} PTX parameters but its "
                              f"signature flattens to {flat_len}")
        from .gpu import static_shared_bytes
        self.static_shared = static_shared_bytes(ck.ptx)
        if dev == "gpu":
            self.shared_limit = profile.gpu_profile().max_shared_per_block_optin
        else:
            self.shared_limit = profile.CPU_MAX_SHARED

    def gpu_launcher(self):
        """The GPU path's prepared launcher for this plan's kernel in its device's context,
        kept on the plan (plans are dropped when the driver is reset)."""
        from . import driver
        from .gpu import launcher_for
        self.launcher = launcher_for(self.ck, driver.context(self.ordinal))
        return self.launcher


def _gpu_array_arg():
    from .gpu import bind_array
    return bind_array


def _checker(spec, dev, array_arg, kname, ordinal=None):
    if spec.kind == "tensormap":
        return _tensormap_checker(spec.name, dev, kname, spec.writable)
    if spec.kind == "array":
        return _array_checker(spec, dev, array_arg, kname, ordinal)
    t = spec.dtype
    if t.is_bool:
        return _bool_checker(spec.name, kname)
    if t.is_int:
        return _int_checker(spec.name, t, kname)
    return _float_checker(spec.name, t, kname)


def _tensormap_checker(name, dev, kname, writable=False):
    """A `pyptx.tensormap` parameter: a TensorMap, flattened to itself on the CPU (the
    executor's launcher encodes it once its array has a heap address) and to the driver's 128
    bytes on a GPU."""
    from .tensormap import BoundTensorMap, TensorMap

    def check(a, out):
        if not isinstance(a, TensorMap):
            raise LaunchError(f"{kname}(): argument '{name}' must be a pyptx.TensorMap (the "
                              f"parameter is a pyptx.tensormap), got {type(a).__name__} "
                              f"{_short(a)}")
        if isinstance(a.array, DeviceArray) and a.array._freed:
            raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a DeviceArray "
                              f"that was freed")
        if dev == "cpu":
            if isinstance(a.array, DeviceArray) and a.array._host is None:
                raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a GPU "
                                  f"DeviceArray, but the launch runs on the CPU executor; make "
                                  f"it of a numpy array")
            if writable and not a.host_array().flags.writeable:
                raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a read-only "
                                  f"array, but the kernel stores through it (tma_store)")
            out.append(BoundTensorMap(a, writable))
            return
        if not isinstance(a.array, DeviceArray) or a.array._host is not None:
            raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a numpy array, "
                              f"but the launch runs on a GPU; make it of a DeviceArray: "
                              f"pyptx.TensorMap(pyptx.to_device(x), box)")
        out.append(a.gpu_bytes())
    return check


def _bfloat16_dtype():
    """numpy's dtype of `ml_dtypes.bfloat16` (a runtime dependency; uint16 if it is absent)."""
    from ..bfloat16 import BFLOAT16
    return BFLOAT16


def _describe_array(dtype, ndim) -> str:
    return f"{np.dtype(dtype).name} array with {ndim} dimension{'s' if ndim != 1 else ''}"


def _array_failures(spec, kname, ordinal):
    """(the other dtype accepted, fail(got), wrong_device(other, what=None)) of an array
    parameter's checker: the LaunchErrors naming the argument.  A bf16[...] parameter takes
    ml_dtypes.bfloat16 arrays as well as uint16 bit patterns (`alt`)."""
    name, dt, nd = spec.name, spec.dtype.dtype, spec.ndim
    alt = _bfloat16_dtype() if spec.dtype is T.bf16 else dt
    expected = _describe_array(dt, nd)
    if alt is not dt:
        expected = f"bfloat16 or {expected}"
    where = f" (launching {kname})"

    def fail(got):
        raise LaunchError(f"argument '{name}': expected {expected}, got {got}{where}")

    def wrong_device(other, what=None):
        what = what or f"is in the memory of CUDA device {other}"
        raise LaunchError(f"argument '{name}' {what}, but this launch runs on CUDA device "
                          f"{ordinal} (the calling thread's device, pyptx.use_device); launch "
                          f"it inside `with pyptx.use_device({other}):` or copy the array to "
                          f"device {ordinal} first{where}")
    return alt, fail, wrong_device


def _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device) -> None:
    """What every array checker requires of a DeviceArray argument (past the fast path): its
    dtype and rank, not freed, memory of the launch's kind (GPU / CPU executor) and device."""
    if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
        fail(f"a DeviceArray of {_describe_array(a.dtype, a.ndim)}")
    if a._freed:
        fail("a DeviceArray that was freed (DeviceArray.free())")
    if dev == "cpu":
        if a.on_gpu:
            fail("a DeviceArray in GPU memory, but launches run on the CPU executor")
    elif not a.on_gpu:
        fail("a DeviceArray made for the CPU executor, but launches run on the GPU")
    elif a._device != ordinal:
        wrong_device(a._device)


def _cai_shape(cai, dt, alt, nd, dev, fail) -> tuple:
    """A `__cuda_array_interface__` argument's shape, after the checks every array checker
    makes of one: GPU launches only, the parameter's dtype and rank."""
    if dev == "cpu":
        fail("a GPU array (__cuda_array_interface__), but launches run on the CPU "
             "executor; copy it to a numpy array")
    shape = tuple(int(s) for s in cai["shape"])
    got_dt = np.dtype(cai["typestr"])
    if (got_dt != dt and got_dt != alt) or len(shape) != nd:
        fail(f"a GPU array of {_describe_array(got_dt, len(shape))}")
    return shape


def _array_checker(spec, dev, array_arg, kname, ordinal=None):
    if spec.strided:
        return _strided_checker(spec, dev, array_arg, kname, ordinal)
    dt, nd, writable = spec.dtype.dtype, spec.ndim, spec.writable
    alt, fail, wrong_device = _array_failures(spec, kname, ordinal)
    gpu = dev == "gpu"

    def check(a, out):
        if gpu and type(a) is DeviceArray and a._host is None:    # the fast, common case
            shape = a.shape
            if (a.dtype is not dt and a.dtype != dt and a.dtype != alt) or len(shape) != nd:
                fail(f"a DeviceArray of {_describe_array(a.dtype, len(shape))}")
            if a._freed:
                fail("a DeviceArray that was freed (DeviceArray.free())")
            if a._device != ordinal:
                wrong_device(a._device)
            for s in shape:
                if s >= _SHAPE_LIMIT:
                    fail(f"shape {shape}: every dimension must be below 2**31")
            out.append(a._ptr)             # the address itself: nothing to stage
            out.extend(shape)
            return
        if isinstance(a, np.ndarray):
            if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
                fail(_describe_array(a.dtype, a.ndim))
            flags = a.flags
            if not flags.c_contiguous:
                raise _Strided(fail, "a non-contiguous array (pass np.ascontiguousarray(...))")
            if writable and not flags.writeable:
                fail("a read-only array, but the kernel writes to it")
            shape = a.shape
        elif isinstance(a, DeviceArray):
            _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device)
            shape = a.shape
            if dev == "cpu":
                a = a._host
            else:
                for s in shape:
                    if s >= _SHAPE_LIMIT:
                        fail(f"shape {shape}: every dimension must be below 2**31")
                out.append(a._ptr)             # GPU: the address itself, nothing to stage
                out.extend(shape)
                return
        else:
            cai = getattr(a, "__cuda_array_interface__", None)
            if cai is None:
                if not hasattr(a, "__dlpack__"):
                    fail(f"{type(a).__name__} {_short(a)}")
                if _capturing() is not None:   # before __dlpack__ consumes (and syncs) it
                    fail("a DLPack-only object inside a pyptx.graph() capture: exporting it "
                         "would synchronise, and a graph replays without it; pass a "
                         "DeviceArray or an object with __cuda_array_interface__")
                a, shape = _dlpack_arg(a, dev, (dt, alt), nd, writable, fail, wrong_device)
                for s in shape:
                    if s >= _SHAPE_LIMIT:
                        fail(f"shape {shape}: every dimension must be below 2**31")
                out.append(array_arg(a, writable))
                out.extend(shape)
                return
            shape = _cai_shape(cai, dt, alt, nd, dev, fail)
            if _cai_strided(cai):
                raise _Strided(fail, "a non-contiguous GPU array")
            if cai.get("stream", None) == 0:
                fail("a __cuda_array_interface__ with stream 0, which the interface (v3) "
                     "forbids: the producer must give 1, 2 or a stream handle")
            _check_gpu_pointer(int(cai["data"][0]), fail, wrong_device, ordinal)
        for s in shape:
            if s >= _SHAPE_LIMIT:
                fail(f"shape {shape}: every dimension must be below 2**31")
        out.append(array_arg(a, writable))
        out.extend(shape)
    return check


def _c_elem_strides(shape) -> list:
    """Element strides of a C-contiguous array of `shape`."""
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= s
    return out[::-1]


def _strided_checker(spec, dev, array_arg, kname, ordinal=None):
    """The checker of a strided array parameter (layout 'A'): any layout is taken, and the
    flat arguments are the pointer (of the element at index 0, wherever the strides go from
    there), one i32 size and then one i64 stride *in elements* per dimension.

    CPU: a numpy array is passed as it is (the executor maps the bytes its elements span).
    GPU: a non-contiguous numpy array is staged as a contiguous copy (the strides passed are
    the copy's, and a written one is copied back into the caller's view); DeviceArrays are
    contiguous; `__cuda_array_interface__` (strides in bytes) and DLPack (in elements) device
    arrays are used in place with their own strides.  A stride of 0 (np.broadcast_to) may be
    read, not written: the writes of its elements would race on one location."""
    dt, nd, writable = spec.dtype.dtype, spec.ndim, spec.writable
    alt, fail, wrong_device = _array_failures(spec, kname, ordinal)
    gpu = dev == "gpu"
    itemsize = dt.itemsize

    def elements(byte_strides, shape):
        out = []
        for s in byte_strides:
            s = int(s)
            if s % itemsize:
                fail(f"an array with strides {tuple(byte_strides)} (bytes) that are not "
                     f"multiples of its {itemsize}-byte elements; pass a copy "
                     f"(np.ascontiguousarray(...))")
            out.append(s // itemsize)
        return out

    def validate(shape, strides):
        for s in shape:
            if s >= _SHAPE_LIMIT:
                fail(f"shape {shape}: every dimension must be below 2**31")
        if writable:
            for d, (s, n) in enumerate(zip(strides, shape)):
                if s == 0 and n > 1:
                    fail(f"a broadcast array (stride 0 along dimension {d}: its {n} elements "
                         f"are one memory location), but the kernel writes to it, and those "
                         f"writes would race; pass a writable copy (np.array(...))")

    def finish(ptr, shape, strides, out):
        out.append(ptr)
        out.extend(shape)
        out.extend(strides)

    def check(a, out):
        if isinstance(a, np.ndarray):
            if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
                fail(_describe_array(a.dtype, a.ndim))
            shape = a.shape
            if a.flags.c_contiguous:
                strides = _c_elem_strides(shape)
            else:
                strides = elements(a.strides, shape)
                validate(shape, strides)
            if writable and not a.flags.writeable:
                fail("a read-only array, but the kernel writes to it")
            if gpu and not a.flags.c_contiguous:
                # staged as a contiguous copy: the kernel gets the copy's strides
                from .gpu import StagedCopy
                finish(StagedCopy(a, writable), shape, _c_elem_strides(shape), out)
                return
            validate(shape, ())
            finish(array_arg(a, writable), shape, strides, out)
            return
        if isinstance(a, DeviceArray):
            _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device)
            shape = a.shape
            if dev == "cpu":
                validate(shape, ())
                finish(array_arg(a._host, writable), shape, _c_elem_strides(shape), out)
                return
            validate(shape, ())
            finish(a._ptr, shape, _c_elem_strides(shape), out)
            return
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is None:
            if not hasattr(a, "__dlpack__"):
                fail(f"{type(a).__name__} {_short(a)}")
            if _capturing() is not None:
                fail("a DLPack-only object inside a pyptx.graph() capture: exporting it "
                     "would synchronise, and a graph replays without it; pass a "
                     "DeviceArray or an object with __cuda_array_interface__")
            t, shape = _dlpack_arg(a, dev, (dt, alt), nd, writable, fail, wrong_device,
                                   strided=True)
            try:
                if dev == "cpu":        # a numpy view of the producer's memory
                    strides = elements(t.strides, shape)
                else:                   # DLPack strides count elements already
                    strides = list(t.strides) if t.strides is not None else \
                        _c_elem_strides(shape)
                validate(shape, strides)
                finish(array_arg(t, writable), shape, strides, out)
            except BaseException:
                if dev != "cpu":
                    t.release()
                raise
            return
        shape = _cai_shape(cai, dt, alt, nd, dev, fail)
        byte_strides = cai.get("strides")
        strides = _c_elem_strides(shape) if byte_strides is None else \
            elements(byte_strides, shape)          # the interface's strides are bytes
        if cai.get("stream", None) == 0:
            fail("a __cuda_array_interface__ with stream 0, which the interface (v3) "
                 "forbids: the producer must give 1, 2 or a stream handle")
        validate(shape, strides)
        _check_gpu_pointer(int(cai["data"][0]), fail, wrong_device, ordinal)
        finish(array_arg(a, writable), shape, strides, out)
    return check


_DL_GPU = (2, 13)            # kDLCUDA, kDLCUDAManaged: memory a kernel can use by address
_DL_HOST = (1, 3, 13)        # kDLCPU, kDLCUDAHost (pinned), kDLCUDAManaged: host-addressable


def _dlpack_stream():
    """The DLPack `stream` value for the current GPU launch's stream (1 = legacy default)."""
    from .streams import stream_handle
    h = stream_handle(getattr(_launch_state, "stream", None))
    if h is None:
        return 1
    try:
        h = int(h)
    except (TypeError, ValueError):
        return None
    return h or 1


def _dlpack_arg(a, dev, dts, nd, writable, fail, wrong_device=None, strided=False):
    """Consume `a.__dlpack__()` for an array parameter (of one of the dtypes `dts`): (what the
    device launch takes, shape).

    GPU: an ImportedTensor whose `.data` the kernel gets (released by the GPU launcher once
    the kernel has finished).  CPU: a
    numpy view of the producer's memory (the deleter runs when the view is dropped)."""
    from . import dlpack
    try:
        dl_dev = dlpack.device_of(a)
    except Exception as e:  # noqa: BLE001
        fail(f"a DLPack object whose __dlpack_device__() failed ({e})")
    if dl_dev is not None:
        _dlpack_device_check(dl_dev, dev, fail, wrong_device)
    try:
        t = dlpack.import_object(a, stream=_dlpack_stream() if dev == "gpu" else None)
    except Exception as e:  # noqa: BLE001 - BufferError, TypeError, ... from the producer
        fail(f"a DLPack object whose __dlpack__() failed ({type(e).__name__}: {e})")
    try:
        _dlpack_device_check(t.device, dev, fail, wrong_device)
        if t.dtype is None or not any(t.dtype == d for d in dts) or t.ndim != nd:
            fail(f"a DLPack tensor of {t.describe_dtype()} with {t.ndim} "
                 f"dimension{'s' if t.ndim != 1 else ''}")
        if not strided and not t.is_c_contiguous():
            raise _Strided(fail, "a non-contiguous DLPack tensor")
        if writable and t.read_only:
            fail("a read-only DLPack tensor, but the kernel writes to it")
        if dev == "cpu":
            return t.as_numpy(), t.shape
        return t, t.shape
    except BaseException:
        t.release()
        raise


def _dlpack_device_check(dl_dev, dev, fail, wrong_device=None):
    from . import dlpack
    if dev == "cpu":
        if dl_dev[0] not in _DL_HOST:
            fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but launches run on the "
                 f"CPU executor; copy it to host memory first (e.g. np.asarray(x.cpu()) or "
                 f"x.get()), or run on a GPU (PYPTX_DEVICE=gpu)")
        return
    if dl_dev[0] not in _DL_GPU:
        fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but launches run on the GPU; "
             f"move it to the GPU (pyptx.to_device(np.from_dlpack(x)), x.cuda(), ...) or pass "
             f"a numpy array (np.from_dlpack(x)) to have it copied in and out")
    ordinal = current_ordinal()
    if dl_dev[1] != ordinal:
        if wrong_device is not None:
            wrong_device(dl_dev[1], f"is a DLPack tensor on {dlpack.device_name(dl_dev)} "
                                    f"(CUDA device {dl_dev[1]})")
        fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but pyptx launches on CUDA "
             f"device {ordinal}")


def _check_gpu_pointer(ptr: int, fail, wrong_device=None, ordinal=None) -> None:
    """A foreign device pointer must be memory of the device this launch runs on.

    The owner is the pointer's context (CU_POINTER_ATTRIBUTE_CONTEXT: one of pyptx's primary
    contexts, or another one whose device the driver tells), because some cuda-bindings
    releases report CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as 0 for every pointer; the ordinal
    attribute decides only when the memory has no context (stream-ordered pools, VMM)."""
    if not ptr:
        return
    from . import driver
    ctx = driver.context(ordinal)
    drv = ctx.drv
    attrs = drv.CUpointer_attribute
    res = drv.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if res[0] != ctx.success:
        fail(f"a GPU array whose address {ptr:#x} the CUDA driver does not know as device "
             f"memory ({driver.error_name(drv, res[0])})")
    owner = int(res[1])
    cres = drv.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_CONTEXT, ptr)
    handle = int(cres[1] or 0) if cres[0] == ctx.success else 0
    if handle:
        if handle == ctx.handle_int:
            return                              # memory of this very context
        of_ctx = driver.ordinal_of_context(cres[1])
        if of_ctx is not None:
            owner = of_ctx
            if owner == ctx.ordinal:
                fail(f"memory of another CUDA context on device {owner} (context "
                     f"{handle:#x}, not the primary context pyptx launches in), which kernels "
                     f"of this context cannot address; allocate it in the device's primary "
                     f"context")
    if owner != ctx.ordinal:
        if wrong_device is not None:
            wrong_device(owner)
        fail(f"an array in the memory of CUDA device {owner}, but pyptx launches on "
             f"device {ctx.ordinal}; copy it to device {ctx.ordinal} first")


def _c_strides(shape, itemsize) -> tuple:
    strides, step = [], itemsize
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _int_checker(name, t, kname):
    info = np.iinfo(t.dtype)
    lo, hi = int(info.min), int(info.max)
    tname = t.dtype.name

    def check(v, out):
        if type(v) is not int:
            if isinstance(v, (int, np.integer)):       # bool, numpy ints
                v = int(v)
            elif isinstance(v, (float, np.floating)):
                raise LaunchError(f"argument '{name}': expected an integer ({tname}), got "
                                  f"float {v!r}; convert it with int() (launching {kname})")
            else:
                raise LaunchError(f"argument '{name}': expected an integer ({tname}), got "
                                  f"{type(v).__name__} {_short(v)} (launching {kname})")
        if v < lo or v > hi:
            raise LaunchError(f"argument '{name}': {v} is out of range for {tname} "
                              f"[{lo}, {hi}] (launching {kname})")
        out.append(v)
    return check


#: smallest magnitude that rounds to infinity in each float type (round-to-nearest-even)
_FLOAT_OVERFLOW = {"f16": 65520.0, "f32": 2.0**128 - 2.0**103, "f64": math.inf,
                   "bf16": 2.0**128 - 2.0**119}


def _float_checker(name, t, kname):
    lim = _FLOAT_OVERFLOW[t.name]
    tname = t.dtype.name
    bits = None
    if t.name == "bf16":            # passed as its bit pattern (the host form of bf16)
        bits, tname = t, "bf16"

    def check(v, out):
        if type(v) is not float:
            if isinstance(v, (bool, np.bool_)) or not isinstance(
                    v, (int, float, np.integer, np.floating)):
                raise LaunchError(f"argument '{name}': expected a number ({tname}), got "
                                  f"{type(v).__name__} {_short(v)} (launching {kname})")
            try:
                v = float(v)
            except OverflowError:
                raise LaunchError(f"argument '{name}': {v} is out of range for {tname} "
                                  f"(launching {kname})") from None
        if (v >= lim or v <= -lim) and not math.isinf(v):
            raise LaunchError(f"argument '{name}': {v!r} is out of range for {tname} "
                              f"(launching {kname})")
        # f16/f32/f64: packed straight from the Python float (struct rounds like numpy)
        out.append(v if bits is None else bits(v))
    return check


def _bool_checker(name, kname):
    def check(v, out):
        if v is True or v is False:
            out.append(v)
        elif isinstance(v, np.bool_):
            out.append(bool(v))
        else:
            raise LaunchError(f"argument '{name}': expected a bool, got {type(v).__name__} "
                              f"{_short(v)} (launching {kname})")
    return check
