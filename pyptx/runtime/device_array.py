"""`pyptx.to_device(arr)` → `DeviceArray`: an array that stays resident between launches.

On the GPU it owns device memory (freed when the object is garbage-collected) and exposes
`__cuda_array_interface__` and `__dlpack__`, so CuPy/PyTorch/Numba/JAX can use it too.  On the
CPU executor it wraps a private host copy, so code written against DeviceArray behaves the same
on both devices: results are visible only through `copy_to_host()` (or a DLPack view such as
`np.from_dlpack`).
"""
from __future__ import annotations

import weakref

import numpy as np

from . import devmem, driver, driver_memory, streams
from .graph import capturing, check as capture_check, outside_capture


class DeviceArray:
    """A C-contiguous array on the launch device.  Build it with `pyptx.to_device`."""

    __slots__ = ("shape", "dtype", "_host", "_ptr", "_nbytes", "__weakref__", "_finalizer",
                 "_freed", "_ctx", "_device", "_streams")

    def __init__(self, shape, dtype, *, host: np.ndarray | None = None, ptr: int = 0,
                 ctx=None, pool_size: int = 0):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._host = host              # CPU device: the private copy the executor works on
        self._ptr = ptr                # GPU device: the device address (0 for an empty array)
        self._nbytes = self.size * self.dtype.itemsize
        self._finalizer = None
        self._freed = False
        if host is None and ctx is None and ptr:
            ctx = driver.context()
        self._ctx = ctx                # GPU: the context (device) the memory belongs to
        self._device = "cpu" if host is not None else (
            ctx.ordinal if ctx is not None else driver.current_ordinal())
        self._streams = None           # GPU owner: the streams besides HOME it was used on
        if ptr:
            # never raises, from whatever thread the garbage collector runs it in; releases in
            # the allocating context, whichever device the thread that runs it has selected:
            # into the pool (devmem: stream-ordered reuse), or cuMemFree for foreign sizes
            if pool_size:
                self._streams = []
                self._finalizer = weakref.finalize(self, devmem.release_array, ptr, pool_size,
                                                   ctx, self._streams)
            else:
                self._finalizer = weakref.finalize(self, driver_memory.release_quietly, ptr, ctx)

    # -- numpy-like description --------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def on_gpu(self) -> bool:
        return self._host is None

    @property
    def device(self):
        """Where the array lives: the ordinal (int) of its GPU, or the string "cpu" for an
        array of the CPU executor (docs/launching.md, "Devices")."""
        return self._device

    @property
    def device_pointer(self) -> int:
        """The device address (GPU only)."""
        if self._host is not None:
            raise AttributeError("a DeviceArray on the CPU executor has no device pointer")
        return self._ptr

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        where = "cpu" if self._host is not None else f"gpu {self._device}"
        return f"<pyptx.DeviceArray shape={self.shape} dtype={self.dtype} on {where}>"

    # -- transfers -----------------------------------------------------------------------------
    def _check_live(self) -> None:
        if self._freed:
            raise ValueError("this DeviceArray was freed (DeviceArray.free()); it has no data")

    def copy_to_host(self, out: np.ndarray | None = None, stream=None) -> np.ndarray:
        """A new numpy array with the contents (or fill `out`, same shape/dtype, C-contiguous).
        `stream` (Numba's spelling `d.copy_to_host(ary, stream=s)`): the stream's queued work is
        waited for first; the copy itself is synchronous."""
        self._check_live()
        _sync(stream)
        capture_check("cuMemcpyDtoH", "DeviceArray.copy_to_host()")
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif (out.shape != self.shape or out.dtype != self.dtype
              or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"copy_to_host(out=...) needs a writable C-contiguous "
                             f"{self.dtype} array of shape {self.shape}")
        if self._host is not None:
            np.copyto(out, self._host)
        elif self._nbytes:
            driver_memory.memcpy_dtoh(out.ctypes.data, self._ptr, self._nbytes, ctx=self._ctx)
        return out

    def copy_from_host(self, arr) -> None:
        """Overwrite the contents with `arr` (same shape and dtype)."""
        self._check_live()
        capture_check("cuMemcpyHtoD", "DeviceArray.copy_from_host()")
        arr = np.ascontiguousarray(arr)
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError(f"copy_from_host needs a {self.dtype} array of shape {self.shape}, "
                             f"got {arr.dtype} {arr.shape}")
        if self._host is not None:
            np.copyto(self._host, arr)
        elif self._nbytes:
            driver_memory.memcpy_htod(self._ptr, arr.ctypes.data, self._nbytes, ctx=self._ctx)

    def copy_to_device(self, ary, stream=None) -> None:
        """Numba's `d.copy_to_device(ary)`: overwrite the contents with a host array or another
        DeviceArray of the same dtype and size (shapes may differ only by axes of length 1)."""
        self._check_live()
        _sync(stream)
        if isinstance(ary, DeviceArray):
            ary._check_live()
            src = ary._host if ary._host is not None else ary.copy_to_host()
        else:
            src = np.asarray(ary)
        if src.dtype != self.dtype:
            raise TypeError(f"copy_to_device: incompatible dtype {src.dtype} for a {self.dtype} "
                            f"DeviceArray")
        if src.shape != self.shape:
            if [n for n in src.shape if n != 1] != [n for n in self.shape if n != 1]:
                raise ValueError(f"copy_to_device: incompatible shape {src.shape} for a "
                                 f"DeviceArray of shape {self.shape}")
            src = src.reshape(self.shape)
        capture_check("cuMemcpyHtoD", "DeviceArray.copy_to_device()")
        self._write(0, np.ascontiguousarray(src))

    def _write(self, offset: int, buf: np.ndarray) -> None:
        """Store the C-contiguous `buf` at element `offset` (capture already checked)."""
        if self._host is not None:
            self._host.reshape(-1)[offset:offset + buf.size] = buf.reshape(-1)
        elif buf.nbytes:
            driver_memory.memcpy_htod(self._ptr + offset * self.dtype.itemsize, buf.ctypes.data,
                               buf.nbytes, ctx=self._ctx)

    def _read(self, offset: int, shape) -> np.ndarray:
        out = np.empty(shape, self.dtype)
        if self._host is not None:
            out.reshape(-1)[:] = self._host.reshape(-1)[offset:offset + out.size]
        elif out.nbytes:
            driver_memory.memcpy_dtoh(out.ctypes.data, self._ptr + offset * self.dtype.itemsize,
                               out.nbytes, ctx=self._ctx)
        return out

    def _region(self, key):
        """(first element, shape, kept axes) of the C-contiguous block `key` selects (leading
        ints, then at most one slice of step 1, then whole axes), or None for any other key."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis or k is None for k in key):
            return None
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for a DeviceArray of {self.ndim} dimension(s)")
        key = key + (slice(None),) * (self.ndim - len(key))
        offset, shape, partial = 0, [], False
        for ax, (k, n) in enumerate(zip(key, self.shape)):
            stride = 1
            for m in self.shape[ax + 1:]:
                stride *= m
            if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                if partial:
                    return None
                i = int(k) + n if k < 0 else int(k)
                if not 0 <= i < n:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {ax} with size {n}")
                offset += i * stride
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                stop = max(start, stop)
                if step != 1 or (partial and (start, stop) != (0, n)):
                    return None
                if (start, stop) != (0, n):
                    partial = True
                offset += start * stride
                shape.append(stop - start)
            else:
                return None
        return offset, tuple(shape)

    def __setitem__(self, key, value) -> None:
        """`d[3] = 1.0`, `d[1:4] = host`, `d[i, :] = 0`, ...: writes only the selected elements
        (one host-to-device copy); any other key is a read-modify-write of the whole array."""
        self.setitem(key, value)

    def setitem(self, key, value, stream=None) -> None:
        """`__setitem__` after waiting for `stream` (Numba's `d.setitem(key, value, stream)`)."""
        self._check_live()
        _sync(stream)
        capture_check("cuMemcpyHtoD", "DeviceArray.__setitem__()")
        if isinstance(value, DeviceArray):
            value = value.copy_to_host()
        region = self._region(key)
        if region is None:                 # strided/fancy keys: numpy does the indexing
            if self._host is not None:
                self._host[key] = value
                return
            whole = self.copy_to_host()
            whole[key] = value
            self._write(0, whole)
            return
        offset, shape = region
        val = np.asarray(value)
        if val.dtype.kind == "c" and self.dtype.kind != "c":
            raise TypeError(f"cannot store a complex value in a {self.dtype} DeviceArray")
        buf = np.ascontiguousarray(np.broadcast_to(val.astype(self.dtype, copy=False), shape))
        self._write(offset, buf)

    def free(self) -> None:
        """Release the device memory now (the object is unusable afterwards: launching with it
        is a LaunchError, copying from or to it a ValueError).  Not allowed inside
        `with pyptx.graph()`; a graph that recorded the array refuses to launch afterwards."""
        capture_check("cuMemFree", "DeviceArray.free()")
        if self._finalizer is not None:
            self._finalizer()
        self._ptr = 0
        self._freed = True

    def __getitem__(self, key) -> "DeviceArray":
        """Numpy's basic indexing, as in Numba: a selection that is C-contiguous (`a[i:j]`,
        `a[i]` of an n-d array, `a[2, 1:3]`) is a DeviceArray view; any other (`a[::2]`,
        `a[:, 0]`) a `StridedView` (strided_view.py) that kernels take as a strided argument;
        an index of every axis (`a[3]`, `a[i, j]`) reads that element back to the host (a
        numpy scalar)."""
        if not self.shape:
            raise TypeError("a 0-d DeviceArray cannot be indexed; copy_to_host() reads it")
        from .strided_view import StridedView, select
        shape, strides, offset = select(self, key)      # numpy's basic indexing rules
        host = None if self._host is None else self._host[key]
        if not shape:                                   # every axis indexed: one element
            self._check_live()
            capture_check("cuMemcpyDtoH", "DeviceArray.__getitem__()")
            return self._read(offset // self.dtype.itemsize, ())[()]
        if _contiguous(shape, strides, self.dtype.itemsize):
            if host is not None:
                return _View(shape, self.dtype, self, host=host)
            return _View(shape, self.dtype, self, offset=offset)
        return StridedView(self, shape, strides, offset, host=host)  # d[::2], d[:, 0], ...

    def reshape(self, *shape) -> "DeviceArray":
        """A view of the same memory with another shape (no copy; one dimension may be -1),
        like numpy's `reshape` of a C-contiguous array.  The view keeps this array alive."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new = _reshaped(self.shape, tuple(int(s) for s in shape))
        if self._host is not None:
            return _View(new, self.dtype, self, host=self._host.reshape(new))
        return _View(new, self.dtype, self)

    def view(self, dtype) -> "DeviceArray":
        """The same memory read as another dtype (float16 <-> uint16, ml_dtypes.bfloat16 <->
        uint16, float32 -> uint16 pairs, ...), like numpy's `view`: with another item size the
        last axis is rescaled; no copy."""
        dt = np.dtype(dtype)
        shape = self.shape
        if dt.itemsize != self.dtype.itemsize:
            row = (shape[-1] if shape else 1) * self.dtype.itemsize
            if not shape or row % dt.itemsize:
                raise ValueError(f"DeviceArray.view: the last axis of {shape} ({row} bytes) is "
                                 f"not a whole number of {dt} items")
            shape = shape[:-1] + (row // dt.itemsize,)
        if self._host is not None:
            return _View(shape, dt, self, host=self._host.view(dt))
        return _View(shape, dt, self)

    # -- interop ---------------------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        if self._host is not None:
            raise AttributeError("a DeviceArray on the CPU executor is not CUDA memory")
        # stream 1 (the legacy default stream, which waits for every blocking stream pyptx
        # launches on): a consumer that honours CAI v3 orders its work after pyptx's.  Work on
        # the other streams the array was used on (non-blocking ones too) is put before the
        # legacy stream's next work first (devmem.publish)
        devmem.publish(self)
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._ptr, False),
                "strides": None, "version": 3, "stream": 1}

    def __dlpack_device__(self) -> tuple:
        """(kDLCUDA=2, device ordinal) on the GPU, (kDLCPU=1, 0) on the CPU executor."""
        from . import dlpack
        if self._host is not None:
            return (dlpack.kDLCPU, 0)
        return (dlpack.kDLCUDA, self._device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array (zero-copy unless `copy=True` or `dl_device` asks for
        another device).  A versioned capsule ("dltensor_versioned") when `max_version` >= (1, 0),
        else the legacy "dltensor".  On the GPU, unless `stream == -1`, the whole context is
        synchronised first, so pending pyptx work on this array is finished for any consumer
        stream (`stream` 0 is invalid for CUDA, per the spec)."""
        from . import dlpack
        if stream != -1:
            capture_check("cuCtxSynchronize", "DeviceArray.__dlpack__()")
        versioned = dlpack.wants_versioned(max_version)
        here = self.__dlpack_device__()
        target = here if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
        if self._host is None and (stream is not None and not isinstance(stream, int)):
            raise TypeError(f"stream must be an int or None, got {type(stream).__name__}")
        if self._host is None and stream == 0:
            raise ValueError("stream=0 is ambiguous for CUDA in DLPack: pass 1 (legacy default "
                             "stream), 2 (per-thread default stream), a stream handle, or -1")
        if target != here:
            if target == (dlpack.kDLCPU, 0) and self._host is None and copy is not False:
                host = self.copy_to_host()
                return dlpack.export(host, host.ctypes.data, self.shape, self.dtype, target,
                                     versioned=versioned, copied=True)
            raise BufferError(f"cannot export a DeviceArray on {dlpack.device_name(here)} to "
                              f"{dlpack.device_name(target)}"
                              + (" without a copy" if copy is False else ""))
        if self._host is None:
            if self._ptr == 0 and self._nbytes:
                raise BufferError("the DeviceArray was freed")
            if stream != -1:
                streams.synchronize(ctx=self._ctx, api="DeviceArray.__dlpack__()")
        if self._host is not None:
            owner = self._host.copy() if copy else self
            data = (owner if copy else self._host).ctypes.data
        else:
            owner = _to_context(self.copy_to_host(), self._ctx) if copy else self
            data = owner._ptr
        return dlpack.export(owner, data, self.shape, self.dtype, here, versioned=versioned,
                             copied=bool(copy))


def _sync(stream) -> None:
    """A copy given Numba's `stream=`: wait for the stream's queued work first."""
    if stream is None or (type(stream) is int and stream == 0):
        return
    sync = getattr(stream, "synchronize", None)     # a pyptx / pyptx.cuda / framework stream
    if callable(sync):
        sync()


class _View(DeviceArray):
    """A DeviceArray sharing another one's memory (`reshape`, `a[i:j]`); frees nothing itself."""

    def __init__(self, shape, dtype, base: DeviceArray, *, host=None, offset: int = 0):
        super().__init__(shape, dtype, host=host, ctx=base._ctx)
        self._device = base._device
        self._ptr = base._ptr + offset if base._ptr else 0
        self._base = base            # keeps the owner (and its device memory) alive

    def free(self) -> None:
        self._base.free()
        self._ptr = 0
        self._freed = True


class _Foreign(DeviceArray):
    """Another framework's device memory (a torch/CuPy/JAX/Numba array, through
    `__cuda_array_interface__` or DLPack) seen as a DeviceArray, so the stdlib can reshape,
    slice and launch on it without a copy.  It keeps the foreign object alive and frees nothing:
    the memory's lifetime and stream order stay the producer's."""

    def __init__(self, obj, ptr: int, shape, dtype, ctx):
        super().__init__(shape, dtype, ctx=ctx)
        self._ptr = ptr
        self._foreign = obj

    def free(self) -> None:
        raise TypeError("this DeviceArray is a view of another framework's memory; free it "
                        "there (del the tensor)")


def foreign_view(obj, ptr: int, shape, dtype) -> DeviceArray:
    """A `_Foreign` DeviceArray over `ptr` (device memory of the current context) that keeps
    `obj` alive."""
    return _Foreign(obj, ptr, shape, dtype, driver.context())


def _contiguous(shape, strides, itemsize) -> bool:
    """C-contiguous: each stride the item size times the later dimensions (size-1 axes and
    empty arrays have any stride)."""
    if 0 in shape:
        return True
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _reshaped(shape: tuple, new: tuple) -> tuple:
    size = 1
    for s in shape:
        size *= s
    known = 1
    for s in new:
        if s != -1:
            if s < 0:
                raise ValueError(f"reshape: negative dimension in {new}")
            known *= s
    if new.count(-1) > 1:
        raise ValueError(f"reshape: at most one dimension may be -1, got {new}")
    if -1 in new:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a DeviceArray of shape {shape} into {new}")
        new = tuple(size // known if s == -1 else s for s in new)
    elif known != size:
        raise ValueError(f"cannot reshape a DeviceArray of shape {shape} into {new}")
    return new


def to_device(arr, dtype=None) -> DeviceArray:
    """Copy a numpy array (or anything `np.asarray` takes) to the launch device (on a GPU: the
    calling thread's current device, `pyptx.use_device`).  Not allowed inside
    `with pyptx.graph()` (an allocation and a synchronous copy)."""
    capture_check("cuMemAlloc", "pyptx.to_device()")
    return _upload(np.ascontiguousarray(arr, dtype=dtype))


def _upload(host: np.ndarray) -> DeviceArray:
    from .launch import device
    if device() == "cpu":
        return DeviceArray(host.shape, host.dtype, host=host.copy())
    return _to_context(host, driver.context())


def _on_device(shape, dtype, nbytes: int, ctx) -> DeviceArray:
    """An uninitialised DeviceArray in `ctx`, its memory from the context's pool."""
    if not nbytes:
        return DeviceArray(shape, dtype, ptr=0, ctx=ctx)
    ptr, size = devmem.alloc_array(ctx, nbytes)
    return DeviceArray(shape, dtype, ptr=ptr, ctx=ctx, pool_size=size)


def _to_context(host: np.ndarray, ctx) -> DeviceArray:
    out = _on_device(host.shape, host.dtype, host.nbytes, ctx)
    ptr = out._ptr
    if host.nbytes:
        driver_memory.memcpy_htod(ptr, host.ctypes.data, host.nbytes, ctx=ctx)
    return out


def device_empty(shape, dtype, api: str = "pyptx.device_empty()") -> DeviceArray:
    """An uninitialised DeviceArray (zeros on the CPU executor).  Not allowed inside
    `with pyptx.graph()`: allocate before the capture (library code uses `result_empty`)."""
    capture_check("cuMemAlloc", api)
    return _empty(shape, dtype)


def _empty(shape, dtype) -> DeviceArray:
    from .launch import device
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dt = np.dtype(dtype)
    if device() == "cpu":
        return DeviceArray(shape, dt, host=np.zeros(shape, dt))
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    return _on_device(shape, dt, n, driver.context())


def result_empty(shape, dtype) -> DeviceArray:
    """The result (or scratch) array of a library function.  Inside `with pyptx.graph()` it is
    allocated as setup work outside the recorded stream and owned by the graph, so a stdlib
    call captures without the caller preparing `out=` (docs/launching.md)."""
    g = capturing()
    if g is None:
        return _empty(shape, dtype)
    with outside_capture():
        return g.own(_empty(shape, dtype))


def resident_constant(key, make) -> DeviceArray:
    """A read-only table a library function needs on the device (RoPE's frequencies, ...):
    uploaded once per device and kept, so calls inside `with pyptx.graph()` never upload.
    `make()` returns the numpy array; `key` names it."""
    from .launch import device
    dev = device()
    owner = "cpu" if dev == "cpu" else id(driver.context())
    hit = _constants.get((owner, key))
    if hit is None:
        with outside_capture():
            hit = _constants[(owner, key)] = _upload(np.ascontiguousarray(make()))
    return hit


_constants: dict = {}     # (device owner, key) -> DeviceArray; cleared by driver.reset()
