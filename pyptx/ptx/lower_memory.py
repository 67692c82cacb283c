"""Lowerings of addresses and memory: addr, gep, load, store, atomic.

IR pointers are addresses in their own state space (the global window after `cvta.to.global`,
the shared or local window for `addr`), so every access is `ld/st/atom.<space>` through a
register plus a constant byte offset.  Pointers are 64-bit (`%rd`); shared ones are 32-bit (`%r`,
as nvcc emits them) when `tables.SHARED_ADDRESS_BITS` is 32.
"""
from __future__ import annotations

from ..ir.core import Const, Instr, Param
from . import tables as tb
from .emitter import lowers


def _address(em, p, ins, key: str = "offset") -> str:
    """`[%r]` / `[%r+imm]`: the register of pointer `p` plus the op's byte offset `key`."""
    off = int(ins.attrs.get(key, 0) or 0)
    base = em.reg(p)
    return f"[{base}+{off}]" if off else f"[{base}]"


def space_of(em, p) -> str:
    """The state space a load through `p` reads: `global.nc` (the read-only data path) when
    `p` points into an array parameter the kernel never writes (CUDA's `const __restrict__`;
    the launcher falls back to plain loads when such an argument overlaps a written one)."""
    space = p.type.space
    written = em.fn.attrs.get("written_params")
    if space != "global" or written is None:
        return space
    while p.__class__ is Instr and p.op in ("gep", "bitcast"):
        p = p.operands[0]
    if p.__class__ is Param and p.name not in written:
        return "global.nc"
    return space


@lowers("addr")
def lower_addr(em, ins) -> None:
    em.i(f"mov.{tb.suffixes(ins.type).t} {em.dst(ins)}, {em.symbol(ins.attrs['symbol'])}")


def _gep32(em, d, base, i, size) -> None:
    """A shared-memory gep: 32-bit address arithmetic (wider indices are truncated: an index
    that does not fit 32 bits is out of bounds either way)."""
    if isinstance(i, Const):
        em.i(f"add.s32 {d}, {base}, {tb.wrap_s32(int(i.value) * size)}")
        return
    t = i.type
    idx = em.reg(i)
    if t.bits != 32:
        narrow = em.new_reg("%r")
        src = tb.suffixes(t).t
        em.i(f"cvt.{'s' if t.is_signed else 'u'}32.{src} {narrow}, {idx}")
        idx = narrow
    em.i(f"mad.lo.s32 {d}, {idx}, {size}, {base}")


@lowers("gep")
def lower_gep(em, ins) -> None:
    p, i = ins.operands
    size = ins.type.elem.mem_bytes
    base = em.reg(p)
    d = em.dst(ins)
    if tb.shared32(ins.type):
        _gep32(em, d, base, i, size)
        return
    if isinstance(i, Const):
        em.i(f"add.s64 {d}, {base}, {int(i.value) * size}")
        return
    t = i.type
    idx = em.reg(i)
    if t.bits < 32:                          # widen a short index first (sign per its type)
        wide = em.new_reg("%rd")
        em.i(f"cvt.{'s' if t.is_signed else 'u'}64.{tb.suffixes(t).t} {wide}, {idx}")
        idx, t = wide, None
    if t is not None and t.bits == 32:
        em.i(f"mad.wide.{t.ptx} {d}, {idx}, {size}, {base}")
    else:
        em.i(f"mad.lo.s64 {d}, {idx}, {size}, {base}")


@lowers("load")
def lower_load(em, ins) -> None:
    p = ins.operands[0]
    space = space_of(em, p)
    t = ins.type
    addr = _address(em, p, ins)
    if t.is_bool:
        byte = em.new_reg("%rs")
        em.i(f"ld.{space}.u8 {byte}, {addr}")
        em.i(f"setp.ne.u16 {em.dst(ins)}, {byte}, 0")
        return
    em.i(f"ld.{space}.{tb.suffixes(t).mem} {em.dst(ins)}, {addr}")


@lowers("store")
def lower_store(em, ins) -> None:
    p, v = ins.operands
    space = p.type.space
    t = p.type.elem
    addr = _address(em, p, ins)
    if t.is_bool:
        byte = em.new_reg("%rs")
        em.i(f"selp.u16 {byte}, 1, 0, {em.reg(v)}")
        em.i(f"st.{space}.u8 {addr}, {byte}")
        return
    em.i(f"st.{space}.{tb.suffixes(t).mem} {addr}, {em.reg(v)}")


@lowers("atomic")
def lower_atomic(em, ins) -> None:
    p = ins.operands[0]
    kind = ins.attrs["kind"]
    t = p.type.elem
    sfx = tb.ATOM_TYPES.get(kind, {}).get(t.name)
    if sfx is None:
        raise em.error(f"atomic_{kind} is not supported on {t.name} (PTX has atom.{kind} for "
                       f"{', '.join(sorted(tb.ATOM_TYPES.get(kind, {})))} only)", ins)
    if kind == "add" and t.name == "f64":
        em.need("atom.add.f64", ins)
    if p.type.space not in ("global", "shared"):
        raise em.error(f"atomics work on global or shared memory, not {p.type.space}", ins)
    addr = _address(em, p, ins)
    vals = ", ".join(em.src(v) for v in ins.operands[1:])
    em.i(f"atom.{p.type.space}.{kind}.{sfx} {em.dst(ins)}, {addr}, {vals}")
