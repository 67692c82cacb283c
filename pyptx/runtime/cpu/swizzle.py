"""The shared-memory swizzle modes of Hopper's async proxy, in one place.

Why one module: TMA (`cp.async.bulk.tensor` with a tensor map's swizzle) writes a tile into shared
memory in a swizzled order and `wgmma` (a matrix descriptor's swizzle mode) reads it back in the
same order.  The CPU executor must use one definition for both, or a kernel pairing them would be
exact here and wrong on a GPU (or the other way round).

The PTX ISA's modes (32, 64 and 128 bytes) permute the 16-byte chunks of each row of a repeating
pattern: in byte-address terms, address bits [4, 4+B) are XORed with bits [7, 7+B), B = 1, 2, 3
for 32B, 64B, 128B (CUTLASS writes these as Swizzle<B, 4, 3>).  The pattern repeats every
256, 512, 1024 bytes; it is applied to the shared-memory address itself, so a swizzled tile must
start at a multiple of its repeat (the hardware's alignment rule, checked by the callers).
Mode 0 is no swizzle (the interleaved / "none" layout).
"""
from __future__ import annotations

import numpy as np

#: swizzle size in bytes -> number of XORed bits B
SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}


def repeat_bytes(mode: int) -> int:
    """The span after which a swizzle pattern repeats (the base alignment it needs)."""
    return 16 if mode == 0 else 8 * mode


def swizzle(addr, mode: int):
    """The shared-memory byte address that logical byte address `addr` (int or int64 array) is
    stored at under swizzle `mode` (0, 32, 64, 128).  An involution: swizzle(swizzle(a)) == a."""
    b = SWIZZLE_BITS[mode]
    if b == 0:
        return addr
    a = np.asarray(addr, np.int64) if not isinstance(addr, int) else addr
    mask = ((1 << b) - 1) << 7
    return a ^ ((a & mask) >> 3)
