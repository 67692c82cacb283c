"""The intrinsic registry: DSL name -> lowering function.

Adding an intrinsic is one marker in `pyptx/dsl.py` (or `pyptx/math.py`) plus one
`@intrinsic("name", params...)` lowering here (math functions live in `mathfns.py`); a new IR op
also needs its record and PTX lowering (docs/architecture.md, "Adding an intrinsic").  A lowering
receives the lowering context and its arguments already bound by name.
"""
from __future__ import annotations

import builtins

from .. import types as T
from . import arith, memory
from .casloop import cas_loop
from .operands import FULL_MASK, int_operand, scalar_arg, special_register, u32_arg  # noqa: F401
from .values import PY_SCALARS, ArrayView, is_const, make_const

REGISTRY: dict = {}
#: DSL markers the frontend lowers as syntax (the `for` statement, calls.py / loops.py), not
#: through REGISTRY
SPECIAL_FORMS = frozenset({"range", "static_range"})
_MISSING = object()


def intrinsic(name: str, *params: str, **defaults):
    """Register `fn(cx, **bound_args)` as the lowering of `name` (params in call order)."""
    def deco(fn):
        def lower(cx, args, kwargs):
            bound = _bind(cx, name, params, defaults, args, kwargs)
            return fn(cx, **bound)
        REGISTRY[name] = lower
        return fn
    return deco


def _bind(cx, name, params, defaults, args, kwargs):
    shown = name.split(".")[-1]
    usage = f"{shown}({', '.join(params)})"
    if len(args) > len(params):
        raise cx.err(f"{shown}() takes {len(params)} argument(s), got {len(args)}: write {usage}")
    out = dict(zip(params, args))
    for k, v in kwargs.items():
        if k not in params or k in out:
            raise cx.err(f"{shown}() got an unexpected or repeated argument '{k}': write {usage}")
        out[k] = v
    for p in params:
        if p not in out:
            if p not in defaults:
                raise cx.err(f"{shown}() is missing the argument '{p}': write {usage}")
            out[p] = defaults[p]
    return out


#: Python builtins that kernels may call -> registry key
BUILTINS = {builtins.min: "builtin.min", builtins.max: "builtin.max",
            builtins.abs: "builtin.abs", builtins.float: "builtin.float",
            builtins.int: "builtin.int", builtins.bool: "builtin.bool",
            builtins.len: "builtin.len"}





# ---- builtins --------------------------------------------------------------------------------

def _minmax(cx, args, kwargs, op):
    if kwargs or len(args) < 2:
        raise cx.err(f"{op}() in a kernel takes two or more numbers (no keywords); write "
                     f"{op}(a, b)")
    acc = args[0]
    for v in args[1:]:
        acc = _minmax2(cx, op, acc, v)
    return acc


def _minmax2(cx, op, a, b):
    if is_const(a) and is_const(b):
        return builtins.min(a, b) if op == "min" else builtins.max(a, b)
    t, weak = arith.promote2(cx, a, b, op)
    x, y = arith.convert(cx, a, t), arith.convert(cx, b, t)
    if t.is_bool:
        return arith.emit(cx, "and" if op == "min" else "or", [x, y], t)
    return arith.emit(cx, op, [x, y], t, weak)


REGISTRY["builtin.min"] = lambda cx, args, kwargs: _minmax(cx, args, kwargs, "min")
REGISTRY["builtin.max"] = lambda cx, args, kwargs: _minmax(cx, args, kwargs, "max")


@intrinsic("builtin.abs", "x")
def _abs(cx, x):
    if is_const(x):
        return abs(x)
    if isinstance(x, (tuple, complex)):
        from .complex64 import absolute
        return absolute(cx, x)
    t, weak = arith.type_of(cx, x)
    if t.is_bool or (t.is_int and not t.is_signed):
        return x
    return arith.emit(cx, "abs", [x], t, weak)


@intrinsic("builtin.float", "x")
def _float(cx, x):
    if is_const(x):
        return float(x)
    scalar_arg(cx, x, "float()'s argument")
    return arith.convert(cx, x, T.f32)


@intrinsic("builtin.int", "x")
def _int(cx, x):
    if is_const(x):
        return int(x)
    scalar_arg(cx, x, "int()'s argument")
    return arith.convert(cx, x, T.i32)


@intrinsic("builtin.bool", "x")
def _bool(cx, x):
    return arith.truth(cx, x)


@intrinsic("builtin.len", "a")
def _len(cx, a):
    if isinstance(a, tuple):
        return len(a)
    if not isinstance(a, ArrayView):
        raise cx.err(f"len() needs an array, got {arith.describe(a)}; write len(x) with an "
                     f"array x")
    return memory.attribute(cx, a, "shape")[0]


# ---- indices, barriers --------------------------------------------------------------------




@intrinsic("grid", "ndim")
def _grid(cx, ndim):
    if ndim not in (1, 2, 3) or isinstance(ndim, bool):
        raise cx.err("pyptx.grid(ndim) takes the literal 1, 2 or 3; write e.g. "
                     "i = pyptx.grid(1) or x, y = pyptx.grid(2)")
    out = []
    for d in "xyz"[:ndim]:
        prod = arith.emit(cx, "mul", [special_register(cx, f"ctaid.{d}"), special_register(cx, f"ntid.{d}")], T.i32)
        out.append(arith.emit(cx, "add", [prod, special_register(cx, f"tid.{d}")], T.i32))
    return out[0] if ndim == 1 else tuple(out)


@intrinsic("lane_id")
def _lane_id(cx):
    return special_register(cx, "laneid")


@intrinsic("syncthreads")
def _syncthreads(cx):
    arith.emit(cx, "barrier", [], None)


@intrinsic("syncwarp", "mask", mask=FULL_MASK)
def _syncwarp(cx, mask):
    arith.emit(cx, "syncwarp", [u32_arg(cx, mask, "syncwarp()'s mask")], None)


@intrinsic("threadfence")
def _threadfence(cx):
    arith.emit(cx, "fence", [], None, scope="gl")





# ---- warp operations -----------------------------------------------------------------------

def shfl(cx, mode, v, lane, mask=None):
    """`mask` (a u32 value; None = all 32 lanes) is the member mask (`pyptx.cuda`'s *_sync)."""
    mask = make_const(FULL_MASK, T.u32) if mask is None else mask
    t, _ = arith.type_of(cx, v)
    if isinstance(v, PY_SCALARS):
        v = arith.convert(cx, v, t)
    lane_t = scalar_arg(cx, lane, "the lane argument")
    if not lane_t.is_int:
        raise cx.err(f"the lane argument must be an integer, got {lane_t.name}; convert with "
                     f"i32(x)")
    lane_v = arith.convert(cx, lane, T.i32 if lane_t != T.u32 else T.u32)
    if t.bits in (32, 64) and not t.is_bool:
        return arith.emit(cx, "shfl", [v, lane_v, mask], t, mode=mode)
    wide = T.f32 if t.is_float else T.i32
    r = arith.emit(cx, "shfl", [arith.convert(cx, v, wide), lane_v, mask], wide, mode=mode)
    return arith.truth(cx, r) if t.is_bool else arith.convert(cx, r, t)


for _name, _mode in (("shfl_xor", "bfly"), ("shfl_down", "down"), ("shfl_up", "up"),
                     ("shfl_idx", "idx")):
    intrinsic(_name, "value", "lane")(
        lambda cx, value, lane, _m=_mode: shfl(cx, _m, value, lane))


def vote(cx, mode, p, mask=None):
    """Votes among the lanes that execute them together (CUDA's `__any_sync(__activemask(), p)`):
    a full member mask would hang (GPU) inside a branch that only some lanes of the warp take.
    `pyptx.cuda`'s *_sync spellings pass the user's `mask` instead."""
    t = T.u32 if mode == "ballot" else T.bool_
    pred = arith.convert(cx, arith.truth(cx, p), T.bool_)
    if mask is None:
        mask = arith.emit(cx, "activemask", [], T.u32)
    return arith.emit(cx, "vote", [pred, mask], t, mode=mode)


for _name, _mode in (("vote_any", "any"), ("vote_all", "all"), ("ballot", "ballot")):
    intrinsic(_name, "predicate")(lambda cx, predicate, _m=_mode: vote(cx, _m, predicate))


# ---- bit operations ------------------------------------------------------------------------




@intrinsic("popc", "x")
def _popc(cx, x):
    v, _, _ = int_operand(cx, x, "popc")
    return arith.emit(cx, "popc", [v], T.i32)


@intrinsic("clz", "x")
def _clz(cx, x):
    v, t, bits = int_operand(cx, x, "clz")
    r = arith.emit(cx, "clz", [v], T.i32)
    if bits < t.bits:
        r = arith.emit(cx, "sub", [r, make_const(t.bits - bits, T.i32)], T.i32)
    return r


@intrinsic("brev", "x")
def _brev(cx, x):
    t = scalar_arg(cx, x, "brev()'s argument")
    if not t.is_int or t.bits < 32:
        raise cx.err(f"brev() needs a 32- or 64-bit integer, got {t.name}; convert with u32(x) "
                     f"or u64(x)")
    return arith.emit(cx, "brev", [arith.convert(cx, x, t)], t)


@intrinsic("dp4a", "a", "b", "c")
def _dp4a(cx, a, b, c):
    ops = []
    for v, name in ((a, "a"), (b, "b"), (c, "c")):
        t = scalar_arg(cx, v, f"dp4a()'s {name}")
        if is_const(v) and isinstance(v, int):
            t = T.i32 if -2**31 <= v < 2**31 else T.u32
        if t not in (T.i32, T.u32):
            raise cx.err(f"dp4a() needs i32 or u32 operands, got {t.name} for {name}; convert "
                         f"with i32(x) or u32(x)")
        ops.append(arith.convert(cx, v, t))
    return arith.emit(cx, "dp4a", ops, ops[2].type)


@intrinsic("bitcast", "x", "dtype")
def _bitcast(cx, x, dtype):
    dst = memory.as_dtype(cx, dtype, "bitcast()'s type")
    t = scalar_arg(cx, x, "bitcast()'s value")
    if is_const(x):
        x = arith.convert(cx, x, t)
    if t.bits != dst.bits or t.is_bool or dst.is_bool:
        raise cx.err(f"bitcast() needs types of the same width: {t.name} has {t.bits} bits, "
                     f"{dst.name} has {dst.bits}; convert first (e.g. i64(x)) or bitcast to a "
                     f"{t.bits}-bit type")
    return x if t == dst else arith.emit(cx, "bitcast", [x], dst)


# ---- memory ---------------------------------------------------------------------------------

@intrinsic("shared.array", "shape", "dtype")
def _shared_array(cx, shape, dtype):
    return memory.allocate(cx, "shared", shape, dtype)


@intrinsic("local.array", "shape", "dtype")
def _local_array(cx, shape, dtype):
    return memory.allocate(cx, "local", shape, dtype)


@intrinsic("shared.dynamic", "dtype")
def _shared_dynamic(cx, dtype):
    return memory.dynamic_shared(cx, dtype)


_ATOMIC_TYPES = {
    "add": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "min": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "max": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "exch": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "and": ("i32", "u32", "i64", "u64"), "or": ("i32", "u32", "i64", "u64"),
    "xor": ("i32", "u32", "i64", "u64"), "cas": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "inc": ("u32", "u64"), "dec": ("u32", "u64"),
}


def atomic_target(cx, kind, array, index):
    if not isinstance(array, ArrayView):
        raise cx.err(f"atomic_{kind}() needs an array as its first argument, got "
                     f"{arith.describe(array)}; write pyptx.atomic_{kind}(array, index, value)")
    if array.space == "local":
        raise cx.err(f"atomic_{kind}() works on global or shared arrays, not local ones; use "
                     f"an array parameter or a pyptx.shared.array")
    if array.elem.name not in _ATOMIC_TYPES[kind]:
        raise cx.err(f"atomic_{kind}() is not available for {array.elem.name} arrays; use one "
                     f"of {', '.join(_ATOMIC_TYPES[kind])}")
    memory.mark_written(cx, array)
    return memory.element_ptr(cx, array, index)


def atomic(cx, kind, array, index, value):
    ptr = atomic_target(cx, kind, array, index)
    scalar_arg(cx, value, f"atomic_{kind}()'s value")
    v = arith.convert_literal(cx, value, array.elem)
    if kind in ("min", "max") and array.elem.is_float:
        return float_minmax_cas(cx, kind, array, ptr, v)
    return arith.emit(cx, "atomic", [ptr, v], array.elem, kind=kind)


for _kind in ("add", "min", "max", "exch", "and", "or", "xor"):
    intrinsic(f"atomic_{_kind}", "array", "index", "value")(
        lambda cx, array, index, value, _k=_kind: atomic(cx, _k, array, index, value))


@intrinsic("atomic_cas", "array", "index", "expected", "value")
def _atomic_cas(cx, array, index, expected, value):
    ptr = atomic_target(cx, "cas", array, index)
    e = arith.convert(cx, expected, array.elem)
    v = arith.convert(cx, value, array.elem)
    return arith.emit(cx, "atomic", [ptr, e, v], array.elem, kind="cas")


def float_minmax_cas(cx, kind, array, ptr, v, nan_is_missing=False):
    """PTX has no float atom.min/max before sm_90: a compare-and-swap loop on the bits.
    Stores only when `v` is strictly smaller (larger); a NaN `v` never changes memory.
    `nan_is_missing` (atomic_nanmin/nanmax): a NaN in memory is replaced by any non-NaN `v`."""
    def attempt(old):
        better = arith.emit(cx, "cmp", [v, old], T.bool_, pred="lt" if kind == "min" else "gt")
        if nan_is_missing:
            fill = arith.emit(cx, "and", [arith.emit(cx, "isnan", [old], T.bool_), arith.emit(
                cx, "not", [arith.emit(cx, "isnan", [v], T.bool_)], T.bool_)], T.bool_)
            better = arith.emit(cx, "or", [better, fill], T.bool_)
        return better
    return cas_loop(cx, ptr, array.elem, lambda old: v, attempt)


# ---- print ----------------------------------------------------------------------------------

_PRINTF = {"int": {8: "%d", 16: "%d", 32: "%d", 64: "%ld"},
           "uint": {8: "%u", 16: "%u", 32: "%u", 64: "%lu"}}


def lower_print(cx, node):
    sep, end = " ", "\n"
    for k in node.keywords:
        v = cx.expr(k.value)
        if k.arg not in ("sep", "end") or not isinstance(v, str):
            raise cx.err("print() in a kernel accepts only sep= and end= string keywords; "
                         "write e.g. print(x, y, sep=\", \")", k)
        if k.arg == "sep":
            sep = v
        else:
            end = v
    parts, values = [], []
    for a in node.args:
        v = cx.expr(a)
        cx.set_loc(a)
        if isinstance(v, str):
            parts.append(v.replace("%", "%%"))
        elif isinstance(v, bool):
            parts.append(str(v))
        elif isinstance(v, int):
            parts.append(str(v))
        elif isinstance(v, float):
            parts.append("%f" % v)
        else:
            t = scalar_arg(cx, v, "print()'s argument")
            if t.is_bool:
                values.append(arith.convert(cx, v, T.i32))
                parts.append("%d")
            elif t.is_float:
                values.append(v)
                parts.append("%f")
            else:
                values.append(v)
                parts.append(_PRINTF[t.kind][t.bits])
    cx.set_loc(node)
    fmt = sep.replace("%", "%%").join(parts) + end.replace("%", "%%")
    arith.emit(cx, "print", values, None, fmt=fmt)
    cx.uses_printf = True
    return None
