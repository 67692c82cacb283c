"""bfloat16 on the host.  numpy has no bfloat16 dtype, so a `bf16[:]` kernel argument is a
numpy uint16 array holding the bit patterns (an `ml_dtypes.bfloat16` array is accepted by
`to_bf16` and converted with `.view(np.uint16)` semantics).  These two functions convert:

    bits = pyptx.bfloat16.to_bf16(x_f32)      # round to nearest even, NaN stays NaN
    x = pyptx.bfloat16.from_bf16(bits)        # exact (bf16 is the top half of an f32)
"""
from __future__ import annotations

import numpy as np


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
