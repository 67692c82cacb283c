"""The stdlib's one array-argument layer: every public function takes numpy arrays,
`pyptx.DeviceArray`s and any object with `__dlpack__` / `__cuda_array_interface__` (PyTorch,
CuPy, JAX, Numba device arrays), and returns the kind it was given.

Why one layer: the function bodies are written once, against two internal kinds — numpy arrays
(host memory) and DeviceArrays (device memory, or the CPU executor's private copies).
`@stdlib_function` turns every foreign array argument into one of them *without copying*:

* host memory (DLPack device kDLCPU / kDLCUDAHost: a torch CPU tensor, a JAX CPU array) → a
  numpy view of the producer's memory (strided views too; bfloat16 as `ml_dtypes.bfloat16`);
* device memory (`__cuda_array_interface__`, else DLPack kDLCUDA) → a DeviceArray view that
  keeps the producer's object alive and frees nothing (`device_array.foreign_view`).

Then it runs the body — for a GPU framework's tensor on that framework's current stream (torch:
`torch.cuda.current_stream()`, CuPy: `cupy.cuda.get_current_stream()`), outside a
`pyptx.graph()` capture — and converts the result back to the kind of the first array argument
(torch in → torch out on the same device, CuPy → CuPy, JAX → JAX, anything else → numpy for host
memory, DeviceArray for device memory).  A result that *is* one of the arguments (`out=`, the
in-place `kv_scatter`) comes back as the caller's own object.

`out=`: the body writes into the caller's array (`result` below checks shape, dtype, writability
and that it lives where the inputs do); bodies whose last step is a reshape or transpose copy
into it (`deliver`).  Calls with only numpy/DeviceArray arguments take a fast path that converts
nothing (the decode loop's per-token host time is dominated by these wrappers).
"""
from __future__ import annotations

import functools
import inspect
import sys

import numpy as np

from ._validate import empty, is_device

#: the arguments each in-place function writes (besides `out=`, which every other one writes)
IN_PLACE = {"kv_scatter": ("cache",), "paged_kv_scatter": ("k_pages", "v_pages")}
#: frameworks whose arrays are immutable: never a written argument (their DLPack export does
#: not say read-only, so this is the only guard)
_IMMUTABLE = ("jax", "jaxlib")

_HOST_DL = (1, 3)            # kDLCPU, kDLCUDAHost: numpy can address it
_DEVICE_DL = (2, 13)         # kDLCUDA, kDLCUDAManaged: a kernel can address it


def stdlib_function(fn):
    """Declare a public stdlib function whose body takes numpy arrays / DeviceArrays (and an
    `out=` keyword): foreign arrays in, the caller's kind out (module docstring)."""
    names = list(inspect.signature(fn).parameters)
    fname = fn.__name__
    written = ("out",) + IN_PLACE.get(fname, ())

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for a in args:
            if _is_foreign(a):
                break
        else:
            for a in kwargs.values():
                if _is_foreign(a):
                    break
            else:
                return fn(*args, **kwargs)          # numpy / DeviceArray only: nothing to do
        return _Call(fname, names, written).run(fn, args, kwargs)

    wrapper.__pyptx_stdlib__ = fn                   # the body, for tests and pyptx.torch
    return wrapper


def _is_foreign(a) -> bool:
    """An array that is neither numpy nor a DeviceArray but speaks DLPack or CAI."""
    if isinstance(a, (np.ndarray, int, float, str, bool)) or a is None or is_device(a):
        return False
    t = type(a)
    return hasattr(t, "__dlpack__") or hasattr(a, "__cuda_array_interface__")


def result(fn: str, out, shape, dtype, like):
    """The array a body writes its result into: `out` (checked) or a new one where `like`
    lives (numpy for host inputs, a DeviceArray — graph-owned inside a capture — for device
    ones)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if out is None:
        return empty(shape, dtype, like)
    check_out(fn, out, shape, dtype, like)
    return out


def check_out(fn: str, out, shape, dtype, like) -> None:
    """`out` must be a writable C-contiguous array of `shape` and `dtype` where `like` lives."""
    dtype = np.dtype(dtype)
    if is_device(out):
        if not is_device(like):
            raise ValueError(f"{fn}: out is a DeviceArray but the inputs are host arrays; pass "
                             f"a host out (numpy, a CPU tensor) or device inputs")
        if out.device != like.device:
            raise ValueError(f"{fn}: out lives on device {out.device!r}, the inputs on "
                             f"{like.device!r}")
        if out.on_gpu and out.device_pointer % 16:
            raise ValueError(f"{fn}: out is not 16-byte aligned (address "
                             f"{out.device_pointer:#x}); the kernels write it with 128-bit "
                             f"stores: pass a fresh array, not a view at an offset")
    elif isinstance(out, np.ndarray):
        if is_device(like):
            raise ValueError(f"{fn}: out is a host array but the inputs live on the device; "
                             f"pass a device out (a DeviceArray, a CUDA tensor)")
        if not out.flags.writeable:
            raise ValueError(f"{fn}: out is read-only")
        if not out.flags.c_contiguous:
            raise ValueError(f"{fn}: out must be C-contiguous (a fresh array or "
                             f"np.ascontiguousarray)")
    else:
        raise TypeError(f"{fn}: out must be an array (numpy, DeviceArray, torch, CuPy, ...), "
                        f"got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"{fn}: out must have dtype {dtype.name}, got {out.dtype}")
    if tuple(out.shape) != shape:
        raise ValueError(f"{fn}: out must have shape {shape}, got {tuple(out.shape)}")


def deliver(fn: str, out, res, like):
    """A body's last step: `res` itself without `out=`, else `res` copied into `out` (for bodies
    whose result is a reshape/transpose of what the kernel wrote)."""
    if out is None or res is out:
        return res
    check_out(fn, out, tuple(res.shape), res.dtype, like)
    if is_device(out):
        copy_device(out, res)
    else:
        np.copyto(out, res)
    return out


def copy_device(dst, src) -> None:
    """dst[...] = src for two DeviceArrays of one shape and dtype, as a kernel launch (so it
    stays stream-ordered and is captured by `pyptx.graph()`)."""
    from .elementwise import copy_words
    copy_words(dst, src)


# ---- one call with foreign arguments -------------------------------------------------------------

class _Call:
    """Converts the foreign arguments of one call, runs the body, converts the results."""

    def __init__(self, fn: str, names: list, written: tuple = ("out",)):
        self.fn, self.names, self.written = fn, names, written
        self.originals: dict = {}        # id(internal array) -> the caller's object
        self.keep: list = []             # internal arrays (their ids stay valid)
        self.kind = None                 # (framework module name, on_device) of the 1st array
        self.stream = None               # the framework's current stream (device calls)

    def run(self, fn, args, kwargs):
        args = [self.take(self.names[i] if i < len(self.names) else f"argument {i}", a)
                for i, a in enumerate(args)]
        kwargs = {k: self.take(k, a) for k, a in kwargs.items()}
        from pyptx.runtime.graph import capturing
        from pyptx.runtime.launch import launch_scope
        if self.stream is not None and capturing() is None:
            with launch_scope(stream=self.stream):
                res = fn(*args, **kwargs)
        else:
            res = fn(*args, **kwargs)
        return self.give_back(res)

    # -- in ----------------------------------------------------------------------------------------
    def take(self, name: str, a):
        """`a` as numpy / DeviceArray (foreign arrays converted without a copy)."""
        if not _is_foreign(a):
            if isinstance(a, np.ndarray) or is_device(a):
                if self.kind is None:
                    self.kind = ("numpy", False) if isinstance(a, np.ndarray) else ("pyptx", True)
                self.originals[id(a)] = a       # an in-place target comes back as itself
            return a
        module = type(a).__module__.split(".")[0]
        if module in _IMMUTABLE and name in self.written:
            raise TypeError(f"{self.fn}: {name} is an immutable {module} array; the call writes "
                            f"it in place — pass a numpy/torch/DeviceArray buffer, or no out= "
                            f"(the result comes back as a new {module} array)")
        dl_dev = _dlpack_device(self.fn, name, a)
        on_device = dl_dev[0] in _DEVICE_DL if dl_dev is not None else True
        if dl_dev is not None and dl_dev[0] not in _HOST_DL + _DEVICE_DL:
            raise TypeError(f"{self.fn}: {name} is a {type(a).__name__} on a device pyptx "
                            f"cannot address (DLPack device type {dl_dev[0]})")
        inner = self._device(name, a) if on_device else self._host(name, a)
        if self.kind is None:
            self.kind = (module, on_device)
            if on_device:
                self.stream = _current_stream(module, a)
        self.originals[id(inner)] = a
        self.keep.append(inner)
        return inner

    def _host(self, name, a) -> np.ndarray:
        from pyptx.runtime import dlpack
        try:
            t = dlpack.import_object(a)
        except Exception as e:  # noqa: BLE001 - the producer's own refusal (requires_grad, ...)
            raise TypeError(f"{self.fn}: {name}: could not read this {type(a).__name__} "
                            f"through DLPack ({type(e).__name__}: {e})") from None
        if t.dtype is None:
            desc = t.describe_dtype()
            t.release()
            raise TypeError(f"{self.fn}: {name} has dtype {desc}, which pyptx does not support")
        return t.as_numpy()

    def _device(self, name, a):
        from pyptx.runtime import device_array, dlpack, launch
        from pyptx.runtime.graph import capturing
        from pyptx.runtime.arg_checks import _c_strides, _check_gpu_pointer
        if launch.device() == "cpu" or _scoped_cpu():
            why = launch.device_reason() or "a CPU-only scope"
            raise ValueError(f"{self.fn}: {name} is a {type(a).__name__} in GPU memory, but "
                             f"launches run on the CPU executor ({why}); pass host memory "
                             f"(e.g. x.cpu())")
        cai = _cai(a)
        if cai is not None:
            shape = tuple(int(s) for s in cai["shape"])
            dtype = np.dtype(cai["typestr"])
            strides = cai.get("strides")
            if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize) \
                    and 0 not in shape:
                raise ValueError(f"{self.fn}: {name} is a non-contiguous GPU array; pass a "
                                 f"contiguous one (x.contiguous(), cupy.ascontiguousarray)")
            ptr = int(cai["data"][0])
            producer = cai.get("stream")
            if producer == 0:
                raise ValueError(f"{self.fn}: {name} has a __cuda_array_interface__ with stream "
                                 f"0, which the interface (v3) forbids")
            holder = a
        else:
            if capturing() is not None:
                raise ValueError(f"{self.fn}: {name} is a DLPack-only object inside a "
                                 f"pyptx.graph() capture: exporting it would synchronise; pass "
                                 f"a DeviceArray or an object with __cuda_array_interface__")
            try:
                t = dlpack.import_object(a, stream=_dlpack_stream(self.stream))
            except Exception as e:  # noqa: BLE001
                raise TypeError(f"{self.fn}: {name}: could not read this {type(a).__name__} "
                                f"through DLPack ({type(e).__name__}: {e})") from None
            if t.dtype is None or not t.is_c_contiguous():
                what = (f"dtype {t.describe_dtype()}, which pyptx does not support"
                        if t.dtype is None else "a non-contiguous layout; pass x.contiguous()")
                t.release()
                raise ValueError(f"{self.fn}: {name} has {what}")
            shape, dtype, ptr, producer, holder = t.shape, np.dtype(t.dtype), t.data, None, t

        def fail(got):
            raise ValueError(f"{self.fn}: {name} is {got}")

        _check_gpu_pointer(ptr, fail)
        if producer is not None and capturing() is None:
            _wait_for(producer, self.stream)
        return device_array.foreign_view(holder, ptr, shape, dtype)

    # -- out ---------------------------------------------------------------------------------------
    def give_back(self, res):
        if isinstance(res, tuple):
            return tuple(self.give_back(r) for r in res)
        if not (isinstance(res, np.ndarray) or is_device(res)):
            return res
        orig = self.originals.get(id(res))
        if orig is not None:
            return orig
        module, _ = self.kind or ("numpy", False)
        convert = _RETURNS.get(module)
        return convert(res) if convert is not None else res


def _scoped_cpu() -> bool:
    from pyptx.runtime import launch
    return bool(launch._scope.__dict__.get("cpu"))


def _dlpack_device(fn, name, a):
    get = getattr(a, "__dlpack_device__", None)
    if get is None:
        return None
    try:
        dev = get()
        return (int(dev[0]), int(dev[1]))
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"{fn}: {name}: {type(a).__name__}.__dlpack_device__() failed "
                        f"({e})") from None


def _cai(a):
    """`a.__cuda_array_interface__`, or None (absent, or refused: torch has none for bfloat16)."""
    try:
        return a.__cuda_array_interface__
    except Exception:  # noqa: BLE001
        return None


def _current_stream(module: str, a):
    """The current stream of the framework a GPU tensor comes from (None: the default)."""
    if module == "torch":
        torch = sys.modules["torch"]
        return torch.cuda.current_stream(a.device).cuda_stream
    if module == "cupy":
        return sys.modules["cupy"].cuda.get_current_stream().ptr
    return None


def _dlpack_stream(stream):
    return 1 if not stream else int(stream)


def _wait_for(producer, stream) -> None:
    """CAI v3 `stream`: the stream the call launches on waits for the producer's work."""
    from pyptx.runtime import driver
    from pyptx.runtime.devmem import wait_for_producer
    ctx = driver.context()
    pushed = ctx.enter()
    try:
        wait_for_producer(ctx, producer, stream)
    finally:
        ctx.leave(pushed)


# ---- results back to the caller's kind ------------------------------------------------------------

class _NoSync:
    """A DeviceArray exported over DLPack without the context synchronisation its own
    `__dlpack__` does for unknown consumers: the work that wrote it was queued on the
    consumer's current stream (the call ran there), so stream order already covers it."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.array.__dlpack__(stream=-1, max_version=max_version, dl_device=dl_device,
                                     copy=copy)


def _to_torch(a):
    torch = sys.modules["torch"]
    if isinstance(a, np.ndarray):
        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)
    return torch.from_dlpack(_NoSync(a))


def _to_cupy(a):
    cupy = sys.modules["cupy"]
    return cupy.asarray(a) if isinstance(a, np.ndarray) else cupy.from_dlpack(_NoSync(a))


def _to_jax(a):
    import jax.numpy as jnp
    return jnp.asarray(a) if isinstance(a, np.ndarray) else jnp.from_dlpack(a)


#: framework (top-level module of the first array argument's type) -> result converter; other
#: producers get numpy (host memory) or a DeviceArray (device memory) back
_RETURNS = {"torch": _to_torch, "cupy": _to_cupy, "jax": _to_jax, "jaxlib": _to_jax}
