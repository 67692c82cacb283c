"""`pyptx.const_array(table)` / Numba's `cuda.const.array_like(table)`: a numpy array from
outside the kernel (a module-level or closure variable) baked into the PTX as a `.const` array.

Why constant memory: a small table every thread reads at the same index (filter taps,
coefficients) is served by the constant cache in one broadcast, and it costs no kernel
parameter.  The array is read when the kernel compiles and frozen there, like every module
constant a kernel reads (the disk cache key holds its bytes, pyptx/cachekey.py).  Inside the
kernel it is a read-only array (`ld.const`) with its compile-time shape: indexable, sliceable,
passable to device functions; storing into it is a CompileError.  The same data used twice is
one `.const` array; 64 KiB in all per kernel (the size of CUDA's constant bank).

A numpy array a kernel merely names (`out[i] = TAB[i]` with `TAB` a module global or closure
variable) is the same thing without the call: Numba freezes such globals into the kernel as
constants, so pyptx does too (`module_array`, from `Lowerer.compile_time`).  `const_array` of
such an already-converted array returns it unchanged.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..ir.core import MemDecl
from . import arith
from .intrinsics import intrinsic
from .memory import _slot
from .values import ArrayView

LIMIT_BYTES = 64 * 1024


def module_array(cx, table: np.ndarray, name: str) -> ArrayView:
    """A numpy array named in a kernel, read as a constant-memory array (Numba's reading)."""
    try:
        T.from_dtype(table.dtype)
    except (KeyError, TypeError):
        raise cx.err(f"'{name}' is a numpy array of {table.dtype}, which kernels cannot read; "
                     f"convert it at module level (e.g. {name} = {name}.astype(np.float32)) "
                     f"or pass it as an array parameter") from None
    if not 1 <= table.ndim <= 3 or table.size == 0:
        raise cx.err(f"'{name}' is a numpy array of shape {table.shape}; a kernel reads a "
                     f"module-level array as constant memory, which takes a non-empty array "
                     f"of 1 to 3 dimensions: reshape it, or pass it as an array parameter")
    return const_array(cx, table, f"the module-level array '{name}'")


def const_array(cx, table, what: str) -> ArrayView:
    if isinstance(table, ArrayView) and table.space == "const":
        return table                    # a module-level array, already constant memory
    if not isinstance(table, np.ndarray):
        raise cx.err(f"{what} takes a numpy array defined outside the kernel (a module-level or "
                     f"closure variable, read when the kernel compiles), got "
                     f"{arith.describe(table)}; e.g. TAPS = np.array([...], np.float32) at "
                     f"module level, then t = {what[:-2]}(TAPS)")
    try:
        elem = T.from_dtype(table.dtype)
    except (KeyError, TypeError):
        raise cx.err(f"{what}: arrays of {table.dtype} cannot be kernel data; convert the table, "
                     f"e.g. TABLE.astype(np.float32)") from None
    if not 1 <= table.ndim <= 3 or table.size == 0:
        raise cx.err(f"{what} takes a non-empty array of 1 to 3 dimensions, got shape "
                     f"{table.shape}; reshape it")
    data = np.ascontiguousarray(table).tobytes()
    slot = _slot(elem)
    decl = next((d for d in cx.fn.consts if d.elem is slot and d.data == data), None)
    if decl is None:
        total = sum(len(d.data) for d in cx.fn.consts) + len(data)
        if total > LIMIT_BYTES:
            raise cx.err(f"constant memory holds at most {LIMIT_BYTES // 1024} KiB per kernel; "
                         f"these tables need {total} bytes: pass the larger ones as array "
                         f"parameters (read through the read-only cache)")
        decl = MemDecl(f"cmem{len(cx.fn.consts)}", slot, table.size, max(16, elem.mem_bytes),
                       data)
        cx.fn.consts.append(decl)
    base = arith.emit(cx, "addr", [], T.PtrType("const", slot), space="const", symbol=decl.name)
    return ArrayView(base, elem, tuple(int(n) for n in table.shape), "const", None)


@intrinsic("const_array", "table")
def _const_array(cx, table):
    return const_array(cx, table, "pyptx.const_array()")


@intrinsic("cuda.const.array_like", "ary")
def _array_like(cx, ary):
    return const_array(cx, ary, "cuda.const.array_like()")
