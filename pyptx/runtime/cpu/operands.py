"""Operand access, decided once per instruction at decode time.

Registers are stored as raw bits, one numpy array per register across all lanes (bool for
predicates, uint16/32/64 otherwise).  Every (register, dtype) pair an instruction uses gets a
*slot*: at batch start the executor fills `st.V[slot]` with the typed view of that register, so
the inner loop does one list lookup per operand and never a `.view()` or a string compare.
"""
from __future__ import annotations

import numpy as np

from ...errors import LaunchError
from .memory import PARAM_SLOT, PARAM_WINDOW

DTYPES = {
    "pred": np.dtype(np.bool_),
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32), "f16x2": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64),
}
TYPES = set(DTYPES)
_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}
_SINT = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}

SPECIAL = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid",
           "%nsmid", "%gridid", "%clock", "%clock64", "%lanemask_eq", "%lanemask_le",
           "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%globaltimer")


def types_of(parts) -> list:
    """The type suffixes of an opcode split at its dots, in order (`cvt.rn.f32.s32`: f32, s32)."""
    return [p for p in parts if p in TYPES]


def storage_dtype(reg_type: str) -> np.dtype:
    """The raw-bits dtype a register of `.reg .TYPE` lives in."""
    if reg_type == "pred":
        return np.dtype(np.bool_)
    return _UINT[max(DTYPES[reg_type].itemsize, 2)]


def int_like(dt: np.dtype, signed: bool | None = None) -> np.dtype:
    s = dt.kind == "i" if signed is None else signed
    return (_SINT if s else _UINT)[dt.itemsize]


def is_special(name: str) -> bool:
    return name.split(".")[0] in SPECIAL


class Ctx:
    """Decode-time context of one entry: register types, slots, symbols, kernel params."""

    def __init__(self, entry, shared_syms, local_syms, global_syms):
        self.entry = entry
        self.regs = entry.regs
        self.params = dict(entry.params)
        self.slots: dict = {}
        self.shared_syms = shared_syms    # name -> offset in the block's shared row
        self.local_syms = local_syms      # name -> offset in the thread's local row
        self.global_syms = global_syms    # names living in the global heap
        self.instr = None
        self.mode = None                  # instrument.Mode of a checked launch's decode
        self.sites: list = []             # Instr of each instrumented access (checked only)

    def error(self, msg: str):
        i = self.instr
        where = f" at PTX line {i.line}: {i.opcode}" if i is not None else ""
        raise LaunchError(f"CPU executor: {msg}{where}")

    def slot(self, reg: str, dt: np.dtype) -> int:
        key = (reg, np.dtype(dt))
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def reg_type(self, reg: str) -> str:
        t = self.regs.get(reg)
        if t is None:
            self.error(f"undeclared register {reg}")
        return t


def const(value, dt: np.dtype):
    """A PTX immediate as a numpy scalar of dtype dt."""
    kind, v = value
    dt = np.dtype(dt)
    if kind == "int":
        if dt.kind == "f":
            return dt.type(v)
        if dt.kind == "b":
            return np.bool_(v != 0)
        return np.array(v & ((1 << (8 * dt.itemsize)) - 1), _UINT[dt.itemsize]).view(dt)[()]
    if kind == "f32":
        f = np.array(v, np.uint32).view(np.float32)[()]
        return f.astype(dt) if dt.kind == "f" else np.array(v, np.uint32).astype(dt)[()]
    if kind == "f64":
        f = np.array(v, np.uint64).view(np.float64)[()]
        return f.astype(dt) if dt.kind == "f" else np.array(v, np.uint64).astype(dt)[()]
    return dt.type(v)


def reader(ctx: Ctx, op, ptx_type: str):
    """op -> f(st, sel) giving the operand as dtype(ptx_type) (array or numpy scalar)."""
    dt = DTYPES[ptx_type]
    if op[0] == "sym" and op[1] in ctx.regs:      # `.reg .b32 name;` without a %
        op = ("reg", op[1])
    kind = op[0]
    if kind == "imm":
        c = const(op[1], dt)
        return lambda st, sel: c
    if kind == "notreg":
        s = ctx.slot(op[1], np.bool_)
        ctx.reg_type(op[1])
        return lambda st, sel: ~st.V[s] if sel is None else ~st.V[s][sel]
    if kind == "sym":
        return symbol_reader(ctx, op[1], dt)
    if kind != "reg":
        ctx.error(f"unsupported operand {op}")
    name = op[1]
    if is_special(name):
        def sp(st, sel, name=name, dt=dt):
            v = st.special(name)
            v = v if v.dtype == dt else v.astype(dt)
            return v if sel is None else v[sel]
        return sp
    rt = ctx.reg_type(name)
    if rt == "pred" or dt.kind == "b":
        s = ctx.slot(name, np.bool_)
        if dt.kind == "b":
            return lambda st, sel: st.V[s] if sel is None else st.V[s][sel]
        return lambda st, sel: (st.V[s] if sel is None else st.V[s][sel]).astype(dt)
    sd = storage_dtype(rt)
    if sd.itemsize == dt.itemsize:
        s = ctx.slot(name, dt)
        return lambda st, sel: st.V[s] if sel is None else st.V[s][sel]
    # narrower/wider type than the register: truncate or extend through an integer of
    # the register's width
    if dt.itemsize < sd.itemsize:
        s = ctx.slot(name, sd)
        mid = int_like(dt, dt.kind == "i") if dt.kind != "f" else _UINT[dt.itemsize]
        if dt.kind == "f":
            return lambda st, sel: (st.V[s] if sel is None else st.V[s][sel]).astype(mid).view(dt)
        return lambda st, sel: (st.V[s] if sel is None else st.V[s][sel]).astype(dt)
    s = ctx.slot(name, int_like(sd, dt.kind == "i"))
    return lambda st, sel: (st.V[s] if sel is None else st.V[s][sel]).astype(dt)


def symbol_reader(ctx: Ctx, name: str, dt):
    """Address of a variable: shared/local offset, global device address, or a label error."""
    if name in ctx.shared_syms:
        c = dt.type(ctx.shared_syms[name])
        return lambda st, sel: c
    if name in ctx.local_syms:
        c = dt.type(ctx.local_syms[name])
        return lambda st, sel: c
    if name in ctx.global_syms:
        return lambda st, sel: dt.type(st.heap.symbols[name])
    if name in ctx.params and ctx.params[name].endswith("]"):
        c = dt.type(param_address(ctx, name))      # a tensor map: its address (cpu/tma.py)
        return lambda st, sel: c
    if name in ctx.params:
        ctx.error(f"kernel parameter {name} used as a value (use ld.param)")
    ctx.error(f"unknown symbol {name}")


def param_address(ctx: Ctx, name: str) -> int:
    """The address `mov.u64 %rd, name` gives a by-value byte-array parameter (a tensor map):
    a slot of PARAM_WINDOW (cvta.param keeps it), decoded back to the name by cpu/tma.py."""
    k = [n for n, _ in ctx.entry.params].index(name)
    return PARAM_WINDOW + PARAM_SLOT * k


def writer(ctx: Ctx, op, ptx_type: str):
    """op -> f(st, sel, value) storing a dtype(ptx_type) value (extending into wider regs)."""
    dt = DTYPES[ptx_type]
    if op is None or op[0] == "sink":
        return lambda st, sel, v: None
    if op[0] == "sym" and op[1] in ctx.regs:
        op = ("reg", op[1])
    if op[0] != "reg":
        ctx.error(f"destination must be a register, got {op}")
    name = op[1]
    rt = ctx.reg_type(name)
    if rt == "pred":
        s = ctx.slot(name, np.bool_)
    elif dt.kind == "b":
        ctx.error(f"predicate value written to non-predicate register {name}")
    else:
        sd = storage_dtype(rt)
        if sd.itemsize == dt.itemsize:
            s = ctx.slot(name, dt)
        elif dt.itemsize < sd.itemsize:
            # ld.u8/cvt.s8 into a wider register: zero-/sign-extend the value
            wide = int_like(sd, dt.kind == "i")
            s = ctx.slot(name, wide)
            if dt.kind == "f":
                nar = _UINT[dt.itemsize]
                return _store_conv(s, lambda v: np.asarray(v, dt).view(nar).astype(wide))
            return _store_conv(s, lambda v: np.asarray(v).astype(dt).astype(wide))
        else:
            s = ctx.slot(name, int_like(sd, dt.kind == "i"))
            return _store_conv(s, lambda v: np.asarray(v).astype(dt))

    def w(st, sel, v):
        if sel is None:
            st.V[s][...] = v
        else:
            st.V[s][sel] = v
    return w


def writer_pair(ctx: Ctx, op, ptx_type: str):
    """The destination `d` or `d|p` (setp, shfl, match): (writer of d as ptx_type, writer of
    the predicate p, or None when there is none)."""
    if op[0] == "regpair":
        return writer(ctx, ("reg", op[1]), ptx_type), writer(ctx, ("reg", op[2]), "pred")
    return writer(ctx, op, ptx_type), None


def _store_conv(s, conv):
    def w(st, sel, v):
        if sel is None:
            st.V[s][...] = conv(v)
        else:
            st.V[s][sel] = conv(v)
    return w
