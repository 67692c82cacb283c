"""`pyptx.TensorMap(array, box, swizzle=...)`: a tiled TMA tensor map, the host side.

Why a host object: Hopper's bulk tensor copies (`pyptx.tma_load`) do not take a pointer but a
128-byte *tensor map* that describes the whole global tensor (address, sizes, byte strides), the
box (tile) one copy moves and how that box is laid out in shared memory (the swizzle).  The
map is made on the host and passed by value as a kernel argument (`.param .align 64 .b8
name[128]`, `pyptx.tensormap` in the kernel's annotations).

On a GPU the driver makes it (`cuTensorMapEncodeTiled`; the bytes are opaque).  On the CPU
executor the same 128 bytes hold *our* encoding (below): the launcher encodes it once the
array has its address in the executor's heap, and the executor's `cp.async.bulk.tensor`
decodes it (runtime/cpu/tma.py).  The two encodings never meet: a TensorMap is made for the
device its array lives on.

The CPU encoding is drawn in runtime/cpu/tma.py (`encode` / `decode`), next to its reader.

Everything here is in numpy order (outermost first) except the encoding, which is the driver's
innermost-first order.
"""
from __future__ import annotations

import struct

import numpy as np

from .cpu.tma import ELEMENT_BYTES, SWIZZLE_BYTES, encode

#: numpy dtype name -> (CUtensorMapDataType value, element bytes).  i8/i16 travel as the
#: unsigned type of their width (a TMA copy moves bits; it never converts).
DATA_TYPES = {"uint8": (0, 1), "int8": (0, 1), "uint16": (1, 2), "int16": (1, 2),
              "uint32": (2, 4), "int32": (3, 4), "uint64": (4, 8), "int64": (5, 8),
              "float16": (6, 2), "float32": (7, 4), "float64": (8, 8), "bfloat16": (9, 2)}
#: swizzle span in bytes -> CUtensorMapSwizzle value
SWIZZLE_CODES = {v: k for k, v in SWIZZLE_BYTES.items()}
L2_PROMOTION_256B = 3


def check_encode_args(dtype_code, address, dims, strides, box, element_strides,
                      swizzle_code, interleave=0) -> str | None:
    """The rules `cuTensorMapEncodeTiled` documents for the tiled, non-interleaved maps pyptx
    makes (innermost-first arguments), as the first rule broken, or None.  Shared by
    `TensorMap` (which raises ValueError with it) and nothing else: the fake driver in the
    tests checks them again on its own."""
    rank = len(dims)
    if dtype_code not in ELEMENT_BYTES:
        return f"the data type {dtype_code} is not one pyptx encodes"
    esize = ELEMENT_BYTES[dtype_code]
    if not 1 <= rank <= 5:
        return f"the rank must be 1..5, got {rank}"
    if len(strides) != rank - 1 or len(box) != rank or len(element_strides) != rank:
        return "globalStrides needs rank-1 entries, boxDim and elementStrides rank entries"
    if address % 16:
        return f"the global address must be 16-byte aligned, got 0x{address:x}"
    for d in dims:
        if not 1 <= d <= 2**32:
            return f"every global dimension must be 1..2**32, got {d}"
    for s in strides:
        if s % 16 or not 0 < s < 2**40:
            return (f"every global stride (bytes, dims 1..) must be a multiple of 16 and "
                    f"below 2**40, got {s}")
    for b in box:
        if not 1 <= b <= 256:
            return f"every box dimension must be 1..256, got {b}"
    if interleave == 0 and box[0] * esize % 16:
        return (f"the box's inner dimension must span a multiple of 16 bytes, got "
                f"{box[0]} x {esize} = {box[0] * esize} bytes")
    for e in element_strides:
        if not 1 <= e <= 8:
            return f"every element stride must be 1..8, got {e}"
    span = SWIZZLE_BYTES.get(swizzle_code)
    if span is None:
        return f"swizzle code {swizzle_code} is not NONE, 32B, 64B or 128B"
    if interleave == 0 and span and box[0] * esize > span:
        return (f"with a {span}-byte swizzle the box's inner dimension may span at most {span} "
                f"bytes, got {box[0]} x {esize} = {box[0] * esize} bytes")
    return None


class TensorMap:
    """A 2-D or 3-D tiled tensor map of `array` (a numpy array for the CPU executor, or a
    DeviceArray), moving boxes of shape `box` (numpy order, outermost first) in shared memory
    laid out with `swizzle` (0, 32, 64 or 128 bytes).  Elements of a box outside the array
    read as zeros.

    Raises ValueError naming the rule a bad box, stride, dtype or swizzle breaks."""

    __slots__ = ("array", "box", "swizzle", "dtype", "shape", "byte_strides", "dtype_code",
                 "_gpu_bytes")

    def __init__(self, array, box, swizzle: int = 0):
        from .device_array import DeviceArray
        if isinstance(array, DeviceArray):
            array._check_live()
            shape, dtype = array.shape, array.dtype
            byte_strides = _c_strides(shape, dtype.itemsize)
        elif isinstance(array, np.ndarray):
            shape, dtype, byte_strides = array.shape, array.dtype, array.strides
        else:
            raise ValueError(f"TensorMap needs a numpy array or a DeviceArray, got "
                             f"{type(array).__name__}")
        name = "bfloat16" if dtype.name == "bfloat16" else dtype.name
        if name not in DATA_TYPES:
            raise ValueError(f"TensorMap: arrays of {dtype} have no TMA data type; use one of "
                             f"{', '.join(sorted(DATA_TYPES))}")
        if len(shape) not in (2, 3):
            raise ValueError(f"TensorMap: the array must be 2-D or 3-D, got {len(shape)}-D")
        box = tuple(box) if isinstance(box, (tuple, list)) else (box,)
        if len(box) != len(shape) or not all(isinstance(b, (int, np.integer))
                                             and not isinstance(b, bool) for b in box):
            raise ValueError(f"TensorMap: box must be a tuple of {len(shape)} ints (one per "
                             f"dimension of the array, outermost first), got {box!r}")
        if isinstance(swizzle, bool) or swizzle not in SWIZZLE_CODES:
            raise ValueError(f"TensorMap: swizzle must be 0, 32, 64 or 128 (bytes), got "
                             f"{swizzle!r}")
        code, esize = DATA_TYPES[name]
        if byte_strides[-1] != esize:
            raise ValueError(f"TensorMap: the innermost dimension must be contiguous (stride "
                             f"{esize} bytes), got a stride of {byte_strides[-1]} bytes")
        why = check_encode_args(code, 0, shape[::-1], byte_strides[-2::-1], box[::-1],
                                (1,) * len(shape), SWIZZLE_CODES[swizzle])
        if why is not None:
            raise ValueError(f"TensorMap: {why}")
        self.array, self.box, self.swizzle = array, tuple(int(b) for b in box), int(swizzle)
        self.dtype, self.shape, self.dtype_code = dtype, tuple(shape), code
        self.byte_strides = tuple(int(s) for s in byte_strides)
        self._gpu_bytes = None

    @property
    def box_bytes(self) -> int:
        """The bytes one `tma_load` of this map moves (its mbarrier's expected tx-count)."""
        n = self.dtype.itemsize
        for b in self.box:
            n *= b
        return n

    def host_array(self) -> np.ndarray:
        """The numpy array the CPU executor copies into its heap (a DeviceArray's host copy
        on the CPU device)."""
        a = self.array
        return a if isinstance(a, np.ndarray) else a._host

    def encode_at(self, address: int) -> bytes:
        """The CPU executor's 128 bytes for the array at `address` (its heap address)."""
        return encode(self.dtype_code, address, self.shape[::-1], self.byte_strides[-2::-1],
                      self.box[::-1], (1,) * len(self.shape), SWIZZLE_CODES[self.swizzle],
                      l2=L2_PROMOTION_256B)

    def gpu_bytes(self) -> bytes:
        """The driver's 128 bytes (`cuTensorMapEncodeTiled`), made once.  Not yet run on
        hardware: checked against the fake driver of the tests only."""
        if self._gpu_bytes is None:
            from . import driver
            a = self.array
            ctx = a._ctx or driver.context()
            drv = ctx.drv
            rank = len(self.shape)
            res = ctx.call(
                "cuTensorMapEncodeTiled", drv.cuTensorMapEncodeTiled,
                drv.CUtensorMapDataType(self.dtype_code), rank, a._ptr,
                [int(d) for d in self.shape[::-1]],
                [int(s) for s in self.byte_strides[-2::-1]],
                [int(b) for b in self.box[::-1]], [1] * rank,
                drv.CUtensorMapInterleave(0), drv.CUtensorMapSwizzle(SWIZZLE_CODES[self.swizzle]),
                drv.CUtensorMapL2promotion(L2_PROMOTION_256B), drv.CUtensorMapFloatOOBfill(0))
            words = [int(w) for w in res.opaque]
            self._gpu_bytes = struct.pack(f"<{len(words)}Q", *words)
        return self._gpu_bytes

    def __repr__(self) -> str:
        return (f"TensorMap({self.dtype}{list(self.shape)}, box={self.box}, "
                f"swizzle={self.swizzle})")


def _c_strides(shape, itemsize) -> tuple:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= s
    return tuple(out[::-1])


class BoundTensorMap:
    """A CPU launch's tensor-map argument: the map, and whether the kernel stores through it
    (`tma_store`), so the executor's launcher copies its array back afterwards."""
    __slots__ = ("tmap", "writable")

    def __init__(self, tmap: TensorMap, writable: bool):
        self.tmap, self.writable = tmap, writable

    def host_array(self) -> np.ndarray:
        return self.tmap.host_array()

    def encode_at(self, address: int) -> bytes:
        return self.tmap.encode_at(address)
