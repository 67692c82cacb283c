"""bfloat16 on the host is `ml_dtypes.bfloat16` (the dtype JAX, TensorFlow and PyTorch's numpy
bridge use; a pyptx dependency).  A `bf16[:]` kernel parameter takes such an array, or a uint16
array of the bit patterns (the documented low-level form: the two are the same bytes, nothing is
converted).  The stdlib's bfloat16 results are ml_dtypes arrays.  For bit patterns:

    bits = pyptx.bfloat16.to_bf16(x_f32)      # round to nearest even, NaN stays NaN
    x = pyptx.bfloat16.from_bf16(bits)        # exact (bf16 is the top half of an f32)
"""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes as _ml_dtypes
    #: numpy's dtype of ml_dtypes.bfloat16 (uint16 only where ml_dtypes is missing)
    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:          # pragma: no cover - ml_dtypes is a dependency
    BFLOAT16 = np.dtype(np.uint16)


def as_bfloat16(bits: np.ndarray) -> np.ndarray:
    """A uint16 array of bf16 bit patterns viewed as `ml_dtypes.bfloat16` (no copy)."""
    return bits.view(BFLOAT16)


def to_bf16(x) -> np.ndarray:
    """float values (or an ml_dtypes bfloat16 array) -> uint16 bf16 bit patterns, rounded to
    nearest even from float32 (float64 input is rounded to float32 first)."""
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return x.view(np.uint16)
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return np.where(nan, (u >> 16) | 0x40, r).astype(np.uint16)


def from_bf16(bits) -> np.ndarray:
    """uint16 bf16 bit patterns -> float32 values (exact)."""
    b = np.asarray(bits)
    if b.dtype.name == "bfloat16":
        b = b.view(np.uint16)
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
