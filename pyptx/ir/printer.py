"""IR -> text.  The text is what `CompiledKernel.ir` shows and what `parse_function` reads back.

Why a custom form and not repr: the text is for humans (MLIR-like, one instruction a line) and for
tests (hand-written IR), so it must round-trip exactly: `print(parse(print(f))) == print(f)`.
That needs (1) deterministic names: instruction results and block arguments are renumbered
`%0, %1, ...` in block order (a block argument keeps its source-variable hint: `%i.3`), params
keep their names; (2) exact constants: floats print as `repr` (which round-trips binary64, and so
every f16/f32 value too), NaNs as their bit pattern in hex; (3) attributes in sorted key order,
strings JSON-escaped.

    kernel @saxpy(%out: ptr.global<f32>, %n: i32)
        shared @tile: f32[256] align 16
        const @taps: f32[2] align 16 data "0000803f00000040"
        attrs {fma = true}
    {
    ^entry:
      %0 = sreg {name = "ctaid.x"} : i32 loc(5:9)
      %1 = cmp %0, %n {pred = "lt"} : bool_
      cbr %1, ^body(%0), ^exit
    ...
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

from ..types import PtrType, ScalarType, VecType, bf16_bits, bf16_value
from .core import BlockArg, Const, Function, Instr, Param

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$]*$")
_HINT_BAD = re.compile(r"[^A-Za-z0-9_]")


def format_type(t) -> str:
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, PtrType):
        return f"ptr.{t.space}<{t.elem.name}>"
    if isinstance(t, VecType):
        return t.name
    return f"?{t!r}"


def format_const(c: Const) -> str:
    """`literal:type`; exact for every value a Const may hold."""
    return f"{format_literal(c.value, c.type)}:{format_type(c.type)}"


def format_literal(value, t) -> str:
    if isinstance(t, ScalarType) and t.is_bool:
        return "true" if value else "false"
    if isinstance(t, ScalarType) and t.is_float:
        v = float(value)
        if t.name == "bf16":
            return hex(bf16_bits(v)) if math.isnan(v) else repr(bf16_value(bf16_bits(v)))
        if math.isnan(v):
            return hex(_float_bits(value, t))
        if t.bits < 64:                  # a Const should hold an exact value; be robust anyway
            with np.errstate(all="ignore"):
                v = float(t.dtype.type(v))
        return repr(v)
    return str(int(value))


def _float_bits(value, t: ScalarType) -> int:
    """The bit pattern of a (NaN) value in type t (payload kept where the value has one)."""
    arr = np.array(value if isinstance(value, np.floating) else float(value))
    arr = arr.astype(t.dtype) if arr.dtype != t.dtype else arr
    return int(arr.view(f"u{t.dtype.itemsize}"))


def format_attr_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, str):
        return json.dumps(v)
    raise TypeError(f"attribute value {v!r} has no text form")


def is_scalar_attr(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating))


def format_attrs(attrs: dict, skip_complex: bool = False) -> str:
    items = []
    for k in sorted(attrs):
        v = attrs[k]
        if skip_complex and not is_scalar_attr(v):
            continue
        items.append(f"{k} = {format_attr_value(v)}")
    return "{" + ", ".join(items) + "}" if items else ""


class _Namer:
    """Assigns every value its printed name, in one deterministic walk."""

    def __init__(self, fn: Function):
        self.names: dict[int, str] = {}
        self.block_names: dict[int, str] = {}
        for p in fn.params:
            self.names[id(p)] = "%" + p.name
        taken_blocks = set()
        for i, b in enumerate(fn.blocks):
            name = b.name if _IDENT.match(b.name or "") else f"bb{i}"
            if name in taken_blocks:
                name = f"{name}.{i}"
            while name in taken_blocks:
                name += "_"
            taken_blocks.add(name)
            self.block_names[id(b)] = "^" + name
        n = 0
        for b in fn.blocks:
            for a in b.args:
                hint = _HINT_BAD.sub("_", a.hint) if a.hint else ""
                self.names[id(a)] = f"%{hint}.{n}" if hint else f"%{n}"
                n += 1
            for ins in b.instrs:
                if ins.type is not None:
                    self.names[id(ins)] = f"%{n}"
                    n += 1

    def value(self, v) -> str:
        if isinstance(v, Const):
            return format_const(v)
        name = self.names.get(id(v))
        if name is None:              # dangling (broken IR): still printable, for debugging
            name = f"%?{type(v).__name__}{id(v) & 0xffff:x}"
        return name

    def block(self, b) -> str:
        return self.block_names.get(id(b), f"^?{getattr(b, 'name', b)}")


def print_function(fn: Function) -> str:
    """The whole function as text (ends with a newline)."""
    nm = _Namer(fn)
    out = []
    params = ", ".join(f"%{p.name}: {format_type(p.type)}" for p in fn.params)
    out.append(f"kernel @{fn.name}({params})")
    for kind, decls in (("shared", fn.shared), ("local", fn.locals), ("const", fn.consts)):
        for d in decls:
            data = f' data "{d.data.hex()}"' if d.data is not None else ""
            out.append(f"    {kind} @{d.name}: {d.elem.name}[{d.count}] align {d.align}{data}")
    if fn.dynamic_shared:
        out.append("    dynamic_shared")
    attrs = format_attrs(fn.attrs, skip_complex=True)
    if attrs:
        out.append(f"    attrs {attrs}")
    out.append("{")
    for b in fn.blocks:
        head = nm.block(b)
        if b.args:
            head += "(" + ", ".join(f"{nm.value(a)}: {format_type(a.type)}" for a in b.args) + ")"
        out.append(head + ":")
        for ins in b.instrs:
            out.append("  " + format_instr(ins, nm))
    out.append("}")
    return "\n".join(out) + "\n"


def _target(nm: _Namer, block, args) -> str:
    s = nm.block(block)
    if args:
        s += "(" + ", ".join(nm.value(a) for a in args) + ")"
    return s


def format_instr(ins: Instr, nm: _Namer) -> str:
    parts = []
    if ins.type is not None:
        parts.append(nm.value(ins) + " =")
    parts.append(ins.op)
    ops = [nm.value(v) for v in ins.operands]
    ops += [_target(nm, b, args) for b, args in ins.succs]
    if ops:
        parts.append(", ".join(ops))
    attrs = format_attrs(ins.attrs)
    if attrs:
        parts.append(attrs)
    if ins.type is not None:
        parts.append(": " + format_type(ins.type))
    if ins.loc is not None:
        parts.append(f"loc({ins.loc[0]}:{ins.loc[1]})")
    return " ".join(parts)
