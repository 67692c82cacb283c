"""The mbarrier and TMA intrinsics (sm_90; docs/hopper.md, "TMA and mbarriers").

mbarriers live in a shared array of u64 and are named like any shared element, `(bars, i)`:
`mbarrier_init(bars, i, count)`, `mbarrier_arrive`, `mbarrier_arrive_expect_tx`,
`mbarrier_expect_tx`, `mbarrier_try_wait`, `mbarrier_wait`, `fence_mbarrier_init`.

`tma_load(dst, di, tmap, coords, bars, bi)` takes its coordinates in numpy order (outermost
first, like every index in pyptx) and hands them to PTX innermost first.  `tmap` must be a
`pyptx.tensormap` kernel parameter (`TensorMapRef` in the kernel's scope): there is nothing
else a kernel can do with one.
"""
from __future__ import annotations

from .. import types as T
from ..ir.core import Instr
from . import arith, memory
from .intrinsics import intrinsic, scalar_arg
from .values import ArrayView, is_const

#: the most arrivals one mbarrier phase can expect (PTX: count in 1 .. 2**20 - 1)
MAX_COUNT = 2**20 - 1
#: the largest tx-count one phase may expect (PTX: 2**20 - 1 bytes)
MAX_TX = 2**20 - 1


class TensorMapRef:
    """A `pyptx.tensormap` parameter inside a kernel: the IR Param (type ptr.param<u8>) whose
    value is the generic address of the 128-byte map.  Only `tma_load` takes one."""
    __slots__ = ("name", "param")

    def __init__(self, name: str, param):
        self.name, self.param = name, param

    def __repr__(self) -> str:
        return f"<tensor map parameter {self.name!r}>"


def _bar_ptr(cx, bars, i, what: str):
    if not isinstance(bars, ArrayView) or bars.space != "shared" or bars.elem != T.u64:
        raise cx.err(f"{what}'s mbarrier array must be a shared array of u64, got "
                     f"{arith.describe(bars)}; allocate it with "
                     f"bars = pyptx.shared.array(n, pyptx.u64)")
    memory.inner_contiguous(cx, bars, what)
    return memory.element_ptr(cx, bars, i)


def _u32(cx, v, what: str, lo: int, hi: int, example: str):
    t = scalar_arg(cx, v, what)
    if t.is_float or (t.is_bool and not isinstance(v, bool)):
        raise cx.err(f"{what} must be an integer, got {t.name}; write e.g. {example}")
    if is_const(v) and not lo <= int(v) <= hi:
        raise cx.err(f"{what} must be between {lo} and {hi}, got {v}; write e.g. {example}")
    return arith.convert(cx, v, T.u32)


def _parity(cx, v, what: str):
    t = scalar_arg(cx, v, what)
    if t.is_float:
        raise cx.err(f"{what} must be 0 or 1 (the parity of the phase to wait for), got "
                     f"{t.name}; write e.g. phase & 1")
    if is_const(v) and int(v) not in (0, 1):
        raise cx.err(f"{what} must be 0 or 1 (the parity of the phase to wait for), got {v}; "
                     f"write e.g. phase & 1")
    return arith.convert(cx, v, T.u32)


@intrinsic("mbarrier_init", "bars", "i", "count")
def _mbarrier_init(cx, bars, i, count):
    p = _bar_ptr(cx, bars, i, "mbarrier_init()")
    n = _u32(cx, count, "mbarrier_init()'s count", 1, MAX_COUNT, "1 (one arriving thread)")
    arith.emit(cx, "mbar_init", [p, n], None)


@intrinsic("mbarrier_arrive", "bars", "i")
def _mbarrier_arrive(cx, bars, i):
    p = _bar_ptr(cx, bars, i, "mbarrier_arrive()")
    return arith.emit(cx, "mbar_arrive", [p], T.u64)


@intrinsic("mbarrier_arrive_expect_tx", "bars", "i", "nbytes")
def _mbarrier_arrive_expect_tx(cx, bars, i, nbytes):
    p = _bar_ptr(cx, bars, i, "mbarrier_arrive_expect_tx()")
    n = _u32(cx, nbytes, "mbarrier_arrive_expect_tx()'s nbytes", 0, MAX_TX,
             "the box's bytes, e.g. 64 * 64 * 2")
    arith.emit(cx, "mbar_arrive_expect_tx", [p, n], None)


@intrinsic("mbarrier_expect_tx", "bars", "i", "nbytes")
def _mbarrier_expect_tx(cx, bars, i, nbytes):
    p = _bar_ptr(cx, bars, i, "mbarrier_expect_tx()")
    n = _u32(cx, nbytes, "mbarrier_expect_tx()'s nbytes", 0, MAX_TX,
             "the box's bytes, e.g. 64 * 64 * 2")
    arith.emit(cx, "mbar_expect_tx", [p, n], None)


@intrinsic("mbarrier_try_wait", "bars", "i", "parity")
def _mbarrier_try_wait(cx, bars, i, parity):
    p = _bar_ptr(cx, bars, i, "mbarrier_try_wait()")
    return arith.emit(cx, "mbar_try_wait", [p, _parity(cx, parity, "mbarrier_try_wait()'s "
                                                                   "parity")], T.bool_)


@intrinsic("mbarrier_wait", "bars", "i", "parity")
def _mbarrier_wait(cx, bars, i, parity):
    p = _bar_ptr(cx, bars, i, "mbarrier_wait()")
    arith.emit(cx, "mbar_wait", [p, _parity(cx, parity, "mbarrier_wait()'s parity")], None)


@intrinsic("fence_mbarrier_init")
def _fence_mbarrier_init(cx):
    arith.emit(cx, "fence_mbarrier_init", [], None)


#: the alignment a TMA destination array gets: the 128-byte swizzle's repeat (1024 bytes)
#: covers every mode's (PTX wants 128 bytes; a swizzled box starts on its pattern's repeat)
TILE_ALIGN = 1024


def _align_tile(cx, view) -> None:
    """Raise the alignment of the static shared array under `view` to TILE_ALIGN (a tile's
    offset inside it is the kernel's business: the executor checks it at run time)."""
    b = view.base
    while isinstance(b, Instr) and b.op in ("gep", "bitcast"):
        b = b.operands[0]
    if isinstance(b, Instr) and b.op == "addr":
        for d in cx.fn.shared:
            if d.name == b.attrs.get("symbol"):
                d.align = max(d.align, TILE_ALIGN)


def _tile(cx, view, what: str, name: str):
    if not isinstance(view, ArrayView) or view.space != "shared":
        raise cx.err(f"{what}'s {name} must be a shared-memory array, got "
                     f"{arith.describe(view)}; allocate one with pyptx.shared.array(shape, "
                     f"dtype)")
    memory.inner_contiguous(cx, view, f"{what}'s {name}")
    _align_tile(cx, view)


def _map_and_coords(cx, tmap, coords, what: str) -> list:
    """The coordinates as i32 IR values, innermost first (PTX's order)."""
    if not isinstance(tmap, TensorMapRef):
        raise cx.err(f"{what}'s tmap must be a tensor map parameter of the kernel, got "
                     f"{arith.describe(tmap)}; declare the parameter as tmap: "
                     f"pyptx.tensormap and pass a pyptx.TensorMap(array, box) for it")
    if not isinstance(coords, tuple) or len(coords) not in (2, 3):
        raise cx.err(f"{what}'s coords must be a tuple of 2 or 3 element coordinates "
                     f"(numpy order, outermost first, one per dimension of the tensor map), "
                     f"got {arith.describe(coords)}; write e.g. (row0, col0)")
    cs = []
    for k, c in enumerate(coords):
        t = scalar_arg(cx, c, f"{what}'s coords[{k}]")
        if t.is_float or t.is_bool:
            raise cx.err(f"{what}'s coords[{k}] must be an integer element coordinate, "
                         f"got {t.name}; convert with i32(x)")
        cs.append(arith.convert(cx, c, T.i32))
    return cs[::-1]


@intrinsic("tma_load", "dst", "di", "tmap", "coords", "bars", "bi")
def _tma_load(cx, dst, di, tmap, coords, bars, bi):
    _tile(cx, dst, "tma_load()", "dst")
    cs = _map_and_coords(cx, tmap, coords, "tma_load()")
    dptr = memory.element_ptr(cx, dst, di)
    bptr = _bar_ptr(cx, bars, bi, "tma_load()")
    arith.emit(cx, "tma_load", [dptr, tmap.param, bptr] + cs, None)


@intrinsic("tma_store", "tmap", "coords", "src", "si")
def _tma_store(cx, tmap, coords, src, si):
    _tile(cx, src, "tma_store()", "src")
    cs = _map_and_coords(cx, tmap, coords, "tma_store()")
    sptr = memory.element_ptr(cx, src, si)
    cx.written.add(tmap.name)            # the launcher copies the array back (CPU executor)
    arith.emit(cx, "tma_store", [tmap.param, sptr] + cs, None)


@intrinsic("tma_store_wait", "n", n=0)
def _tma_store_wait(cx, n):
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 63:
        raise cx.err(f"tma_store_wait()'s n must be a compile-time int 0..63 (how many bulk "
                     f"store groups may still be reading shared memory), got "
                     f"{arith.describe(n)}; write e.g. tma_store_wait(0)")
    arith.emit(cx, "tma_store_wait", [], None, n=n)
