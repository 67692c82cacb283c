"""Argument checks shared by every public stdlib function.

Every check runs before any launch and names the offending argument, so a user sees
`TypeError: softmax: x must be float32, got float64` instead of a LaunchError from deep inside the
runtime.  Functions return C-contiguous arrays ready to be passed to a kernel.
"""
from __future__ import annotations

import numbers

import numpy as np

#: largest dimension a kernel launch accepts (shapes are i32 in the DSL)
_I32_MAX = 2**31 - 1
#: what an array argument may be (named in type errors)
ARRAY_KINDS = "numpy, pyptx.DeviceArray, torch, CuPy, JAX, ..."
#: the fix for a float64 (or float16) array where float32 is needed
TO_F32 = "; convert it first: x.astype(np.float32) (torch: x.float())"


def float32_array(fn: str, name: str, value, ndims: tuple[int, ...]) -> np.ndarray:
    """`value` as a C-contiguous float32 ndarray with one of `ndims` dimensions.

    No silent dtype conversion: a float64 array is a TypeError (the kernels compute in float32 and
    a user should choose that precision explicitly with `.astype(np.float32)`).
    """
    if is_device(value):
        return _device_array(fn, name, value, np.float32, ndims)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a float32 array ({ARRAY_KINDS}), got "
                        f"{type(value).__name__}")
    if value.dtype != np.float32:
        raise TypeError(f"{fn}: {name} must be float32, got {value.dtype}{TO_F32}")
    if value.ndim not in ndims:
        want = " or ".join(f"{d}-d" for d in ndims)
        raise ValueError(f"{fn}: {name} must be {want}, got shape {value.shape}")
    if any(d > _I32_MAX for d in value.shape):
        raise ValueError(f"{fn}: {name} has a dimension over 2**31-1 ({value.shape})")
    # not np.ascontiguousarray: it turns a 0-d array into a 1-d one
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


def int_array(fn: str, name: str, value, ndim: int) -> np.ndarray:
    """`value` as a C-contiguous int32 array (any integer dtype accepted if it fits in int32).
    A DeviceArray must be int32 already; its values are not checked (they stay on the device)."""
    if is_device(value):
        return _device_array(fn, name, value, np.int32, (ndim,))
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{fn}: {name} must be an integer array ({ARRAY_KINDS}), got "
                        f"{type(value).__name__}")
    if not np.issubdtype(value.dtype, np.integer):
        raise TypeError(f"{fn}: {name} must have an integer dtype, got {value.dtype}")
    if value.ndim != ndim:
        raise ValueError(f"{fn}: {name} must be {ndim}-d, got shape {value.shape}")
    if value.size and (value.min() < -2**31 or value.max() > _I32_MAX):
        raise ValueError(f"{fn}: {name} has values outside the int32 range")
    return np.ascontiguousarray(value, dtype=np.int32)


def int_scalar(fn: str, name: str, value, lo: int, hi: int) -> int:
    """An integer (Python or numpy, not bool) with lo <= value <= hi."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{fn}: {name} must be in [{lo}, {hi}], got {value}")
    return value


def float_scalar(fn: str, name: str, value, *, positive: bool = False) -> float:
    """A finite real number (optionally > 0)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a float, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or (positive and value <= 0.0):
        raise ValueError(f"{fn}: {name} must be a finite{' positive' if positive else ''} "
                         f"number, got {value}")
    return value


def same_shape(fn: str, name: str, value: np.ndarray, shape: tuple, other: str) -> None:
    """`value.shape == shape`, else a ValueError naming both arguments."""
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{fn}: {name} must have shape {tuple(shape)} (from {other}), "
                         f"got {tuple(value.shape)}")


def choice(fn: str, name: str, value, accepted: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if value not in accepted:
        raise ValueError(f"{fn}: {name} must be one of {', '.join(map(repr, accepted))}, "
                         f"got {value!r}")
    return value


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def row_block(n: int) -> int:
    """Threads per block for a one-block-per-row reduction over `n` elements.

    A GPU wants enough threads to hide latency but not so many that most idle: ~8-16 elements per
    thread at the top end, one warp for short rows.  Few distinct values, because every distinct
    block size is a separate compiled specialisation.
    """
    if n <= 256:
        return 32
    if n <= 1024:
        return 128
    if n <= 8192:
        return 256
    return 1024


# ---- device-resident arguments -----------------------------------------------------------------
# Public functions also take `pyptx.DeviceArray`s (so a decode step can stay on the device and be
# captured in a launch graph): same dtype/ndim checks, results allocated on the device too.

def is_device(value) -> bool:
    """True for a `pyptx.DeviceArray` (imported only when pyptx's runtime is already loaded)."""
    import sys
    mod = sys.modules.get("pyptx.runtime.device_array")
    return mod is not None and isinstance(value, mod.DeviceArray)


def _device_array(fn: str, name: str, value, dtype, ndims: tuple[int, ...]):
    if value.dtype != dtype:
        raise TypeError(f"{fn}: {name} must be {np.dtype(dtype).name}, got {value.dtype}"
                        f"{TO_F32 if dtype == np.float32 else ''}")
    if value.ndim not in ndims:
        want = " or ".join(f"{d}-d" for d in ndims)
        raise ValueError(f"{fn}: {name} must be {want}, got shape {value.shape}")
    if any(d > _I32_MAX for d in value.shape):
        raise ValueError(f"{fn}: {name} has a dimension over 2**31-1 ({value.shape})")
    return aligned(value)


def aligned(value):
    """A GPU DeviceArray whose address is not 16-byte aligned (a row slice `a[i:j]`, a torch
    view with a storage offset) copied to a fresh aligned one, by a kernel (so it stays
    stream-ordered and captures in a graph): the stdlib's kernels read with 128-bit loads, which
    a GPU refuses on a misaligned address.  Host arrays need nothing: launches stage them into
    aligned buffers."""
    if value.on_gpu and value.device_pointer % 16:
        from ._args import copy_device
        fresh = empty(value.shape, value.dtype, value)
        copy_device(fresh, value)
        return fresh
    return value


def empty(shape, dtype, like):
    """An uninitialised result: a DeviceArray when `like` is one, else a numpy array.  Inside
    `with pyptx.graph()` the device result belongs to the graph (no allocation is recorded)."""
    if is_device(like):
        from pyptx.runtime.device_array import result_empty
        return result_empty((shape,) if isinstance(shape, int) else tuple(shape), dtype)
    return np.empty(shape, dtype)


def constant_like(key, make, like):
    """A host constant table (`make()` builds it) where `like` lives: on the device it is
    uploaded once per device and kept resident, so a call inside `with pyptx.graph()` makes no
    synchronous copy; for numpy inputs the numpy array itself."""
    if is_device(like):
        from pyptx.runtime.device_array import resident_constant
        return resident_constant(key, make)
    return make()
