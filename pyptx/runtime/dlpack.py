"""DLPack (https://dmlc.github.io/dlpack/latest/) in pure ctypes: export a `DeviceArray` as a
`DLManagedTensor[Versioned]` capsule, and import any object's `__dlpack__` capsule for a launch.

Producer (`export`): the structs live in ctypes buffers kept, together with the object that owns
the memory, in `_exported` (keyed by the struct's address) until the tensor's deleter runs.  The
capsule ("dltensor", or "dltensor_versioned" when the consumer's `max_version` >= (1, 0)) has a
destructor that calls the deleter only if no consumer renamed it to "used_..." (took ownership).

Consumer (`import_object`): calls `obj.__dlpack__(stream=..., max_version=(1, 0))` (falling back
to the legacy call), renames the capsule to "used_..." and returns an `ImportedTensor` that
describes the memory and calls the producer's deleter on `release()` (or when collected).

Known limit of a ctypes-only producer: the capsule destructor is a Python callback, so if a
consumer drops an *unconsumed* capsule while a Python exception is pending (a C consumer's error
path, e.g. `np.from_dlpack` of a GPU array), the deleter still runs but the consumer's own error
is replaced by a SystemError.  Consumed capsules (the normal path) never hit this.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .. import types as T

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLCUDAManaged = 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6

FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
VERSION = (1, 0)                       # what we export in versioned capsules

_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_V = b"dltensor_versioned"
_USED_V = b"used_dltensor_versioned"
_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
                 8: "kDLMetal", 10: "kDLROCM", 11: "kDLROCMHost", 13: "kDLCUDAManaged",
                 14: "kDLOneAPI"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# ---- dtypes -------------------------------------------------------------------------------------

_KIND_CODE = {"int": kDLInt, "uint": kDLUInt, "float": kDLFloat, "bool": kDLBool}


def dl_dtype(dtype) -> tuple:
    """(code, bits, lanes) of a numpy dtype pyptx supports (pyptx/types.py, and
    ml_dtypes.bfloat16); KeyError if not."""
    if np.dtype(dtype).name == "bfloat16":
        return (kDLBfloat, 16, 1)
    t = T.from_dtype(dtype)
    return (_KIND_CODE[t.kind], t.mem_bytes * 8, 1)


def np_dtype(code: int, bits: int, lanes: int):
    """The numpy dtype for a DLDataType pyptx supports (kDLBfloat: ml_dtypes.bfloat16), else
    None."""
    if lanes != 1:
        return None
    if code == kDLBfloat and bits == 16:
        from ..bfloat16 import BFLOAT16
        return BFLOAT16 if BFLOAT16.name == "bfloat16" else None
    for t in T.SCALARS.values():
        if _KIND_CODE[t.kind] == code and t.mem_bytes * 8 == bits:
            return t.dtype
    return None


def describe_dl_dtype(code: int, bits: int, lanes: int) -> str:
    kind = {kDLInt: "int", kDLUInt: "uint", kDLFloat: "float", kDLBfloat: "bfloat",
            kDLComplex: "complex", kDLBool: "bool"}.get(code, f"code{code}")
    return f"{kind}{bits}" + (f"x{lanes}" if lanes != 1 else "")


# ---- the C API bits we need ---------------------------------------------------------------------

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

#: a deleter as the producer's C code sees it; PYFUNCTYPE keeps the GIL while calling foreign
#: deleters (safe whether or not they take the GIL themselves)
_DELETER_CALL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# ---- producer -----------------------------------------------------------------------------------

_exported: dict = {}        # struct address -> (struct, shape, strides, owner)
_lock = threading.Lock()


def _deleter(address) -> None:
    """The DLManagedTensor[Versioned] deleter: drop the struct and the owner it keeps alive."""
    try:
        with _lock:
            _exported.pop(address, None)
    except Exception:  # noqa: BLE001 - never raise into C (interpreter shutdown)
        pass


def _capsule_destructor(capsule_address) -> None:
    """Called when a capsule dies: run the deleter unless a consumer took the tensor (renamed
    the capsule to "used_...")."""
    try:
        cap = ctypes.cast(capsule_address, ctypes.py_object)
        for name in (_NAME, _NAME_V):
            if _api.PyCapsule_IsValid(cap, name):
                _deleter(_api.PyCapsule_GetPointer(cap, name))
                return
    except Exception:  # noqa: BLE001
        pass


_DELETER_CB = _CALLBACK(_deleter)
_DELETER_ADDR = ctypes.cast(_DELETER_CB, ctypes.c_void_p).value
_DESTRUCTOR_CB = _CALLBACK(_capsule_destructor)
_DESTRUCTOR_ADDR = ctypes.cast(_DESTRUCTOR_CB, ctypes.c_void_p).value


def live_exports() -> int:
    """How many exported tensors wait for their deleter (for tests and leak checks)."""
    return len(_exported)


def export(owner, data: int, shape, dtype, device: tuple, *, versioned: bool,
           read_only: bool = False, copied: bool = False):
    """A PyCapsule with a C-contiguous tensor of `shape`/`dtype` at `data` on `device`
    ((device_type, device_id)); `owner` stays alive until the tensor's deleter runs."""
    code, bits, lanes = dl_dtype(dtype)
    nd = len(shape)
    c_shape = (ctypes.c_int64 * max(nd, 1))(*shape)
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    c_strides = (ctypes.c_int64 * max(nd, 1))(*reversed(strides))
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    t.data = data or None
    t.device = DLDevice(*device)
    t.ndim = nd
    t.dtype = DLDataType(code, bits, lanes)
    t.shape = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64))   # explicit, in elements
    t.byte_offset = 0
    address = ctypes.addressof(m)
    m.manager_ctx = address
    m.deleter = _DELETER_ADDR
    if versioned:
        m.version = DLPackVersion(*VERSION)
        m.flags = (FLAG_READ_ONLY if read_only else 0) | (FLAG_IS_COPIED if copied else 0)
    with _lock:
        _exported[address] = (m, c_shape, c_strides, owner)
    try:
        return _api.PyCapsule_New(address, _NAME_V if versioned else _NAME, _DESTRUCTOR_ADDR)
    except BaseException:
        _deleter(address)
        raise


def wants_versioned(max_version) -> bool:
    return max_version is not None and tuple(max_version)[0] >= 1


# ---- consumer -----------------------------------------------------------------------------------

class ImportedTensor:
    """A consumed DLPack tensor: where its memory is and what it holds.  `release()` (idempotent;
    also on garbage collection) calls the producer's deleter."""

    __slots__ = ("data", "device", "shape", "strides", "code", "bits", "lanes", "dtype",
                 "read_only", "_managed", "_deleter", "__weakref__")

    def __init__(self, managed: int, versioned: bool):
        self._managed = managed
        if versioned:
            m = DLManagedTensorVersioned.from_address(managed)
            if m.version.major > VERSION[0]:
                deleter = m.deleter
                self._managed, self._deleter = None, None
                if deleter:
                    _DELETER_CALL(deleter)(managed)
                raise BufferError(f"DLPack version {m.version.major}.{m.version.minor} is newer "
                                  f"than the {VERSION[0]}.x pyptx understands")
            self.read_only = bool(m.flags & FLAG_READ_ONLY)
        else:
            m = DLManagedTensor.from_address(managed)
            self.read_only = False
        self._deleter = m.deleter
        t = m.dl_tensor
        nd = int(t.ndim)
        self.shape = tuple(int(t.shape[i]) for i in range(nd))
        self.strides = tuple(int(t.strides[i]) for i in range(nd)) if t.strides else None
        self.data = (t.data or 0) + int(t.byte_offset)
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.code, self.bits, self.lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        self.dtype = np_dtype(self.code, self.bits, self.lanes)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        n = self.bits // 8 * self.lanes
        for s in self.shape:
            n *= s
        return n

    def describe_dtype(self) -> str:
        return np.dtype(self.dtype).name if self.dtype is not None else \
            describe_dl_dtype(self.code, self.bits, self.lanes)

    def is_c_contiguous(self) -> bool:
        """Strides NULL, or C-order strides (size-1 dimensions may have any stride)."""
        if self.strides is None:
            return True
        step = 1
        for s, st in zip(reversed(self.shape), reversed(self.strides)):
            if s != 1 and st != step:
                return any(x == 0 for x in self.shape)
            step *= s
        return True

    def as_numpy(self) -> np.ndarray:
        """A numpy view of a CPU tensor (strided ones too); the view keeps this object (and so
        the producer's memory) alive, and the deleter runs when the view is collected."""
        holder = _NumpyHolder(self)
        arr = np.asarray(holder)
        # ml_dtypes.bfloat16's typestr is '<V2': the interface carries uint16, viewed back here
        return arr if arr.dtype == self.dtype else arr.view(self.dtype)

    def release(self) -> None:
        managed, deleter = self._managed, self._deleter
        self._managed = self._deleter = None
        if managed and deleter:
            _DELETER_CALL(deleter)(managed)

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001
            pass


class _NumpyHolder:
    __slots__ = ("tensor", "__array_interface__")

    def __init__(self, tensor: ImportedTensor):
        self.tensor = tensor
        self.__array_interface__ = {
            "shape": tensor.shape, "typestr": _typestr(tensor.dtype),
            "data": (tensor.data or 0, tensor.read_only), "version": 3,
            # DLPack strides count elements, the array interface's bytes
            "strides": None if tensor.strides is None or tensor.is_c_contiguous() else
            tuple(s * (tensor.bits // 8) for s in tensor.strides)}


def _typestr(dtype) -> str:
    dt = np.dtype(dtype)
    return dt.str if dt.kind != "V" else f"<u{dt.itemsize}"


def device_of(obj):
    """`obj.__dlpack_device__()` as a (type, id) tuple of ints, or None when it has none."""
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    dev = fn()
    return (int(dev[0]), int(dev[1]))


def device_name(dev) -> str:
    return f"{_DEVICE_NAMES.get(dev[0], f'device type {dev[0]}')}:{dev[1]}"


def import_object(obj, stream=None) -> ImportedTensor:
    """Consume `obj.__dlpack__(stream=stream, ...)`: the tensor, owned by the caller until
    `release()`."""
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=VERSION)
    except TypeError:                    # a producer predating DLPack 1.0 keywords
        capsule = obj.__dlpack__(stream=stream)
    return import_capsule(capsule)


def import_capsule(capsule) -> ImportedTensor:
    """Take ownership of an unused "dltensor"/"dltensor_versioned" capsule."""
    if _api.PyCapsule_IsValid(capsule, _NAME_V):
        ptr = _api.PyCapsule_GetPointer(capsule, _NAME_V)
        _api.PyCapsule_SetName(capsule, _USED_V)
        return ImportedTensor(ptr, True)
    if _api.PyCapsule_IsValid(capsule, _NAME):
        ptr = _api.PyCapsule_GetPointer(capsule, _NAME)
        _api.PyCapsule_SetName(capsule, _USED)
        return ImportedTensor(ptr, False)
    raise BufferError("__dlpack__ did not return an unused 'dltensor' or 'dltensor_versioned' "
                      "capsule")
