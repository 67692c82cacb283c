"""Lowerings of the Hopper warpgroup-MMA intrinsics: `wgmma_desc`, `wgmma`, `wgmma_fence`,
`wgmma_commit`, `wgmma_wait`, `fence_proxy_async` (sm_90a; docs/hopper.md, "Warpgroup MMA").

A matrix descriptor is plain u64 integer arithmetic over the shared address (so constant parts
fold and a kernel may also build or advance one by hand); `wgmma` is one IR op whose result is
a VecType of N/2 f32 registers, returned as a tuple like `mma_sync`'s.
"""
from __future__ import annotations

from .. import types as T
from . import arith, memory
from .intrinsics import intrinsic, scalar_arg
from .tensorcore import _const_int, _half_type, _lanes, _shared_view, _words
from .values import is_const, make_const

#: descriptor swizzle field (bits 62-63) per swizzle size in bytes
SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


def _align_tile(cx, view, mode: int) -> None:
    """A swizzle pattern is applied to the shared address itself and repeats every 8 * mode
    bytes, so a static shared array read through a swizzled descriptor is aligned to that
    (1024 bytes for 128B): its tile then starts where the pattern does, as the descriptor's
    base offset 0 assumes.  (Dynamic shared memory: the kernel places its tiles itself.)"""
    base = view.base
    if mode and getattr(base, "op", None) == "addr":
        for decl in cx.fn.shared:
            if decl.name == base.attrs.get("symbol"):
                decl.align = max(decl.align, 8 * mode)


def _u64(cx, v, what: str):
    t = scalar_arg(cx, v, what)
    if not t.is_int or t.is_bool or isinstance(v, bool):
        raise cx.err(f"{what} must be an integer byte offset, got {t.name}; write e.g. 128")
    if is_const(v):
        if not 0 <= v < (1 << 18) or v % 16:
            raise cx.err(f"{what} must be a multiple of 16 between 0 and {(1 << 18) - 16} "
                         f"(the descriptor holds it >> 4 in 14 bits), got {v}")
    return arith.convert(cx, v, T.u64)


def _field(cx, v, shift: int):
    """((v >> 4) & 0x3FFF) << shift, as u64 IR."""
    x = arith.emit(cx, "shr", [v, make_const(4, T.u32)], T.u64)
    x = arith.emit(cx, "and", [x, make_const(0x3FFF, T.u64)], T.u64)
    return arith.emit(cx, "shl", [x, make_const(shift, T.u32)], T.u64) if shift else x


@intrinsic("wgmma_desc", "smem", "idx", "swizzle", "lbo", "sbo", swizzle=128, lbo=None,
           sbo=None)
def _wgmma_desc(cx, smem, idx, swizzle, lbo, sbo):
    view = _shared_view(cx, smem, "wgmma_desc()'s first argument")
    mode = _const_int(cx, swizzle, "wgmma_desc()'s swizzle", (0, 32, 64, 128))
    if mode == 0 and (lbo is None or sbo is None):
        raise cx.err("wgmma_desc(swizzle=0) needs both lbo= and sbo= (the byte offsets "
                     "between 8x16-byte core matrices along K and along M/N; docs/hopper.md)")
    # defaults: the dense K-major swizzled tile (rows of `mode` bytes, 8-row groups apart)
    lbo = 16 if lbo is None else lbo
    sbo = 8 * mode if sbo is None else sbo
    memory.inner_contiguous(cx, view, "wgmma_desc()")
    _align_tile(cx, view, mode)
    ptr = memory.element_ptr(cx, view, idx)
    addr = arith.emit(cx, "bitcast", [ptr], T.u64)
    word = _field(cx, addr, 0)
    for v, what, shift in ((lbo, "lbo", 16), (sbo, "sbo", 32)):
        f = _field(cx, _u64(cx, v, f"wgmma_desc()'s {what}"), shift)
        word = arith.emit(cx, "or", [word, f], T.u64)
    if SWIZZLE_CODE[mode]:
        word = arith.emit(cx, "or", [word, make_const(SWIZZLE_CODE[mode] << 62, T.u64)], T.u64)
    return word


def _descriptor(cx, v, what: str):
    t = scalar_arg(cx, v, what)
    if not (t.is_int and t.bits == 64) or isinstance(v, bool):
        raise cx.err(f"{what} must be a u64 matrix descriptor, got {t.name}; build one with "
                     f"pyptx.wgmma_desc(smem, idx, swizzle=..., lbo=..., sbo=...)")
    return arith.convert(cx, v, T.u64)


def _flag(cx, v, what: str) -> bool:
    if not isinstance(v, bool):
        raise cx.err(f"{what} must be the literal True or False (it is an immediate of the "
                     f"instruction); write {what.split()[-1]}=True or False")
    return v


@intrinsic("wgmma", "a", "b_desc", "acc", "atype", "trans_a", "trans_b", "scale_d",
           atype="bf16", trans_a=False, trans_b=False, scale_d=True)
def _wgmma(cx, a, b_desc, acc, atype, trans_a, trans_b, scale_d):
    ht = _half_type(cx, atype, "wgmma()'s atype")
    ta = _flag(cx, trans_a, "wgmma()'s trans_a")
    tb_ = _flag(cx, trans_b, "wgmma()'s trans_b")
    if not isinstance(acc, tuple) or len(acc) * 2 not in range(8, 257, 8):
        n = len(acc) if isinstance(acc, tuple) else None
        raise cx.err(f"wgmma()'s acc must be a tuple of N/2 f32 accumulators for "
                     f"m64nNk16 with N = 8, 16, ..., 256 (4, 8, ..., 128 values), got "
                     f"{arith.describe(acc)}{'' if n is None else f' of length {n}'}; e.g. "
                     f"acc = (0.0,) * 64 for N = 128")
    if isinstance(a, tuple):
        if ta:
            raise cx.err("wgmma()'s trans_a applies to A in shared memory only: A in "
                         "registers is always K-major; drop trans_a or pass a descriptor")
        ops = _words(cx, a, 4, "wgmma()'s a", T.u32)
    else:
        ops = [_descriptor(cx, a, "wgmma()'s a")]
    ops.append(_descriptor(cx, b_desc, "wgmma()'s b_desc"))
    if isinstance(scale_d, bool):
        ops.append(make_const(scale_d, T.bool_))
    else:
        st = scalar_arg(cx, scale_d, "wgmma()'s scale_d")
        if not st.is_bool:
            raise cx.err(f"wgmma()'s scale_d must be True, False or a bool, got {st.name}; "
                         f"write e.g. scale_d=(k > 0)")
        ops.append(arith.convert(cx, scale_d, T.bool_))
    n = 2 * len(acc)
    ops += _words(cx, acc, len(acc), "wgmma()'s acc", T.f32)
    vec = arith.emit(cx, "wgmma", ops, T.VecType(T.f32, n // 2), n=n, atype=ht.name,
                     trans_a=ta, trans_b=tb_)
    return _lanes(cx, vec)


@intrinsic("wgmma_fence")
def _wgmma_fence(cx):
    arith.emit(cx, "wgmma_fence", [], None)


@intrinsic("wgmma_commit")
def _wgmma_commit(cx):
    arith.emit(cx, "wgmma_commit", [], None)


@intrinsic("wgmma_wait", "n", n=0)
def _wgmma_wait(cx, n):
    k = _const_int(cx, n, "wgmma_wait()'s n", range(8))
    arith.emit(cx, "wgmma_wait", [], None, n=k)


@intrinsic("fence_proxy_async")
def _fence_proxy_async(cx):
    arith.emit(cx, "fence_proxy_async", [], None)
