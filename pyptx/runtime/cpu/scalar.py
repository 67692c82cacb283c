"""Builders of the per-lane scalar instructions: integer and float arithmetic, logic, shifts,
bit counts, compares, selects and conversions (numpy semantics in alu.py / fpmath.py).

Each builder registers itself with `@builds` (opkinds.py) together with its profiler class, so
the decoder and the profiler read one table.  Most of these ops are classed by their type
(`_typed`): fp16/fp32/fp64 with their flops, `int` otherwise, `sfu` for `.approx` forms.
"""
from __future__ import annotations

import numpy as np

from . import alu, fpmath
from .opkinds import builds
from .operands import DTYPES, TYPES, reader, types_of, writer, writer_pair
from .tensorcore import build_cvt_bf16, build_cvt_x2

ROUNDING = ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")


def _typed(flops: int = 0):
    """Profiler class of a typed ALU op: `sfu` if approximate, fp<bits> (counting `flops` per
    thread) on a float type, else `int`."""
    def classify(parts) -> tuple:
        if "approx" in parts:
            return "sfu", 0
        types = types_of(parts)
        dt = DTYPES[types[-1]] if types else None
        if dt is not None and dt.kind == "f":
            return f"fp{8 * dt.itemsize}", flops
        return "int", 0
    return classify


def _unary(ctx, ins, typ, fn, dtype_out=None):
    d = writer(ctx, ins.operands[0], dtype_out or typ)
    a = reader(ctx, ins.operands[1], typ)
    return lambda st, sel: d(st, sel, fn(a(st, sel)))


def _binary(ctx, ins, typ, fn, tb=None, dtype_out=None):
    d = writer(ctx, ins.operands[0], dtype_out or typ)
    a = reader(ctx, ins.operands[1], typ)
    b = reader(ctx, ins.operands[2], tb or typ)
    return lambda st, sel: d(st, sel, fn(a(st, sel), b(st, sel)))


def _ternary(ctx, ins, typ, fn, tc=None, dtype_out=None, tb=None):
    d = writer(ctx, ins.operands[0], dtype_out or typ)
    a = reader(ctx, ins.operands[1], typ)
    b = reader(ctx, ins.operands[2], tb or typ)
    c = reader(ctx, ins.operands[3], tc or typ)
    return lambda st, sel: d(st, sel, fn(a(st, sel), b(st, sel), c(st, sel)))


def _float_post(parts, typ, fn):
    """Wrap a float op with .ftz (inputs and output) and .sat (clamp to [0, 1], NaN -> 0)."""
    dt = DTYPES[typ]
    if "ftz" in parts and typ == "f32":
        inner = fn
        fn = lambda *xs: fpmath.ftz(np.asarray(inner(*[fpmath.ftz(np.asarray(x, dt))
                                                       for x in xs]), dt))
    if "sat" in parts:
        inner2 = fn
        fn = lambda *xs: _sat(np.asarray(inner2(*xs), dt))
    return fn


def _sat(y):
    return np.where(np.isnan(y), y.dtype.type(0), np.clip(y, 0, 1)).astype(y.dtype)


_TYPED = _typed()
_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


@builds("add", "sub", "mul", cls=_typed(flops=1))
def _arith(ctx, ins, parts):
    name = parts[0]
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        fn = _ARITH[name]
        return _binary(ctx, ins, typ, _float_post(parts, typ, lambda a, b: fn(a, b)))
    if name == "mul" and "hi" in parts:
        return _binary(ctx, ins, typ, lambda a, b: alu.mul_hi(a, b, dt))
    if name == "mul" and "wide" in parts:
        wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[typ]
        return _binary(ctx, ins, typ, lambda a, b: alu.mul_wide(a, b, dt), dtype_out=wide)
    if "sat" in parts and typ == "s32":
        op = _ARITH[name]
        return _binary(ctx, ins, typ, lambda a, b: np.clip(
            op(np.asarray(a, np.int64), b), -2**31, 2**31 - 1).astype(np.int32))
    return _binary(ctx, ins, typ, _ARITH[name])


@builds("mad", cls=_typed(flops=2))
def _mad(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        return _fma(ctx, ins, parts)
    if "hi" in parts:
        return _ternary(ctx, ins, typ, lambda a, b, c: alu.mul_hi(a, b, dt) + c)
    if "wide" in parts:
        wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[typ]
        wdt = DTYPES[wide]
        return _ternary(ctx, ins, typ, lambda a, b, c: alu.mul_wide(a, b, dt) + np.asarray(c, wdt),
                        tc=wide, dtype_out=wide)
    return _ternary(ctx, ins, typ, lambda a, b, c: a * b + c)


@builds("fma", cls=_typed(flops=2))
def _fma(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if typ == "f64":
        fn = fpmath.fma_f64
    else:
        fn = lambda a, b, c: fpmath.fma_small(a, b, c, dt)
    return _ternary(ctx, ins, typ, _float_post(parts, typ, fn))


@builds("div", cls=_TYPED)
def _div(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        return _binary(ctx, ins, typ, _float_post(parts, typ, lambda a, b: np.divide(a, b)))
    return _binary(ctx, ins, typ, lambda a, b: alu.div_int(a, b, dt))


@builds("rem", cls=_TYPED)
def _rem(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _binary(ctx, ins, typ, lambda a, b: alu.rem_int(a, b, dt))


def _sign_bit(dt):
    u = np.dtype(f"u{dt.itemsize}")
    return u, u.type(1 << (8 * dt.itemsize - 1))


@builds("neg", "abs", cls=_TYPED)
def _sign(ctx, ins, parts):
    """neg / abs of a float flip / clear its sign bit only (NaN payloads kept, as on the GPU);
    of an integer they wrap (neg and abs of the most negative value are itself)."""
    is_abs = parts[0] == "abs"
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        u, sb = _sign_bit(dt)
        if not is_abs:
            return _unary(ctx, ins, typ, lambda a: (np.asarray(a, dt).view(u) ^ sb).view(dt))
        mask = u.type(~int(sb) & ((1 << (8 * dt.itemsize)) - 1))
        return _unary(ctx, ins, typ, _float_post(
            parts, typ, lambda a: (np.asarray(a, dt).view(u) & mask).view(dt)))
    if is_abs:
        return _unary(ctx, ins, typ, lambda a: np.abs(a).astype(dt))
    return _unary(ctx, ins, typ, lambda a: (dt.type(0) - a).astype(dt))


@builds("min", "max", cls=_TYPED)
def _minmax(ctx, ins, parts):
    is_max = parts[0] == "max"
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        return _binary(ctx, ins, typ, _float_post(
            parts, typ, lambda a, b: fpmath.fminmax(a, b, is_max)))
    return _binary(ctx, ins, typ, np.maximum if is_max else np.minimum)


_LOGIC = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


@builds("and", "or", "xor", cls=_TYPED)
def _logic(ctx, ins, parts):
    return _binary(ctx, ins, types_of(parts)[-1], _LOGIC[parts[0]])


@builds("not", cls=_TYPED)
def _not(ctx, ins, parts):
    return _unary(ctx, ins, types_of(parts)[-1], np.invert)


@builds("cnot", cls=_TYPED)
def _cnot(ctx, ins, parts):
    dt = DTYPES[types_of(parts)[-1]]
    return _unary(ctx, ins, types_of(parts)[-1], lambda a: (np.asarray(a) == 0).astype(dt))


@builds("shl", "shr", cls=_TYPED)
def _shift(ctx, ins, parts):
    left = parts[0] == "shl"
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    fn = alu.shl if left else alu.shr
    amount = ins.operands[2]
    if amount[0] == "imm" and 0 <= amount[1][1] < dt.itemsize * 8:
        k = dt.type(amount[1][1])          # common case: a constant in-range shift
        raw = np.left_shift if left else np.right_shift
        d = writer(ctx, ins.operands[0], typ)
        a = reader(ctx, ins.operands[1], typ)
        return lambda st, sel: d(st, sel, raw(a(st, sel), k))
    return _binary(ctx, ins, typ, lambda a, b: fn(a, b, dt), tb="u32")


@builds("popc", cls=_TYPED)
def _popc(ctx, ins, parts):
    return _unary(ctx, ins, types_of(parts)[-1], alu.popc, dtype_out="u32")


@builds("clz", cls=_TYPED)
def _clz(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _unary(ctx, ins, typ, lambda a: alu.clz(a, DTYPES[typ]), dtype_out="u32")


@builds("brev", cls=_TYPED)
def _brev(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, lambda a: alu.brev(a, dt).reshape(np.shape(a)))


@builds("bfind", cls=_TYPED)
def _bfind(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, lambda a: alu.bfind(a, dt, "shiftamt" in parts),
                  dtype_out="u32")


@builds("bfe", cls=_TYPED)
def _bfe(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _ternary(ctx, ins, typ, lambda a, b, c: alu.bfe(a, b, c, dt), tb="u32", tc="u32")


@builds("dp4a", cls=_TYPED)
def _dp4a(ctx, ins, parts):
    ta, tb = types_of(parts)[-2:]
    out = "u32" if ta == "u32" and tb == "u32" else "s32"
    return _ternary(ctx, ins, ta, lambda a, b, c: alu.dp4a(a, b, c, ta == "s32", tb == "s32"),
                    tb=tb, tc=out, dtype_out=out)


_SFU = {"rsqrt": lambda x: 1.0 / np.sqrt(x), "ex2": np.exp2, "lg2": np.log2, "sin": np.sin,
        "cos": np.cos, "tanh": np.tanh}


@builds(*_SFU, cls="sfu")
def _float_fn(ctx, ins, parts):
    """Approximate/transcendental f32 ops: computed in float64, rounded once."""
    fn64 = _SFU[parts[0]]
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    f = lambda a: fn64(np.asarray(a, np.float64)).astype(dt)
    return _unary(ctx, ins, typ, _float_post(parts, typ, f))


@builds("sqrt", cls=_TYPED)
def _sqrt(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _unary(ctx, ins, typ, _float_post(parts, typ, np.sqrt))


@builds("rcp", cls=_TYPED)
def _rcp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, _float_post(parts, typ, lambda a: np.divide(dt.type(1), a)))


@builds("copysign", cls=_TYPED)
def _copysign(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _binary(ctx, ins, typ, lambda a, b: np.copysign(b, a))


@builds("testp", cls=_TYPED)
def _testp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    kind = [p for p in parts[1:] if p not in TYPES][0]
    return _unary(ctx, ins, typ, lambda a: alu.testp(kind, a), dtype_out="pred")


@builds("setp", cls=_TYPED)
def _setp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    cmp = parts[1]
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    ops = ins.operands
    dp, dq = writer_pair(ctx, ops[0], "pred")
    a = reader(ctx, ops[1], typ)
    b = reader(ctx, ops[2], typ)
    c = reader(ctx, ops[3], "pred") if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)

    def run(st, sel):
        r = alu.setp(cmp, a(st, sel), b(st, sel))
        if comb is not None:
            cc = c(st, sel)
            q = comb(~r, cc)
            r = comb(r, cc)
        elif dq is not None:
            q = ~r
        dp(st, sel, r)
        if dq is not None:
            dq(st, sel, q)
    return run


@builds("selp", cls=_TYPED)
def _selp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    d = writer(ctx, ins.operands[0], typ)
    a = reader(ctx, ins.operands[1], typ)
    b = reader(ctx, ins.operands[2], typ)
    c = reader(ctx, ins.operands[3], "pred")
    return lambda st, sel: d(st, sel, np.where(c(st, sel), a(st, sel), b(st, sel)))


@builds("cvt", cls="convert")
def _cvt(ctx, ins, parts):
    if "f16x2" in parts or "bf16x2" in parts:
        return build_cvt_x2(ctx, ins, parts)
    dst, src = types_of(parts)[-2:]
    rnd = next((p for p in parts if p in ROUNDING), None)
    sat, ftz = "sat" in parts, "ftz" in parts
    if "bf16" in (dst, src):
        return build_cvt_bf16(ctx, ins, dst, src, rnd)
    sdt, ddt = DTYPES[src], DTYPES[dst]
    return _unary(ctx, ins, src, lambda a: alu.cvt(a, sdt, ddt, rnd, sat, ftz), dtype_out=dst)

