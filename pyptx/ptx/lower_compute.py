"""Lowerings of the value-computing ops: arithmetic, bit ops, compares, selects, conversions.

Most ops are one template from `tables.TEMPLATES`; the exceptions written out here are the ones
PTX does not have directly: 8-bit integers (computed in 16-bit registers and re-extended), f16
ops without an f16 instruction (through f32), bool compares/selects (predicate logic) and the
conversion matrix of `cvt`.
"""
from __future__ import annotations

from ..types import PtrType

from ..types import f32
from . import tables as tb
from .emitter import lowers
from .names import immediate


def widen16(em, v) -> str:
    """An f32 register holding the f16 or bf16 value `v` (exact).  bf16 -> f32 is a shift:
    `cvt.f32.bf16` needs sm_90."""
    r = em.tmp(f32)
    if v.type.name == "bf16":
        w = em.new_reg("%r")
        em.i(f"cvt.u32.u16 {w}, {em.reg(v)}")
        em.i(f"shl.b32 {w}, {w}, 16")
        em.i(f"mov.b32 {r}, {w}")
    else:
        em.i(f"cvt.f32.f16 {r}, {em.reg(v)}")
    return r


def narrow16(em, t, d: str, r: str) -> None:
    """Round the f32 register `r` to the 16-bit float type `t` into `d`.  Below sm_80 (no
    `cvt.rn.bf16.f32`) bf16 rounding is done on the bits: add 0x7FFF + the lowest kept bit, keep
    the high half; a NaN keeps its high half with the quiet bit set."""
    if t.name == "bf16" and em.sm < 80:
        u, odd, hi, q = (em.new_reg("%r") for _ in range(4))
        nan = em.new_reg("%p")
        em.i(f"mov.b32 {u}, {r}")
        em.i(f"bfe.u32 {odd}, {u}, 16, 1")
        em.i(f"add.s32 {odd}, {odd}, 32767")
        em.i(f"add.s32 {hi}, {u}, {odd}")
        em.i(f"shr.u32 {hi}, {hi}, 16")
        em.i(f"shr.u32 {q}, {u}, 16")
        em.i(f"or.b32 {q}, {q}, 64")
        em.i(f"setp.nan.f32 {nan}, {r}, {r}")
        em.i(f"selp.b32 {hi}, {q}, {hi}, {nan}")
        em.i(f"cvt.u16.u32 {d}, {hi}")
        return
    em.i(f"cvt.rn.{t.ptx}.f32 {d}, {r}")


def _via_f32(em, ins, operands) -> None:
    """Compute an f16 (bf16) op in f32 and round once back to f16 (bf16)."""
    wide = [widen16(em, v) for v in operands]
    res = em.tmp(f32)
    sfx = tb.suffixes(f32)
    em.i(f"{tb.TEMPLATES[(ins.op, 'float')].format(t=sfx.t, s=sfx.s, b=sfx.b)} {res}, "
         f"{', '.join(wide)}")
    narrow16(em, ins.type, em.dst(ins), res)


def _normalise(em, t, reg: str) -> None:
    em.i(f"{tb.NORMALISE[t.ptx]} {reg}, {reg}")


#: (template, Suffixes) -> the opcode (Suffixes objects are cached per scalar type, so this
#: is one string format per template and type instead of one per instruction)
_OPCODES: dict = {}


@lowers(*tb.BINARY_OPS, *tb.UNARY_OPS, "fma")
def lower_arith(em, ins) -> None:
    t = ins.type
    k = tb.kind(t)
    op = ins.op
    if k == "float" and t.bits == 16:
        if op in tb.F16_VIA_F32 or em.sm < tb.F16_MIN_SM.get(op, 0) or t.name == "bf16":
            return _via_f32(em, ins, ins.operands)
        if op in ("min", "max"):
            em.need("minmax.f16", ins)
        elif op in ("neg", "abs"):
            em.need(f"{op}.f16", ins)
    if op == "abs" and k == "int" and not t.is_signed:
        em.i(f"mov.{tb.suffixes(t).b} {em.dst(ins)}, {em.reg(ins.operands[0])}")
        return
    template = tb.TEMPLATES.get((op, k))
    if op == "div" and ins.attrs.get("full") and t.name == "f32":
        template = "div.full.f32"          # fastmath (frontend/fastmath.py): max 2 ulp
    if template is None:
        raise em.error(f"IR op '{op}' is not defined on {t!r}", ins)
    sfx = tb.suffixes(t)
    key = (template, sfx)
    opcode = _OPCODES.get(key)
    if opcode is None:
        opcode = _OPCODES[key] = template.format(t=sfx.t, s=sfx.s, b=sfx.b)
    if op in tb.UNARY_OPS:
        args = em.reg(ins.operands[0])
    elif op in ("shl", "shr"):
        args = f"{em.reg(ins.operands[0])}, {em.src(ins.operands[1])}"
    else:
        args = ", ".join(em.srcs(ins.operands))
    d = em.dst(ins)
    em.i(f"{opcode} {d}, {args}")
    if sfx.bits == 8 and op in tb.NORMALISE_8BIT:
        _normalise(em, t, d)


@lowers("mulwide")
def lower_mulwide(em, ins) -> None:
    a, b = ins.operands
    em.i(f"mul.wide.{tb.suffixes(a.type).t} {em.dst(ins)}, {', '.join(em.srcs([a, b]))}")


@lowers("popc", "clz", "brev")
def lower_bitcount(em, ins) -> None:
    a = ins.operands[0]
    em.i(f"{ins.op}.{tb.suffixes(a.type).b} {em.dst(ins)}, {em.reg(a)}")


@lowers("dp4a")
def lower_dp4a(em, ins) -> None:
    a, b, c = ins.operands
    em.i(f"dp4a.{a.type.ptx}.{b.type.ptx} {em.dst(ins)}, {em.reg(a)}, {em.src(b)}, {em.src(c)}")


@lowers("approx")
def lower_approx(em, ins) -> None:
    fn = ins.attrs.get("fn")
    if fn not in tb.APPROX or ins.type != f32:
        raise em.error(f"approx: unsupported function {fn!r} on {ins.type!r}", ins)
    if fn == "tanh":
        em.need("tanh.approx.f32", ins)
    ftz = ".ftz" if fn == "ex2" else ""      # ex2 without .ftz costs extra SASS for denormals
    em.i(f"{fn}.approx{ftz}.f32 {em.dst(ins)}, {em.reg(ins.operands[0])}")


# ---- compares and selects --------------------------------------------------------------------

#: bool compares as predicate logic: pred -> (negate a?, negate b?, combine, negate result?)
_BOOL_CMP = {"eq": (False, False, "xor", True), "ne": (False, False, "xor", False),
             "lt": (True, False, "and", False), "le": (True, False, "or", False),
             "gt": (False, True, "and", False), "ge": (False, True, "or", False)}


@lowers("cmp")
def lower_cmp(em, ins) -> None:
    a, b = ins.operands
    pred = ins.attrs["pred"]
    t = a.type
    if tb.kind(t) == "bool":
        neg_a, neg_b, comb, neg_r = _BOOL_CMP[pred]
        ra, rb = em.reg(a), em.reg(b)
        if neg_a or neg_b:
            n = em.tmp(t)
            em.i(f"not.pred {n}, {ra if neg_a else rb}")
            ra, rb = (n, rb) if neg_a else (ra, n)
        d = em.dst(ins)
        em.i(f"{comb}.pred {d}, {ra}, {rb}")
        if neg_r:
            em.i(f"not.pred {d}, {d}")
        return
    if t.name == "bf16":                      # setp.bf16 needs sm_90: compare in f32
        em.i(f"setp.{tb.cmp_table(f32)[pred]}.f32 {em.dst(ins)}, {widen16(em, a)}, "
             f"{widen16(em, b)}")
        return
    sfx = tb.suffixes(t)
    em.i(f"setp.{tb.cmp_table(t)[pred]}.{sfx.t} {em.dst(ins)}, {', '.join(em.srcs([a, b]))}")


@lowers("select")
def lower_select(em, ins) -> None:
    c, a, b = ins.operands
    t = ins.type
    if tb.kind(t) == "bool":
        rc, ra, rb = em.reg(c), em.reg(a), em.reg(b)
        t1, t2 = em.tmp(t), em.tmp(t)
        em.i(f"and.pred {t1}, {rc}, {ra}")
        em.i(f"not.pred {t2}, {rc}")
        em.i(f"and.pred {t2}, {t2}, {rb}")
        em.i(f"or.pred {em.dst(ins)}, {t1}, {t2}")
        return
    em.i(f"selp.{tb.suffixes(t).sel} {em.dst(ins)}, {em.src(a)}, {em.src(b)}, {em.reg(c)}")


@lowers("isnan")
def lower_isnan(em, ins) -> None:
    a = ins.operands[0]
    r = em.reg(a)
    if a.type.bits == 16:
        r, sfx = widen16(em, a), "f32"
    else:
        sfx = a.type.ptx
    em.i(f"setp.nan.{sfx} {em.dst(ins)}, {r}, {r}")


# ---- conversions -------------------------------------------------------------------------------

@lowers("bitcast")
def lower_bitcast(em, ins) -> None:
    a = ins.operands[0]
    t = ins.type
    d = em.dst(ins)
    if isinstance(t, PtrType):          # a.view(u32): same address, another element type
        em.i(f"mov.{tb.suffixes(t).b} {d}, {em.reg(a)}")
        return
    em.i(f"mov.{tb.suffixes(t).b} {d}, {em.reg(a)}")
    if t.bits == 8 and a.type != t:
        _normalise(em, t, d)


@lowers("cvt")
def lower_cvt(em, ins) -> None:
    a = ins.operands[0]
    st, dt = a.type, ins.type
    if st == dt:
        em.i(f"mov.{tb.REG_CLASSES[tb.reg_prefix(dt)][1]} {em.dst(ins)}, {em.reg(a)}")
        return
    ra = em.reg(a)
    if st.is_bool:
        one, zero = immediate(dt, 1), immediate(dt, 0)
        em.i(f"selp.{tb.suffixes(dt).sel} {em.dst(ins)}, {one}, {zero}, {ra}")
        return
    if dt.is_bool:
        _to_bool(em, ins, st, ra)
        return
    d = em.dst(ins)
    if st.name == "bf16":                   # bf16 -> f32 is exact (a shift); then f32 -> dt
        w = widen16(em, a)
        if dt == f32:
            em.i(f"mov.f32 {d}, {w}")
        else:
            _convert(em, f32, dt, d, w)
    elif dt.name == "bf16":                 # PTX (sm_80) rounds to bf16 only from f32
        if st != f32:
            w = em.tmp(f32)
            _convert(em, st, f32, w, ra)
            ra = w
        narrow16(em, dt, d, ra)
    else:
        _convert(em, st, dt, d, ra)


def _convert(em, st, dt, d: str, ra: str) -> None:
    """cvt semantics between two non-bool, non-bf16 types, register to register."""
    ssfx, dsfx = tb.suffixes(st), tb.suffixes(dt)
    if st.is_float and dt.is_float:
        rnd = ".rn" if dt.bits < st.bits else ""
        em.i(f"cvt{rnd}.{dt.ptx}.{st.ptx} {d}, {ra}")
    elif st.is_float:                       # float -> int: truncate, saturate, NaN -> 0
        em.i(f"cvt.rzi.{dt.ptx}.{st.ptx} {d}, {ra}")
        if dt.bits == 8:
            _normalise(em, dt, d)
    elif dt.is_float:                       # int -> float: round to nearest even
        em.i(f"cvt.rn.{dt.ptx}.{ssfx.t} {d}, {ra}")
    elif dt.bits == 8:                      # int -> 8-bit: keep the low byte, re-extend
        if st.bits > 16:
            low = em.new_reg("%rs")
            em.i(f"cvt.u16.u{st.bits} {low}, {ra}")
            ra = low
        em.i(f"{tb.NORMALISE[dt.ptx]} {d}, {ra}")
    elif dsfx.b == ssfx.b:                  # same register width: the bits are already right
        em.i(f"mov.{dsfx.b} {d}, {ra}")
    else:                                   # narrowing truncates, widening extends per source
        em.i(f"cvt.{dsfx.t}.{ssfx.t} {d}, {ra}")


def _to_bool(em, ins, st, ra: str) -> None:
    """number -> bool is `a != 0` (NaN is true, -0.0 is false)."""
    d = em.dst(ins)
    if st.is_float and st.bits == 16:
        bits = em.new_reg("%rs")
        em.i(f"and.b16 {bits}, {ra}, 0x7FFF")
        em.i(f"setp.ne.u16 {d}, {bits}, 0")
    elif st.is_float:
        em.i(f"setp.neu.{st.ptx} {d}, {ra}, {immediate(st, 0.0)}")
    else:
        em.i(f"setp.ne.{tb.suffixes(st).t} {d}, {ra}, 0")
