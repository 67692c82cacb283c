"""Intrinsics a Numba-CUDA kernel expects: `gridsize`, warp extras (`activemask`,
`lanemask_lt`, `vote_uni`, `match_any/all`), block-wide votes (`syncthreads_count/and/or`), the
remaining atomics (`sub inc dec nanmin nanmax`) and `ffs`.

Each lowers to the PTX instruction a CUDA C programmer gets from the matching `__intrinsic`:
`match.any.sync`, `bar.red.popc`, `atom.inc`, `brev` + `bfind.shiftamt` for `__ffs`, ...
Warp operations use the lanes that execute them together (`activemask`) as the member mask,
as pyptx's votes do; `pyptx.cuda` passes the user's explicit mask instead.
"""
from __future__ import annotations

from .. import types as T
from . import arith
from .casloop import cas_loop
from .intrinsics import atomic, atomic_target, float_minmax_cas, intrinsic
from .operands import int_operand, scalar_arg, special_register, u32_arg
from .values import PY_SCALARS, make_const


@intrinsic("gridsize", "ndim")
def _gridsize(cx, ndim):
    if ndim not in (1, 2, 3) or isinstance(ndim, bool):
        raise cx.err("pyptx.gridsize(ndim) takes the literal 1, 2 or 3")
    out = tuple(arith.emit(cx, "mul", [special_register(cx, f"ntid.{d}"), special_register(cx, f"nctaid.{d}")], T.i32)
                for d in "xyz"[:ndim])
    return out[0] if ndim == 1 else out


# ---- warp ----------------------------------------------------------------------------------

def active_mask(cx):
    return arith.emit(cx, "activemask", [], T.u32)


@intrinsic("activemask")
def _activemask(cx):
    return active_mask(cx)


@intrinsic("lanemask_lt")
def _lanemask_lt(cx):
    return arith.emit(cx, "bitcast", [special_register(cx, "lanemask_lt")], T.u32)


def vote_uni(cx, p, mask):
    pred = arith.convert(cx, arith.truth(cx, p), T.bool_)
    return arith.emit(cx, "vote", [pred, mask], T.bool_, mode="uni")


@intrinsic("vote_uni", "predicate")
def _vote_uni(cx, predicate):
    return vote_uni(cx, predicate, active_mask(cx))


def match(cx, mode, v, mask):
    """`match_any` -> u32 mask; `match_all` -> (u32 mask, bool_), as Numba's match_*_sync."""
    t = scalar_arg(cx, v, f"match_{mode}()'s value")
    if isinstance(v, PY_SCALARS):
        v = arith.convert(cx, v, t)
    if t.bits < 32 or t.is_bool:
        t = T.u32 if not t.is_float else T.f32
        v = arith.convert(cx, v, t)
    r = arith.emit(cx, "match", [v, mask], T.u32, mode=mode)
    if mode == "any":
        return r
    return r, arith.emit(cx, "cmp", [r, make_const(0, T.u32)], T.bool_, pred="ne")


@intrinsic("match_any", "value")
def _match_any(cx, value):
    return match(cx, "any", value, active_mask(cx))


@intrinsic("match_all", "value")
def _match_all(cx, value):
    return match(cx, "all", value, active_mask(cx))


def warp_reduce(cx, mode, v, mask):
    """`reduce_add(v)` ... over the lanes that execute it together: redux.sync on a 32-bit
    integer (a narrower one is widened first, keeping its signedness)."""
    t = scalar_arg(cx, v, f"reduce_{mode}()'s value")
    if t.is_float or t.is_bool or t.bits > 32:
        raise cx.err(f"reduce_{mode}() takes a 32-bit integer (redux.sync), got {t.name}; "
                     f"for floats reduce with shfl_xor")
    t = T.i32 if t.is_signed else T.u32
    return arith.emit(cx, "redux", [arith.convert(cx, v, t), mask], t, mode=mode)


for _mode in ("add", "min", "max", "and", "or", "xor"):
    intrinsic(f"reduce_{_mode}", "value")(
        lambda cx, value, _m=_mode: warp_reduce(cx, _m, value, active_mask(cx)))


def mask_arg(cx, mask):
    return u32_arg(cx, mask, "the warp mask")


# ---- block-wide votes ------------------------------------------------------------------------

def _barrier_red(cx, mode, p):
    pred = arith.convert(cx, arith.truth(cx, p), T.bool_)
    t = T.i32 if mode == "popc" else T.bool_
    return arith.emit(cx, "barrier_red", [pred], t, mode=mode)


for _name, _mode in (("syncthreads_count", "popc"), ("syncthreads_and", "and"),
                     ("syncthreads_or", "or")):
    intrinsic(_name, "predicate")(lambda cx, predicate, _m=_mode: _barrier_red(cx, _m, predicate))


# ---- atomics ---------------------------------------------------------------------------------

@intrinsic("atomic_sub", "array", "index", "value")
def _atomic_sub(cx, array, index, value):
    """PTX has no atom.sub: add the negation (what nvcc does for atomicSub)."""
    ptr = atomic_target(cx, "add", array, index)
    scalar_arg(cx, value, "atomic_sub()'s value")
    v = arith.emit(cx, "neg", [arith.convert_literal(cx, value, array.elem)], array.elem)
    return arith.emit(cx, "atomic", [ptr, v], array.elem, kind="add")


def _inc_dec(cx, kind, array, index, value):
    ptr = atomic_target(cx, kind, array, index)
    scalar_arg(cx, value, f"atomic_{kind}()'s value")
    t = array.elem
    v = arith.convert_literal(cx, value, t)
    if t is T.u32:
        return arith.emit(cx, "atomic", [ptr, v], T.u32, kind=kind)
    zero, one = make_const(0, t), make_const(1, t)

    def inc(old):
        wrap = arith.emit(cx, "cmp", [old, v], T.bool_, pred="ge")
        return arith.emit(cx, "select", [wrap, zero, arith.emit(cx, "add", [old, one], t)], t)

    def dec(old):
        wrap = arith.emit(cx, "or", [arith.emit(cx, "cmp", [old, zero], T.bool_, pred="eq"),
                                     arith.emit(cx, "cmp", [old, v], T.bool_, pred="gt")],
                          T.bool_)
        return arith.emit(cx, "select", [wrap, v, arith.emit(cx, "sub", [old, one], t)], t)
    return cas_loop(cx, ptr, t, inc if kind == "inc" else dec)


@intrinsic("atomic_inc", "array", "index", "value")
def _atomic_inc(cx, array, index, value):
    """old = a[i]; a[i] = 0 if old >= value else old + 1 (PTX atom.inc.u32; u64: a CAS loop)."""
    return _inc_dec(cx, "inc", array, index, value)


@intrinsic("atomic_dec", "array", "index", "value")
def _atomic_dec(cx, array, index, value):
    """old = a[i]; a[i] = value if old == 0 or old > value else old - 1 (PTX atom.dec.u32;
    u64: a CAS loop)."""
    return _inc_dec(cx, "dec", array, index, value)


def _nan_minmax(cx, kind, array, index, value):
    if not getattr(getattr(array, "elem", None), "is_float", False):
        return atomic(cx, kind, array, index, value)
    ptr = atomic_target(cx, kind, array, index)
    scalar_arg(cx, value, f"atomic_nan{kind}()'s value")
    v = arith.convert_literal(cx, value, array.elem)
    return float_minmax_cas(cx, kind, array, ptr, v, nan_is_missing=True)


@intrinsic("atomic_nanmin", "array", "index", "value")
def _atomic_nanmin(cx, array, index, value):
    return _nan_minmax(cx, "min", array, index, value)


@intrinsic("atomic_nanmax", "array", "index", "value")
def _atomic_nanmax(cx, array, index, value):
    return _nan_minmax(cx, "max", array, index, value)


# ---- bits ------------------------------------------------------------------------------------

@intrinsic("ffs", "x")
def _ffs(cx, x):
    """1 + the position of the lowest set bit, 0 for 0 (CUDA `__ffs`: brev + bfind.shiftamt)."""
    v, t, _ = int_operand(cx, x, "ffs")
    if t.is_signed:                        # bfind must not skip sign bits
        t = T.u32 if t.bits == 32 else T.u64
        v = arith.emit(cx, "bitcast", [v], t)
    rev = arith.emit(cx, "brev", [v], t)
    pos = arith.emit(cx, "bfind", [rev], T.u32, shiftamt=True)
    one = arith.emit(cx, "add", [pos, make_const(1, T.u32)], T.u32)
    return arith.emit(cx, "bitcast", [one], T.i32)


# ---- pyptx.cuda: Numba's warp spellings with an explicit member mask ---------------------------

def _register_sync():
    from .intrinsics import shfl, vote
    for name, mode in (("shfl_sync", "idx"), ("shfl_up_sync", "up"),
                       ("shfl_down_sync", "down"), ("shfl_xor_sync", "bfly")):
        intrinsic(f"cuda.{name}", "mask", "value", "lane")(
            lambda cx, mask, value, lane, _m=mode: shfl(cx, _m, value, lane,
                                                         mask_arg(cx, mask)))
    for name, mode in (("all_sync", "all"), ("any_sync", "any"), ("ballot_sync", "ballot")):
        intrinsic(f"cuda.{name}", "mask", "predicate")(
            lambda cx, mask, predicate, _m=mode: vote(cx, _m, predicate, mask_arg(cx, mask)))
    intrinsic("cuda.eq_sync", "mask", "predicate")(
        lambda cx, mask, predicate: vote_uni(cx, predicate, mask_arg(cx, mask)))
    for mode in ("any", "all"):
        intrinsic(f"cuda.match_{mode}_sync", "mask", "value")(
            lambda cx, mask, value, _m=mode: match(cx, _m, value, mask_arg(cx, mask)))
    for name, scope in (("threadfence_block", "cta"), ("threadfence_system", "sys")):
        intrinsic(f"cuda.{name}")(lambda cx, _s=scope: arith.emit(cx, "fence", [], None,
                                                                  scope=_s))


_register_sync()


@intrinsic("cuda.fma", "a", "b", "c")
def _cuda_fma(cx, a, b, c):
    from .intrinsics import REGISTRY
    return REGISTRY["math.fma"](cx, [a, b, c], {})


# ---- tuples indexed at run time ------------------------------------------------------------

def tuple_at(cx, values: tuple, index, what: str = "the tuple index must be"):
    """`COEFFS[k]` or `x.shape[k]` with a run-time `k` (Numba allows it for a tuple of
    numbers): a chain of selects over the elements, with Python's (and Numba's) meaning of a
    negative index.  An index outside -len..len-1 ends the launch (`trap_if`: a MemoryFault on
    the CPU executor), as Numba raises IndexError (debug=True) or ends the thread rather than
    return a made-up element (docs/decisions.md).  Once `k` is known (after unrolling) the
    selects and the check fold away."""
    if not values or len(values) > 64 or not all(
            is_number(v) for v in values):
        raise cx.err("a tuple indexed at run time must hold 1 to 64 numbers; index it with a "
                     "compile-time int, or pass the values as an array parameter")
    t, weak = arith.promote_many(cx, list(values), "tuple element")
    it = scalar_arg(cx, index, "the tuple index")
    if not it.is_int:
        raise cx.err(f"a tuple index must be an integer, got {it.name}")
    n = len(values)
    kt = T.i32 if it.bits <= 32 else T.i64
    ut = T.u32 if kt is T.i32 else T.u64
    k = arith.convert(cx, index, kt)
    # k + n (wrapping) is below 2n, as unsigned, exactly when -n <= k < n
    shifted = arith.emit(cx, "add", [k, make_const(n, kt)], kt)
    bad = arith.emit(cx, "cmp", [arith.emit(cx, "cvt", [shifted], ut), make_const(2 * n, ut)],
                     T.bool_, pred="ge")
    arith.emit(cx, "trap_if", [bad], None,
               why=f"index out of range: {what} in -{n}..{n - 1}")
    neg = arith.emit(cx, "cmp", [k, make_const(0, kt)], T.bool_, pred="lt")
    k = arith.emit(cx, "select", [neg, shifted, k], kt)
    out = arith.convert(cx, values[-1], t)
    for pos in range(n - 2, -1, -1):
        hit = arith.emit(cx, "cmp", [k, make_const(pos, kt)], T.bool_, pred="eq")
        out = arith.emit(cx, "select", [hit, arith.convert(cx, values[pos], t), out], t, weak)
    return out


def is_number(v) -> bool:
    return isinstance(v, PY_SCALARS) or isinstance(getattr(v, "type", None), T.ScalarType) \
        and not isinstance(v, type)
