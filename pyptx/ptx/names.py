"""Spelling things in PTX: identifiers that ptxas accepts, and immediates for constants.

Why a module: Python names (`x.shape0`, `_`, non-ASCII) are not all PTX identifiers, and two
different names must never collapse into one; constants have per-type literal syntax
(`0f3F800000` for f32, `0d...` for f64, raw bits for f16).
"""
from __future__ import annotations

import re
import struct

import numpy as np

from ..types import PtrType, bf16_bits

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_$]")

#: names the backend itself declares; user names that collide get a suffix
RESERVED = frozenset({"vprintf", "param0", "param1", "retval0", "__dynamic_shared",
                      "__pyptx_printf_buf"})


def ascii_text(text: str) -> str:
    """`text` for a PTX comment: PTX source must be ASCII (ptxas 13.0 and the 580 driver's JIT
    reject any other byte, even inside a comment), so other characters become \\u escapes."""
    return text if text.isascii() else text.encode("ascii", "backslashreplace").decode("ascii")


class Namer:
    """Hands out unique, valid PTX identifiers for user-chosen names (deterministically)."""

    def __init__(self):
        self.used: set[str] = set(RESERVED)

    def __call__(self, name: str) -> str:
        base = _BAD_CHARS.sub("_", name) or "_v"
        if base[0].isdigit():
            base = "_" + base
        if len(base) == 1 and base in "_$":
            base += "v"
        out, n = base, 0
        while out in self.used:
            n += 1
            out = f"{base}_{n}"
        self.used.add(out)
        return out


def f32_bits(value) -> int:
    return struct.unpack("<I", struct.pack("<f", float(value)))[0]


def f64_bits(value) -> int:
    return struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def f16_bits(value) -> int:
    return int(np.array(value, dtype=np.float16).view(np.uint16))


def int_literal(v: int) -> str:
    """Decimal (negative allowed); values above the s64 range as hex (PTX reads them as u64)."""
    v = int(v)
    return str(v) if v < 2**63 else f"0x{v:X}"


def immediate(t, value) -> str:
    """The PTX literal for a constant of type `t` (f16 gives its raw bits for a mov.b16)."""
    if isinstance(t, PtrType):
        return int_literal(value)
    if t.is_float:
        if t.bits == 32:
            return f"0f{f32_bits(value):08X}"
        if t.bits == 64:
            return f"0d{f64_bits(value):016X}"
        if t.name == "bf16":
            return f"0x{bf16_bits(value):04X}"
        return f"0x{f16_bits(value):04X}"
    if t.is_bool:
        return "1" if value else "0"
    return int_literal(value)
