"""Lowerings of vector memory: vload, vstore, lane.

A `vload` of n lanes is one `ld.<space>.v<n>` into n fresh registers, remembered per IR value;
`lane` then names lane k's register (no move when it is seen first at its definition, which is
the usual case).  8 lanes of a 16-bit type travel as 4 x b32 (PTX has no `.v8` before sm_100)
and are split / joined with `mov.b32 {lo, hi}`.
"""
from __future__ import annotations

from . import tables as tb
from .emitter import lowers
from .lower_memory import _address, space_of


def _lanes(em, v) -> list[str]:
    """The registers holding the lanes of VecType value `v` (allocated on first sight)."""
    regs = em.regs.get(v)
    if regs is None:
        regs = em.regs[v] = [em.tmp(v.type.elem) for _ in range(v.type.n)]
    return regs


def _packed(elem, n) -> bool:
    """8 lanes of a 16-bit type move as 4 x b32 words."""
    return n == 8 and elem.mem_bytes == 2


def _vec(n: int) -> str:
    return "" if n == 1 else f".v{n}"


@lowers("vload")
def lower_vload(em, ins) -> None:
    p = ins.operands[0]
    elem, n = ins.type.elem, ins.type.n
    space = space_of(em, p)
    lanes = _lanes(em, ins)
    addr = _address(em, p, ins)
    if _packed(elem, n):
        words = [em.new_reg("%r") for _ in range(4)]
        em.i(f"ld.{space}.v4.b32 {{{', '.join(words)}}}, {addr}")
        for k, w in enumerate(words):
            em.i(f"mov.b32 {{{lanes[2 * k]}, {lanes[2 * k + 1]}}}, {w}")
        return
    dst = lanes[0] if n == 1 else "{" + ", ".join(lanes) + "}"
    em.i(f"ld.{space}{_vec(n)}.{tb.suffixes(elem).mem} {dst}, {addr}")


@lowers("lane")
def lower_lane(em, ins) -> None:
    reg = _lanes(em, ins.operands[0])[ins.attrs["index"]]
    if ins not in em.regs:
        em.regs[ins] = reg                 # the lane's own register: no copy
        return
    em.i(f"mov.{tb.REG_CLASSES[tb.reg_prefix(ins.type)][1]} {em.regs[ins]}, {reg}")


@lowers("vstore")
def lower_vstore(em, ins) -> None:
    p, values = ins.operands[0], ins.operands[1:]
    elem, n = p.type.elem, len(values)
    addr = _address(em, p, ins)
    regs = [em.reg(v) for v in values]
    if _packed(elem, n):
        words = [em.new_reg("%r") for _ in range(4)]
        for k, w in enumerate(words):
            em.i(f"mov.b32 {w}, {{{regs[2 * k]}, {regs[2 * k + 1]}}}")
        em.i(f"st.{p.type.space}.v4.b32 {addr}, {{{', '.join(words)}}}")
        return
    src = regs[0] if n == 1 else "{" + ", ".join(regs) + "}"
    em.i(f"st.{p.type.space}{_vec(n)}.{tb.suffixes(elem).mem} {addr}, {src}")
