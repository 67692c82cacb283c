"""The backend's tables: type suffixes, instruction templates, compare predicates, ISA minimums.

Why tables: the mapping IR op x type -> PTX opcode is a grid of facts from the PTX ISA, so it is
written down once here and the lowering code only looks it up.  Every template is a str.format
pattern over these keys (filled per ScalarType by `suffixes`):

    {t}  arithmetic suffix: 's32', 'u16', 'f32' ... (8-bit ints compute in 16-bit registers)
    {s}  signed suffix of the same width ('s16' for u8/u16), for `neg` which only has .s forms
    {b}  untyped suffix: 'b16', 'b32', 'b64', 'pred'
"""
from __future__ import annotations

import re

from ..ir import ops as ir_ops
from ..ir.ops import ptx_features
from ..types import PtrType, ScalarType, u32, u64

# ---- registers ---------------------------------------------------------------------------------

#: register prefix -> (.reg declaration type, mov suffix), in declaration order
REG_CLASSES: dict[str, tuple[str, str]] = {
    "%p": (".pred", "pred"),
    "%rs": (".b16", "b16"),
    "%h": (".b16", "b16"),
    "%r": (".b32", "b32"),
    "%rd": (".b64", "b64"),
    "%f": (".f32", "f32"),
    "%fd": (".f64", "f64"),
}


#: width of shared-memory addresses: 32 (nvcc's `mov.u32 %r, sym` / `[%r+imm]`; a block's
#: shared window is far below 4 GiB) or 64 (`%rd`, like every other space).  64 by default:
#: measured over the stdlib (docs/benchmarks.md), 32-bit shared addresses change ptxas's
#: register allocation by -2..+2 per kernel for no SASS gain, and pushed LayerNorm past the
#: 32-register occupancy step.  Both forms are tested (tests/test_addressing.py).
SHARED_ADDRESS_BITS = 64


def shared32(t) -> bool:
    """Is `t` a pointer held in a 32-bit register (shared memory with 32-bit addresses)?"""
    return isinstance(t, PtrType) and t.space == "shared" and SHARED_ADDRESS_BITS == 32


def scalar_of(t) -> ScalarType:
    """Pointers are plain unsigned values as far as registers and arithmetic are concerned:
    u32 for 32-bit shared addresses, u64 otherwise."""
    if isinstance(t, PtrType):
        return u32 if shared32(t) else u64
    return t


def reg_prefix(t) -> str:
    if isinstance(t, PtrType):
        return "%r" if shared32(t) else "%rd"
    return t.reg_prefix


def kind(t) -> str:
    """'int' (signed or unsigned, pointers too), 'float' or 'bool': the template key."""
    t = scalar_of(t)
    return "int" if t.kind in ("int", "uint") else t.kind


class Suffixes:
    """Every suffix the templates need for one type (computed once per type)."""
    __slots__ = ("t", "s", "b", "mem", "param", "sel", "bits")

    def __init__(self, st: ScalarType):
        wide = 16 if st.bits == 8 else st.bits        # 8-bit ints live in 16-bit registers
        self.bits = st.bits
        if st.is_bool:
            self.t = self.s = self.b = self.sel = "pred"
        else:
            self.t = (st.ptx[0] + str(wide)) if st.is_int else st.ptx
            self.s = "s" + str(wide)
            self.b = "pred" if st.is_bool else "b" + str(wide)
            self.sel = st.ptx if st.ptx in ("f32", "f64") else self.b
        #: ld/st type: bool is one byte 0/1 in memory, f16 moves as raw bits
        self.mem = "u8" if st.is_bool else ("b16" if st.ptx in ("f16", "bf16") else st.ptx)
        #: .param type (docs/architecture.md table)
        self.param = self.mem


_SUFFIXES: dict = {}


def suffixes(t) -> Suffixes:
    st = scalar_of(t)
    s = _SUFFIXES.get(st.name)
    if s is None:
        s = _SUFFIXES[st.name] = Suffixes(st)
    return s


# ---- instruction templates ---------------------------------------------------------------------

#: (op, kind) -> template.  Floats are always round-to-nearest and never .ftz (numpy semantics).
TEMPLATES: dict[tuple[str, str], str] = {
    ("add", "int"): "add.{t}", ("add", "float"): "add.rn.{t}",
    ("sub", "int"): "sub.{t}", ("sub", "float"): "sub.rn.{t}",
    ("mul", "int"): "mul.lo.{t}", ("mul", "float"): "mul.rn.{t}",
    ("div", "int"): "div.{t}", ("div", "float"): "div.rn.{t}",
    ("rem", "int"): "rem.{t}",
    ("min", "int"): "min.{t}", ("min", "float"): "min.{t}",
    ("max", "int"): "max.{t}", ("max", "float"): "max.{t}",
    ("fma", "float"): "fma.rn.{t}",
    ("mulhi", "int"): "mul.hi.{t}",
    ("and", "int"): "and.{b}", ("and", "bool"): "and.pred",
    ("or", "int"): "or.{b}", ("or", "bool"): "or.pred",
    ("xor", "int"): "xor.{b}", ("xor", "bool"): "xor.pred",
    ("shl", "int"): "shl.{b}",
    ("shr", "int"): "shr.{t}",
    ("neg", "int"): "neg.{s}", ("neg", "float"): "neg.{t}",
    ("abs", "int"): "abs.{t}", ("abs", "float"): "abs.{t}",
    ("not", "int"): "not.{b}", ("not", "bool"): "not.pred",
    ("sqrt", "float"): "sqrt.rn.{t}",
    ("rcp", "float"): "rcp.rn.{t}",
    ("floor", "float"): "cvt.rmi.{t}.{t}",
    ("ceil", "float"): "cvt.rpi.{t}.{t}",
    ("trunc", "float"): "cvt.rzi.{t}.{t}",
    ("rint", "float"): "cvt.rni.{t}.{t}",
}

#: ops whose 8-bit result can leave the sign/zero extension of the 16-bit register: renormalise
NORMALISE_8BIT = frozenset({"add", "sub", "mul", "div", "rem", "neg", "abs", "shl", "not"})

#: the instruction that re-extends an 8-bit value held in a 16-bit register
NORMALISE = {"s8": "cvt.s16.s8", "u8": "cvt.u16.u8"}

#: f16 ops PTX has no instruction for: computed in f32 and rounded once back to f16, which is
#: exact for + - * / sqrt since f32 has more than 2 * 11 + 2 significand bits
F16_VIA_F32 = frozenset({"div", "sqrt", "rcp"})

#: f16 ops that need a newer arch; below it they go through f32 as well
F16_MIN_SM = {"min": 80, "max": 80}

#: unary / binary / ternary ops served by TEMPLATES
UNARY_OPS = frozenset({"neg", "abs", "not", "sqrt", "rcp", "floor", "ceil", "trunc", "rint"})
BINARY_OPS = frozenset({"add", "sub", "mul", "div", "rem", "min", "max", "mulhi", "and", "or",
                        "xor", "shl", "shr"})

# ---- compares ----------------------------------------------------------------------------------

#: IR predicate -> setp comparison, per operand kind.  Floats: ordered, except 'ne' which is
#: unordered (NaN != x is True, as in Python).
CMP = {
    "int": {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"},
    "uint": {"eq": "eq", "ne": "ne", "lt": "lo", "le": "ls", "gt": "hi", "ge": "hs"},
    "float": {"eq": "eq", "ne": "neu", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"},
}


def cmp_table(t) -> dict[str, str]:
    st = scalar_of(t)
    return CMP["float" if st.is_float else st.kind]


# ---- atomics -----------------------------------------------------------------------------------

#: kind -> {IR type name: atom type suffix}.  Anything not listed (8/16-bit, bool, float min/max,
#: float bitwise) has no PTX atom and is rejected.
_ATOM_BITS = {"i32": "b32", "u32": "b32", "i64": "b64", "u64": "b64"}
ATOM_TYPES: dict[str, dict[str, str]] = {
    "add": {"i32": "s32", "u32": "u32", "i64": "u64", "u64": "u64", "f32": "f32", "f64": "f64"},
    "min": {"i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64"},
    "max": {"i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64"},
    "exch": {**_ATOM_BITS, "f32": "b32", "f64": "b64"},
    "cas": {**_ATOM_BITS, "f32": "b32", "f64": "b64"},
    "and": dict(_ATOM_BITS), "or": dict(_ATOM_BITS), "xor": dict(_ATOM_BITS),
    "inc": {"u32": "u32"}, "dec": {"u32": "u32"},
}

# ---- warp, special registers, fences -------------------------------------------------------------

#: shfl mode -> the `c` operand (clamp 31 for bfly/down/idx; 0 for up: segment starts at lane 0)
SHFL_C = {"bfly": "0x1f", "down": "0x1f", "idx": "0x1f", "up": "0"}

SREGS = frozenset(ir_ops.SREGS)

FENCES = {"gl": "membar.gl", "cta": "membar.cta", "sys": "membar.sys"}

APPROX = frozenset(ir_ops.APPROX_FNS)

# ---- PTX ISA versions --------------------------------------------------------------------------

from ..target import ARCH_MIN_ISA  # noqa: E402,F401 - the arch facts live in pyptx/target.py

#: instruction features that need more than the base: name -> (min ISA x10, min sm).  Each is
#: declared by the op records that need it (`gate`: every use, checked by the emitter before the
#: lowering runs; `features`: some types, the lowering calls `em.need`)
FEATURES: dict[str, tuple[int, int | str]] = ptx_features()

_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")


def arch_number(arch: str) -> int:
    m = _ARCH_RE.match(arch)
    return int(m.group(1)) if m else 0


def format_version(isa: int) -> str:
    return f"{isa // 10}.{isa % 10}"


def wrap_s32(v: int) -> int:
    """v wrapped to the signed 32-bit range (a 32-bit address immediate)."""
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)
