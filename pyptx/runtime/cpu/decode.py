"""Pre-decode every instruction of an entry once into an `Op`: a closure `run(st, sel)` over
numpy lanes plus what the scheduler needs (kind, guard slot, branch target).

`sel` is None (all lanes of the batch) or an int index array of the lanes executing.  The table
`BUILDERS` maps the base opcode to a builder; anything else is a LaunchError naming the
instruction and its PTX line.
"""
from __future__ import annotations

import numpy as np

from . import alu, fpmath
from .operands import DTYPES, TYPES, Ctx, reader, writer

# WARPSYNC (shfl.sync, vote.sync, bar.warp.sync) is "NORMAL" when the warp is converged; when
# it is not, lanes wait until every not-exited lane of the member mask has arrived.
WARPSYNC, NORMAL, BRANCH, EXIT, BARRIER = -1, 0, 1, 2, 3
ROUNDING = ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")


class Op:
    # probe: None, or (checked launches only) f(st, lanes, taken) that the scheduler calls when
    # a branch/exit executes or a barrier releases (bar.red included, whose `run` is only its
    # reduction: instrument.instrument_op keys the probe on the kind, not on a missing run)
    __slots__ = ("run", "kind", "gslot", "gneg", "target", "instr", "mask", "probe")

    def __init__(self, run, kind=NORMAL, target=None, mask=None):
        self.run, self.kind, self.target, self.mask = run, kind, target, mask
        self.gslot, self.gneg, self.instr, self.probe = None, False, None, None


def types_of(parts):
    return [p for p in parts if p in TYPES]


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


def _arith(name):
    def build(ctx, ins, parts):
        typ = types_of(parts)[-1]
        dt = DTYPES[typ]
        if dt.kind == "f":
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[name]
            return _binary(ctx, ins, typ, _float_post(parts, typ, lambda a, b: fn(a, b)))
        if name == "mul" and "hi" in parts:
            return _binary(ctx, ins, typ, lambda a, b: alu.mul_hi(a, b, dt))
        if name == "mul" and "wide" in parts:
            wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[typ]
            return _binary(ctx, ins, typ, lambda a, b: alu.mul_wide(a, b, dt), dtype_out=wide)
        if "sat" in parts and typ == "s32":
            op = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[name]
            return _binary(ctx, ins, typ, lambda a, b: np.clip(
                op(np.asarray(a, np.int64), b), -2**31, 2**31 - 1).astype(np.int32))
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[name]
        return _binary(ctx, ins, typ, fn)
    return build


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


def _fma(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if typ == "f64":
        fn = fpmath.fma_f64
    else:
        fn = lambda a, b, c: fpmath.fma_small(a, b, c, dt)
    return _ternary(ctx, ins, typ, _float_post(parts, typ, fn))


def _div(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        return _binary(ctx, ins, typ, _float_post(parts, typ, lambda a, b: np.divide(a, b)))
    return _binary(ctx, ins, typ, lambda a, b: alu.div_int(a, b, dt))


def _rem(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _binary(ctx, ins, typ, lambda a, b: alu.rem_int(a, b, dt))


def _sign_bit(dt):
    u = np.dtype(f"u{dt.itemsize}")
    return u, u.type(1 << (8 * dt.itemsize - 1))


def _neg(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        u, sb = _sign_bit(dt)
        return _unary(ctx, ins, typ, lambda a: (np.asarray(a, dt).view(u) ^ sb).view(dt))
    return _unary(ctx, ins, typ, lambda a: (dt.type(0) - a).astype(dt))


def _abs(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    if dt.kind == "f":
        u, sb = _sign_bit(dt)
        mask = u.type(~int(sb) & ((1 << (8 * dt.itemsize)) - 1))
        return _unary(ctx, ins, typ, _float_post(
            parts, typ, lambda a: (np.asarray(a, dt).view(u) & mask).view(dt)))
    return _unary(ctx, ins, typ, lambda a: np.abs(a).astype(dt))


def _minmax(is_max):
    def build(ctx, ins, parts):
        typ = types_of(parts)[-1]
        dt = DTYPES[typ]
        if dt.kind == "f":
            return _binary(ctx, ins, typ, _float_post(
                parts, typ, lambda a, b: fpmath.fminmax(a, b, is_max)))
        return _binary(ctx, ins, typ, np.maximum if is_max else np.minimum)
    return build


def _logic(name):
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]

    def build(ctx, ins, parts):
        return _binary(ctx, ins, types_of(parts)[-1], fn)
    return build


def _not(ctx, ins, parts):
    return _unary(ctx, ins, types_of(parts)[-1], np.invert)


def _cnot(ctx, ins, parts):
    dt = DTYPES[types_of(parts)[-1]]
    return _unary(ctx, ins, types_of(parts)[-1], lambda a: (np.asarray(a) == 0).astype(dt))


def _shift(left):
    def build(ctx, ins, parts):
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
    return build


def _popc(ctx, ins, parts):
    return _unary(ctx, ins, types_of(parts)[-1], alu.popc, dtype_out="u32")


def _clz(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _unary(ctx, ins, typ, lambda a: alu.clz(a, DTYPES[typ]), dtype_out="u32")


def _brev(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, lambda a: alu.brev(a, dt).reshape(np.shape(a)))


def _bfind(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, lambda a: alu.bfind(a, dt, "shiftamt" in parts),
                  dtype_out="u32")


def _bfe(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _ternary(ctx, ins, typ, lambda a, b, c: alu.bfe(a, b, c, dt), tb="u32", tc="u32")


def _dp4a(ctx, ins, parts):
    ta, tb = types_of(parts)[-2:]
    out = "u32" if ta == "u32" and tb == "u32" else "s32"
    return _ternary(ctx, ins, ta, lambda a, b, c: alu.dp4a(a, b, c, ta == "s32", tb == "s32"),
                    tb=tb, tc=out, dtype_out=out)


def _float_fn(fn64):
    """Approximate/transcendental f32 ops: computed in float64, rounded once."""
    def build(ctx, ins, parts):
        typ = types_of(parts)[-1]
        dt = DTYPES[typ]
        f = lambda a: fn64(np.asarray(a, np.float64)).astype(dt)
        return _unary(ctx, ins, typ, _float_post(parts, typ, f))
    return build


def _sqrt(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _unary(ctx, ins, typ, _float_post(parts, typ, np.sqrt))


def _rcp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    return _unary(ctx, ins, typ, _float_post(parts, typ, lambda a: np.divide(dt.type(1), a)))


def _copysign(ctx, ins, parts):
    typ = types_of(parts)[-1]
    return _binary(ctx, ins, typ, lambda a, b: np.copysign(b, a))


def _testp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    kind = [p for p in parts[1:] if p not in TYPES][0]
    return _unary(ctx, ins, typ, lambda a: alu.testp(kind, a), dtype_out="pred")


def _setp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    cmp = parts[1]
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    ops = ins.operands
    if ops[0][0] == "regpair":
        dp = writer(ctx, ("reg", ops[0][1]), "pred")
        dq = writer(ctx, ("reg", ops[0][2]), "pred")
    else:
        dp, dq = writer(ctx, ops[0], "pred"), None
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


def _selp(ctx, ins, parts):
    typ = types_of(parts)[-1]
    d = writer(ctx, ins.operands[0], typ)
    a = reader(ctx, ins.operands[1], typ)
    b = reader(ctx, ins.operands[2], typ)
    c = reader(ctx, ins.operands[3], "pred")
    return lambda st, sel: d(st, sel, np.where(c(st, sel), a(st, sel), b(st, sel)))


def _cvt(ctx, ins, parts):
    if "f16x2" in parts or "bf16x2" in parts:
        from .tensorcore import build_cvt_x2
        return build_cvt_x2(ctx, ins, parts)
    dst, src = types_of(parts)[-2:]
    rnd = next((p for p in parts if p in ROUNDING), None)
    sat, ftz = "sat" in parts, "ftz" in parts
    if "bf16" in (dst, src):
        from .tensorcore import build_cvt_bf16
        return build_cvt_bf16(ctx, ins, dst, src, rnd)
    sdt, ddt = DTYPES[src], DTYPES[dst]
    return _unary(ctx, ins, src, lambda a: alu.cvt(a, sdt, ddt, rnd, sat, ftz), dtype_out=dst)


def _noop(ctx, ins, parts):
    return lambda st, sel: None


def _bra(ctx, ins, parts):
    return Op(None, BRANCH, ins.operands[0][1])


def _exit(ctx, ins, parts):
    return Op(None, EXIT)


def _trap(ctx, ins, parts):
    """`trap` ends the launch: the first lane that runs it (only lanes whose guard holds do)
    becomes a MemoryFault that says what the compiler's check was (`Instr.note`)."""
    from .memory import Trap
    why = ins.note or "the kernel executed trap"

    def run(st, sel):
        raise Trap(0, why)
    return Op(run)


def _bar(ctx, ins, parts):
    if "warp" in parts:
        return Op(lambda st, sel: None, WARPSYNC, mask=reader(ctx, ins.operands[0], "b32"))
    if "red" in parts:
        return _bar_red(ctx, ins, parts)
    if "arrive" in parts:
        ctx.error("only bar.sync / bar.red / barrier.sync are supported")
    if len(ins.operands) > 1:
        ctx.error("bar.sync with a thread count is not supported")
    return Op(None, BARRIER)


def _bar_red(ctx, ins, parts):
    """`bar.red.{popc,and,or} d, 0, p`: a barrier whose `run(st, lanes)` the scheduler calls
    once with every thread of the released blocks, all of them having arrived."""
    mode = next(p for p in parts if p in ("popc", "and", "or"))
    if len(ins.operands) != 3:
        ctx.error("bar.red with a thread count is not supported")
    d = writer(ctx, ins.operands[0], "u32" if mode == "popc" else "pred")
    p = reader(ctx, ins.operands[2], "pred")

    def run(st, lanes):
        lanes = st.tidx if lanes is None else lanes
        blk = st.blk[lanes]
        pv = np.broadcast_to(np.asarray(p(st, lanes), bool), lanes.shape)
        count = np.bincount(blk, weights=pv, minlength=st.nb).astype(np.int64)
        got = count[blk]
        if mode == "popc":
            d(st, lanes, got.astype(np.uint32))
        elif mode == "and":
            d(st, lanes, got == np.bincount(blk, minlength=st.nb)[blk])
        else:
            d(st, lanes, got > 0)
    return Op(run, BARRIER)


def _memory_builders():
    from . import memops, printf, tensorcore, warp
    return {"mma": tensorcore.build_mma, "ldmatrix": tensorcore.build_ldmatrix,
            "cp": tensorcore.build_cp,"ld": memops.build_ld, "ldu": memops.build_ld, "st": memops.build_st,
            "atom": memops.build_atom, "red": memops.build_atom, "mov": memops.build_mov,
            "cvta": memops.build_cvta, "shfl": warp.build_shfl, "vote": warp.build_vote,
            "activemask": warp.build_activemask, "call": printf.build_call,
            "match": warp.build_match}


BUILDERS = {
    "add": _arith("add"), "sub": _arith("sub"), "mul": _arith("mul"), "mad": _mad,
    "fma": _fma, "div": _div, "rem": _rem, "neg": _neg, "abs": _abs,
    "min": _minmax(False), "max": _minmax(True),
    "and": _logic("and"), "or": _logic("or"), "xor": _logic("xor"), "not": _not, "cnot": _cnot,
    "shl": _shift(True), "shr": _shift(False), "popc": _popc, "clz": _clz, "brev": _brev,
    "bfe": _bfe, "dp4a": _dp4a, "bfind": _bfind,
    "sqrt": _sqrt, "rcp": _rcp, "rsqrt": _float_fn(lambda x: 1.0 / np.sqrt(x)),
    "ex2": _float_fn(np.exp2), "lg2": _float_fn(np.log2), "sin": _float_fn(np.sin),
    "cos": _float_fn(np.cos), "tanh": _float_fn(np.tanh), "copysign": _copysign,
    "testp": _testp, "setp": _setp, "selp": _selp, "cvt": _cvt,
    "bra": _bra, "ret": _exit, "exit": _exit, "bar": _bar, "barrier": _bar, "trap": _trap,
    "membar": _noop, "fence": _noop, "nop": _noop,
}


def decode(ctx: Ctx, ins) -> Op:
    """One Instr -> Op (LaunchError for anything outside the subset)."""
    if "ld" not in BUILDERS:
        BUILDERS.update(_memory_builders())
    ctx.instr = ins
    parts = ins.opcode.split(".")
    build = BUILDERS.get(parts[0])
    if build is None:
        ctx.error(f"unknown instruction '{ins.opcode}'")
    try:
        res = build(ctx, ins, parts)
    except (IndexError, KeyError, ValueError, TypeError) as e:
        ctx.error(f"unsupported form of '{ins.opcode}' ({type(e).__name__}: {e})")
    op = res if isinstance(res, Op) else Op(res)
    op.instr = ins
    if ins.guard is not None:
        reg, neg = ins.guard
        if ctx.reg_type(reg) != "pred":
            ctx.error(f"guard {reg} is not a predicate")
        op.gslot, op.gneg = ctx.slot(reg, np.bool_), neg
    if ctx.mode is not None:            # a checked launch's copy of the program
        from .instrument import instrument_op
        instrument_op(ctx, op, parts)
    return op
