"""Lowerings of special registers, synchronisation, warp operations and `print` (vprintf).

`print` passes every argument in one 8-byte slot of a `.local` buffer: floats as f64 (C
varargs promotion) and every integer widened to 64 bits with its format conversion rewritten to
the `l` length (`%d` -> `%ld`).  Then C's natural alignment and the 8-byte slots coincide, so
the GPU's vprintf and the CPU executor read the same bytes.
"""
from __future__ import annotations

import re

from ..ir.core import Const
from ..types import f64, u32
from . import tables as tb
from .emitter import lowers

# ---- special registers, barriers, fences --------------------------------------------------------


@lowers("sreg")
def lower_sreg(em, ins) -> None:
    name = ins.attrs["name"]
    if name not in tb.SREGS:
        raise em.error(f"unknown special register {name!r}", ins)
    em.i(f"mov.u32 {em.dst(ins)}, %{name}")


@lowers("barrier")
def lower_barrier(em, ins) -> None:
    em.i("bar.sync 0")


@lowers("syncwarp")
def lower_syncwarp(em, ins) -> None:
    em.i(f"bar.warp.sync {em.src(ins.operands[0])}")


@lowers("fence")
def lower_fence(em, ins) -> None:
    em.i(tb.FENCES[ins.attrs.get("scope", "gl")])


# ---- warp operations ----------------------------------------------------------------------------

def _shfl32(em, mode: str, d: str, a: str, lane: str, mask: str) -> None:
    em.i(f"shfl.sync.{mode}.b32 {d}, {a}, {lane}, {tb.SHFL_C[mode]}, {mask}")


@lowers("shfl")
def lower_shfl(em, ins) -> None:
    v, lane, mask = ins.operands
    mode = ins.attrs["mode"]
    if mode not in tb.SHFL_C:
        raise em.error(f"unknown shfl mode {mode!r}", ins)
    t = ins.type
    a = em.reg(v)
    rl, rm = em.src(lane), em.src(mask)
    if t.bits == 32:
        _shfl32(em, mode, em.dst(ins), a, rl, rm)
    elif t.bits == 64:                     # two 32-bit halves, shuffled alike
        lo, hi, lo2, hi2 = (em.new_reg("%r") for _ in range(4))
        em.i(f"mov.b64 {{{lo}, {hi}}}, {a}")
        _shfl32(em, mode, lo2, lo, rl, rm)
        _shfl32(em, mode, hi2, hi, rl, rm)
        em.i(f"mov.b64 {em.dst(ins)}, {{{lo2}, {hi2}}}")
    else:                                  # bool / 8 / 16 bits: widen to 32 and back
        w, w2 = em.tmp(u32), em.tmp(u32)
        if t.is_bool:
            em.i(f"selp.u32 {w}, 1, 0, {a}")
        else:
            em.i(f"cvt.{'s' if t.is_signed else 'u'}32.{tb.suffixes(t).t.replace('f', 'u')} "
                 f"{w}, {a}")
        _shfl32(em, mode, w2, w, rl, rm)
        if t.is_bool:
            em.i(f"setp.ne.u32 {em.dst(ins)}, {w2}, 0")
        else:
            em.i(f"cvt.u16.u32 {em.dst(ins)}, {w2}")


@lowers("activemask")
def lower_activemask(em, ins) -> None:
    em.i(f"activemask.b32 {em.dst(ins)}")


@lowers("vote")
def lower_vote(em, ins) -> None:
    p, mask = ins.operands
    mode = ins.attrs["mode"]
    if mode == "ballot":
        em.i(f"vote.sync.ballot.b32 {em.dst(ins)}, {em.reg(p)}, {em.src(mask)}")
    elif mode in ("any", "all", "uni"):
        em.i(f"vote.sync.{mode}.pred {em.dst(ins)}, {em.reg(p)}, {em.src(mask)}")
    else:
        raise em.error(f"unknown vote mode {mode!r}", ins)


# ---- print ----------------------------------------------------------------------------------------

_CONVERSION = re.compile(r"%([-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?)(hh|h|ll|l|j|z|t|L)?([a-zA-Z%])")
_INT_CONVERSIONS = frozenset("dioxXu")


def widen_format(fmt: str) -> str:
    """Give every integer conversion the `l` length: its argument is passed as 64 bits."""
    def fix(m: re.Match) -> str:
        flags, _, conv = m.groups()
        if conv in _INT_CONVERSIONS:
            return f"%{flags}l{conv}"
        return m.group(0)
    return _CONVERSION.sub(fix, fmt)


def _store_slot(em, v, k: int) -> None:
    """Write one vprintf argument into slot k of the .local buffer."""
    t = v.type
    where = f"[__pyptx_printf_buf+{8 * k}]" if k else "[__pyptx_printf_buf]"
    r = em.reg(v)
    if getattr(t, "is_float", False):
        if t.bits != 64:
            w = em.tmp(f64)
            em.i(f"cvt.f64.{t.ptx} {w}, {r}")
            r = w
        em.i(f"st.local.f64 {where}, {r}")
        return
    if getattr(t, "is_bool", False):
        w = em.new_reg("%rd")
        em.i(f"selp.u64 {w}, 1, 0, {r}")
        r = w
    elif tb.suffixes(t).bits < 64:
        w = em.new_reg("%rd")
        em.i(f"cvt.{'s' if t.is_signed else 'u'}64.{tb.suffixes(t).t} {w}, {r}")
        r = w
    em.i(f"st.local.u64 {where}, {r}")


@lowers("print")
def lower_print(em, ins) -> None:
    fmt = widen_format(ins.attrs.get("fmt", ""))
    n = len(em.strings)
    em.strings.append(fmt.encode("utf-8") + b"\0")
    values = ins.operands
    em.printf_slots = max(em.printf_slots, len(values))
    for k, v in enumerate(values):
        _store_slot(em, v, k)
    raw, fmt_ptr = em.new_reg("%rd"), em.new_reg("%rd")
    em.i(f"mov.u64 {raw}, $str{n}")
    em.i(f"cvta.global.u64 {fmt_ptr}, {raw}")
    if values:
        braw, buf = em.new_reg("%rd"), em.new_reg("%rd")
        em.i(f"mov.u64 {braw}, __pyptx_printf_buf")
        em.i(f"cvta.local.u64 {buf}, {braw}")
    else:
        buf = "0"
    em.out.extend((
        "\t{",
        "\t.param .b64 param0;",
        f"\tst.param.b64 [param0], {fmt_ptr};",
        "\t.param .b64 param1;",
        f"\tst.param.b64 [param1], {buf};",
        "\t.param .b32 retval0;",
        "\tcall.uni (retval0), vprintf, (param0, param1);",
        "\t}",
    ))


# ---- Numba-CUDA parity: match, barrier reductions, bfind --------------------------------------

@lowers("match")
def lower_match(em, ins) -> None:
    v, mask = ins.operands
    bits = "b64" if v.type.bits == 64 else "b32"
    mode = ins.attrs["mode"]
    if mode == "any":
        em.i(f"match.any.sync.{bits} {em.dst(ins)}, {em.reg(v)}, {em.src(mask)}")
    else:                                  # the predicate output is not needed: mask != 0
        em.i(f"match.all.sync.{bits} {em.dst(ins)}, {em.reg(v)}, {em.src(mask)}")


@lowers("redux")
def lower_redux(em, ins) -> None:
    v, mask = ins.operands
    mode = ins.attrs["mode"]
    typ = "b32" if mode in ("and", "or", "xor") else ("s32" if v.type.is_signed else "u32")
    em.i(f"redux.sync.{mode}.{typ} {em.dst(ins)}, {em.reg(v)}, {em.src(mask)}")


@lowers("barrier_red")
def lower_barrier_red(em, ins) -> None:
    mode = ins.attrs["mode"]
    typ = "u32" if mode == "popc" else "pred"
    em.i(f"bar.red.{mode}.{typ} {em.dst(ins)}, 0, {em.reg(ins.operands[0])}")


@lowers("trap_if")
def lower_trap_if(em, ins) -> None:
    """`@p trap;` with the reason as a comment on the same line: the CPU executor's parser
    keeps that comment (parser.Instr.note) to say in its MemoryFault what the check was."""
    p = ins.operands[0]
    why = ins.attrs["why"]
    if isinstance(p, Const):
        if p.value:
            em.out.append(f"\ttrap; // {why}")
        return
    em.out.append(f"\t@{em.reg(p)} trap; // {why}")


@lowers("bfind")
def lower_bfind(em, ins) -> None:
    a = ins.operands[0]
    sfx = tb.suffixes(a.type).t
    shift = ".shiftamt" if ins.attrs.get("shiftamt") else ""
    em.i(f"bfind{shift}.{sfx} {em.dst(ins)}, {em.reg(a)}")
