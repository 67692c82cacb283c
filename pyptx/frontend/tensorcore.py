"""Lowerings of the tensor-core intrinsics: `mma_sync`, `ldmatrix`, `pack2`, `unpack2`,
`cp_async`, `cp_async_wait` (sm_80+; layouts and semantics in docs/tensor-cores.md).

Fragments are tuples of scalars (u32 words holding two f16/bf16 values, f32 accumulators), so a
kernel keeps them in registers and unpacks them like any tuple.  `pack2`/`unpack2` are plain IR
(conversions, shifts, bitcasts): they need no instruction of their own.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from . import arith, memory
from .intrinsics import intrinsic, scalar_arg
from ..ir.core import Const
from .values import ArrayView, is_const, make_const

_HALF_TYPES = {"f16": T.f16, "bf16": T.bf16}


def _half_type(cx, v, what: str) -> T.ScalarType:
    """'f16' / 'bf16' (a string or the pyptx type)."""
    if isinstance(v, T.ScalarType) and v.name in _HALF_TYPES:
        return v
    if isinstance(v, str) and v in _HALF_TYPES:
        return _HALF_TYPES[v]
    raise cx.err(f"{what} must be f16 or bf16 (pyptx.f16 / pyptx.bf16 or the string), got "
                 f"{arith.describe(v)}; write e.g. pyptx.f16")


def _words(cx, v, n: int, what: str, t: T.ScalarType) -> list:
    if not isinstance(v, tuple) or len(v) != n:
        raise cx.err(f"{what} must be a tuple of {n} {t.name} values, got {arith.describe(v)}"
                     f"{'' if not isinstance(v, tuple) else f' of length {len(v)}'}; pass "
                     f"exactly {n} values, e.g. ({', '.join(f'w{k}' for k in range(n))})")
    out = []
    for k, x in enumerate(v):
        xt = scalar_arg(cx, x, f"{what}[{k}]")
        if t == T.u32 and not (xt.is_int and (xt.bits == 32 or is_const(x))):
            raise cx.err(f"{what}[{k}] must be a 32-bit integer word (two packed halves, e.g. "
                         f"from pyptx.pack2 or pyptx.ldmatrix), got {xt.name}")
        if t == T.f32 and not (xt.is_float or is_const(x)):
            raise cx.err(f"{what}[{k}] must be a float accumulator, got {xt.name}; write "
                         f"f32(x)")
        if t == T.i32 and not ((xt.is_int and not xt.is_bool and xt.bits == 32)
                               or (is_const(x) and isinstance(x, int) and not isinstance(x, bool)
                                   and -2**31 <= x < 2**31)):
            raise cx.err(f"{what}[{k}] must be a 32-bit integer accumulator (s8/u8 mma "
                         f"accumulates in i32), got {xt.name}; write i32(x), or 0 to start")
        out.append(arith.convert(cx, x, t))
    return out


def _lanes(cx, vec) -> tuple:
    """The registers of a multi-register result (a VecType value) as a tuple of scalars."""
    return tuple(arith.emit(cx, "lane", [vec], vec.type.elem, index=k) for k in range(vec.type.n))


_BYTE_TYPES = {"s8": "s8", "i8": "s8", "u8": "u8"}


def _mma_input_type(cx, v) -> str:
    """mma_sync's atype as the PTX type name: 'f16' / 'bf16' (m16n8k16, f32 accumulators) or
    's8' / 'u8' (m16n8k32, i32 accumulators); a string or the pyptx type (i8 means s8)."""
    name = v.name if isinstance(v, T.ScalarType) else v if isinstance(v, str) else None
    if name in _HALF_TYPES:
        return name
    if name in _BYTE_TYPES:
        return _BYTE_TYPES[name]
    raise cx.err(f"mma_sync()'s atype must be f16 or bf16 (f32 accumulators), or s8 or u8 "
                 f"(i32 accumulators) (a string, or pyptx.f16 / pyptx.bf16 / pyptx.i8 / "
                 f"pyptx.u8), got {arith.describe(v)}; write e.g. "
                 f"atype=\"f16\" or atype=\"s8\"")


@intrinsic("mma_sync", "a", "b", "c", "atype", atype="f16")
def _mma_sync(cx, a, b, c, atype):
    kind = _mma_input_type(cx, atype)
    acc = T.i32 if kind in ("s8", "u8") else T.f32
    na = 4                  # int8 with a 2-tuple a (and a 1-tuple b): the m16n8k16 form
    if kind in ("s8", "u8") and isinstance(a, tuple) and len(a) == 2:
        na = 2
    ops = (_words(cx, a, na, "mma_sync()'s a", T.u32)
           + _words(cx, b, na // 2, "mma_sync()'s b", T.u32)
           + _words(cx, c, 4, "mma_sync()'s c", acc))
    return _lanes(cx, arith.emit(cx, "mma", ops, T.VecType(acc, 4), atype=kind))


def _shared_view(cx, v, what: str) -> ArrayView:
    if not isinstance(v, ArrayView) or v.space != "shared":
        raise cx.err(f"{what} must be a shared-memory array, got {arith.describe(v)}; "
                     f"allocate one with pyptx.shared.array(shape, dtype)")
    return v


def _const_int(cx, v, what: str, allowed) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v not in allowed:
        raise cx.err(f"{what} must be a compile-time int, one of "
                     f"{', '.join(map(str, allowed))}; got {arith.describe(v)}: write one of "
                     f"those literals")
    return v


@intrinsic("ldmatrix", "smem", "idx", "count", "trans", count=1, trans=False)
def _ldmatrix(cx, smem, idx, count, trans):
    view = _shared_view(cx, smem, "ldmatrix()'s first argument")
    n = _const_int(cx, count, "ldmatrix()'s count", (1, 2, 4))
    if not isinstance(trans, bool):
        raise cx.err("ldmatrix()'s trans must be the literal True or False; write "
                     "trans=True or trans=False")
    if view.elem.mem_bytes not in (1, 2, 4):
        raise cx.err(f"ldmatrix() reads 8x8 matrices of 16-bit elements (rows of 16 bytes); "
                     f"the array holds {view.elem.name} (use f16, bf16, u16 or i16, u32 words, "
                     f"or i8/u8 bytes)")
    memory.inner_contiguous(cx, view, "ldmatrix()")
    ptr = memory.element_ptr(cx, view, idx)
    return _lanes(cx, arith.emit(cx, "ldmatrix", [ptr], T.VecType(T.u32, n), count=n,
                                 trans=trans))


def _exact_f32(v) -> bool:
    """A Python number that f32 holds exactly (so rounding it to f32 first changes nothing)."""
    return not isinstance(v, bool) and float(np.float32(v)) == v


@intrinsic("pack2", "lo", "hi", "dtype")
def _pack2(cx, lo, hi, dtype):
    ht = _half_type(cx, dtype, "pack2()'s dtype")
    kinds = [scalar_arg(cx, v, f"pack2()'s {w}") for v, w in ((lo, "lo"), (hi, "hi"))]
    if all(t == T.f32 or (is_const(v) and _exact_f32(v)) for t, v in zip(kinds, (lo, hi))):
        return arith.emit(cx, "pack2", [arith.convert(cx, lo, T.f32),
                                        arith.convert(cx, hi, T.f32)], T.u32, dtype=ht.name)
    words = []      # other types convert to the half type directly (no double rounding)
    for v in (lo, hi):
        h = arith.convert(cx, v, ht)
        bits = arith.emit(cx, "bitcast", [h], T.u16)
        words.append(arith.convert(cx, bits, T.u32))
    high = arith.emit(cx, "shl", [words[1], make_const(16, T.u32)], T.u32)
    return arith.emit(cx, "or", [words[0], high], T.u32)


@intrinsic("unpack2", "u", "dtype")
def _unpack2(cx, u, dtype):
    ht = _half_type(cx, dtype, "unpack2()'s dtype")
    t = scalar_arg(cx, u, "unpack2()'s word")
    if not t.is_int or t.bits != 32:
        raise cx.err(f"unpack2() needs a 32-bit integer word, got {t.name}; convert with "
                     f"u32(x) or reinterpret with pyptx.bitcast(x, u32)")
    w = arith.convert(cx, u, T.u32)
    if ht == T.bf16:        # bf16 is the top half of an f32: no conversion instruction at all
        lo = arith.emit(cx, "shl", [w, make_const(16, T.u32)], T.u32)
        hi = arith.emit(cx, "and", [w, make_const(0xFFFF0000, T.u32)], T.u32)
        return (arith.emit(cx, "bitcast", [lo], T.f32), arith.emit(cx, "bitcast", [hi], T.f32))
    out = []
    for half in (w, arith.emit(cx, "shr", [w, make_const(16, T.u32)], T.u32)):
        h = arith.emit(cx, "bitcast", [arith.emit(cx, "cvt", [half], T.u16)], T.f16)
        out.append(arith.emit(cx, "cvt", [h], T.f32))
    return tuple(out)


@intrinsic("cp_async", "dst", "di", "src", "si", "nbytes", "src_bytes", src_bytes=None)
def _cp_async(cx, dst, di, src, si, nbytes, src_bytes):
    dview = _shared_view(cx, dst, "cp_async()'s dst")
    if not isinstance(src, ArrayView) or src.space != "global":
        raise cx.err(f"cp_async()'s src must be a global array (a kernel parameter), got "
                     f"{arith.describe(src)}; pass an array parameter of the kernel")
    n = _const_int(cx, nbytes, "cp_async()'s nbytes", (4, 8, 16))
    fill = _src_bytes(cx, src_bytes, n)
    memory.inner_contiguous(cx, dview, "cp_async()'s dst")
    memory.inner_contiguous(cx, src, "cp_async()'s src")
    dptr = memory.element_ptr(cx, dview, di)
    sptr = memory.element_ptr(cx, src, si)
    arith.emit(cx, "cp_async", [dptr, sptr] + fill, None, nbytes=n)


def _src_bytes(cx, v, n: int) -> list:
    """cp_async's src_bytes as the optional third IR operand (u32): [] when every byte is
    read (None, or the constant n), else the zero-fill size (0..n; the rest is written as 0)."""
    if v is None:
        return []
    what = "cp_async()'s src_bytes"
    t = scalar_arg(cx, v, what)
    if not t.is_int or t.is_bool or isinstance(v, bool):
        raise cx.err(f"{what} must be an integer byte count 0..{n}, got {t.name}; write e.g. "
                     f"{n} if ok else 0")
    c = v if is_const(v) else (v.value if isinstance(v, Const) else None)
    if c is not None:
        if not 0 <= int(c) <= n:
            raise cx.err(f"{what} must be between 0 and nbytes ({n}), got {c}; bytes past "
                         f"src_bytes are written as zeros, so pass at most {n}")
        if int(c) == n:
            return []
    return [arith.convert(cx, v, T.u32)]


@intrinsic("cp_async_wait", "n", n=0)
def _cp_async_wait(cx, n):
    k = _const_int(cx, n, "cp_async_wait()'s n", range(8))
    arith.emit(cx, "cp_async_wait", [], None, n=k)
