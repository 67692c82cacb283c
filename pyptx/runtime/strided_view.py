"""`d[::2]`, `d[:, 0]`, `d[1:9:2, 3]`: non-contiguous views of a `DeviceArray` (Numba's strided
device arrays), for indexing a C-contiguous view cannot express.

Why a separate type: a DeviceArray is C-contiguous by contract (its fast launch path passes a
pointer and a shape).  A `StridedView` instead speaks the protocols the launcher already reads
for strided arguments (docs/launching.md, "Strided arrays"): `__cuda_array_interface__` with byte
strides on the GPU (the kernel's strided specialisation runs on the memory in place) and
`__dlpack__` of the numpy view of the executor's private copy on the CPU.  It keeps its base
alive and owns nothing.  `copy_to_host()` / `copy_from_host()` move the elements it selects (on
the GPU through the span of memory they cover: one copy each way).
"""
from __future__ import annotations

import numpy as np

from . import devmem, driver_memory
from .graph import check as capture_check


def select(base, key):
    """(shape, byte strides, byte offset) of `base[key]` under numpy's rules for basic indexing
    (ints, slices with any step, Ellipsis, None); IndexError/TypeError as numpy gives them.
    Computed on a zero-byte stand-in with the base's shape and strides: only metadata."""
    itemsize = base.dtype.itemsize
    strides, step = [], itemsize
    for n in reversed(base.shape):
        strides.append(step)
        step *= max(n, 1)
    strides = tuple(reversed(strides))
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=base.shape,
                                            strides=strides, writeable=False)
    if isinstance(key, tuple) and any(isinstance(k, (list, np.ndarray)) for k in key) or \
            isinstance(key, (list, np.ndarray)):
        raise TypeError("a DeviceArray takes basic indexing only (ints, slices, ...); "
                        "copy_to_host() for fancy indexing")
    parts = key if isinstance(key, tuple) else (key,)
    if not any(k is Ellipsis for k in parts):
        parts = parts + (Ellipsis,)       # an index of every axis: a 0-d view, not a scalar
    v = dummy[parts]
    offset = v.__array_interface__["data"][0] - dummy.__array_interface__["data"][0]
    return v.shape, v.strides, offset


class StridedView:
    """A strided view of a DeviceArray (module docstring)."""

    def __init__(self, base, shape, strides, offset: int, host=None):
        self.base, self.shape, self.strides, self.offset = base, tuple(shape), tuple(strides), offset
        self.dtype = base.dtype
        self._host = host                 # the CPU executor: the numpy view of the base's copy

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def device(self):
        return self.base.device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d view")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<pyptx strided view shape={self.shape} strides={self.strides} of {self.base!r}>"

    # -- the launch protocols ----------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        if self._host is not None:
            raise AttributeError("a view of a CPU-executor DeviceArray is not CUDA memory")
        self.base._check_live()
        devmem.publish(self.base)
        return {"shape": self.shape, "typestr": self.dtype.str, "strides": self.strides,
                "data": (self.base._ptr + self.offset, False), "version": 3, "stream": 1}

    def __dlpack_device__(self) -> tuple:
        if self._host is None:
            return self.base.__dlpack_device__()
        return (1, 0)                                   # kDLCPU

    def __dlpack__(self, **kwargs):
        if self._host is None:
            raise BufferError("a strided view of GPU memory is exported through "
                              "__cuda_array_interface__")
        return self._host.__dlpack__(**kwargs)

    # -- copies ----------------------------------------------------------------------------------
    def _span(self) -> tuple[int, int]:
        """[lo, hi) byte offsets in the base's memory the view's elements lie in."""
        lo = hi = self.offset
        for n, s in zip(self.shape, self.strides):
            if n == 0:
                return self.offset, self.offset
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return lo, hi + self.dtype.itemsize

    def _on(self, buf: np.ndarray, lo: int) -> np.ndarray:
        """The view's elements inside `buf`, a host copy of the base's bytes [lo, ...)."""
        return np.lib.stride_tricks.as_strided(buf[self.offset - lo:].view(self.dtype),
                                               shape=self.shape, strides=self.strides)

    def copy_to_host(self) -> np.ndarray:
        """A new C-contiguous numpy array of the selected elements."""
        self.base._check_live()
        capture_check("cuMemcpyDtoH", "DeviceArray view .copy_to_host()")
        if self._host is not None:
            return np.ascontiguousarray(self._host)
        lo, hi = self._span()
        buf = np.empty(hi - lo, np.uint8)
        if buf.size:
            driver_memory.memcpy_dtoh(buf.ctypes.data, self.base._ptr + lo, buf.size,
                               ctx=self.base._ctx)
        return np.ascontiguousarray(self._on(buf, lo)) if buf.size else \
            np.empty(self.shape, self.dtype)

    def copy_from_host(self, arr) -> None:
        """Write `arr` (broadcast to the view's shape) into the selected elements; the elements
        between them keep their values (a read-modify-write of the span on the GPU)."""
        self.base._check_live()
        capture_check("cuMemcpyHtoD", "DeviceArray view .copy_from_host()")
        arr = np.asarray(arr, self.dtype)
        if self._host is not None:
            self._host[...] = arr
            return
        lo, hi = self._span()
        if hi <= lo:
            return
        buf = np.empty(hi - lo, np.uint8)
        driver_memory.memcpy_dtoh(buf.ctypes.data, self.base._ptr + lo, buf.size, ctx=self.base._ctx)
        np.lib.stride_tricks.as_strided(buf[self.offset - lo:].view(self.dtype),
                                        shape=self.shape, strides=self.strides)[...] = arr
        driver_memory.memcpy_htod(self.base._ptr + lo, buf.ctypes.data, buf.size, ctx=self.base._ctx)
