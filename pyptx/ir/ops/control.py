"""Special registers, run-time checks, output and terminators."""
from __future__ import annotations

from ...types import ScalarType, bool_
from .record import family

op = family("control")

SREGS = tuple(f"{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz") + (
    "laneid", "warpid", "lanemask_lt", "lanemask_le", "lanemask_eq", "lanemask_gt", "lanemask_ge")


def _check_sreg(c, ins, T, a):
    c.need(T is not None and T.name == "i32", "sreg result is i32")
    c.need(ins.attrs.get("name") in SREGS, f"unknown special register {ins.attrs.get('name')!r}")


def _check_trap_if(c, ins, T, a):
    why = ins.attrs.get("why")
    c.need(a[0] == bool_ and isinstance(why, str) and why.isascii() and "\n" not in why,
           "trap_if: bool_ condition, an ASCII one-line why")


def _check_print(c, ins, T, a):
    c.need(isinstance(ins.attrs.get("fmt"), str), "print needs a fmt string")
    c.need(all(isinstance(t, ScalarType) for t in a), "print takes scalars")


OPS = [
    op("sreg", "",
       "T i32. attrs name in {'tid.x','tid.y','tid.z','ntid.x',...,'ctaid.x',...,'nctaid.x',"
       "...,'laneid','warpid'}: PTX special register %<name>.  Not folded",
       check=_check_sreg, ptx=("mov",)),
    op("trap_if", "p",
       "when the bool_ p is true, end the launch (PTX `@p trap`; a GPU reports a sticky "
       "launch failure, the CPU executor a MemoryFault naming the thread and line).  attrs "
       "why (str, ASCII): what went wrong, for the executor's message.  A constant false p "
       "is removed by constant folding, so a check on an index known at compile time "
       "costs nothing",
       pure=False, result=False, check=_check_trap_if, ptx=("trap",)),
    op("print", "values...",
       "vprintf(attrs fmt, values...): fmt is a C format string with one conversion per "
       "value (%d %u %ld %lu %f %s-free); f32/f16 values are passed as f64, sub-32-bit ints "
       "as i32, as C varargs promotion does",
       nargs=None, pure=False, result=False, check=_check_print,
       ptx=("cvt", "st", "selp", "mov", "cvta", "call")),
    op("br", "", "jump to succs[0] passing its block arguments", pure=False, result=False,
       succs=1, ptx=("bra", "mov")),
    op("cbr", "c", "c is bool_: succs[0] if c else succs[1]", pure=False, result=False,
       check=lambda c, ins, T, a: c.need(a[0] == bool_, "cbr condition must be bool_"),
       succs=2, ptx=("bra", "mov")),
    op("ret", "", "end of this thread", pure=False, result=False, succs=0, ptx=("ret",)),
]
