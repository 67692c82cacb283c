"""The pyptx type system: one table of scalar types, array and pointer types, NumPy-2 promotion.

Everything that needs "what is the PTX suffix / register class / numpy dtype of i16" reads the
row in `SCALARS`; nothing else hard-codes those facts.

A scalar type object is also the user-facing DSL name: `pyptx.f32` is `SCALARS['f32']`.
`f32[:]` / `f32[:, :]` / ... give an `ArrayType`; `f32(x)` inside a kernel is a cast (outside a kernel
it returns the numpy scalar, which is handy in tests).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ScalarType:
    """One row of the scalar table.

    kind:       'int' (signed), 'uint', 'float', 'bool'
    bits:       value width (bool: 1 in registers, 8 in memory)
    ptx:        the PTX type suffix for arithmetic/ld/st ('s32', 'u8', 'f16', 'pred', ...)
    bitsuffix:  the untyped suffix of the same width for mov/shfl/ld ('b32', 'b16', ...)
    reg:        the `.reg` type a value of this type lives in (i8/u8 live in 16-bit registers)
    reg_prefix: register name prefix used by the backend ('%r', '%rd', '%f', ...)
    mem_bytes:  bytes in memory
    """
    name: str
    kind: str
    bits: int
    dtype: np.dtype
    ptx: str
    bitsuffix: str
    reg: str
    reg_prefix: str
    mem_bytes: int

    # --- DSL sugar -------------------------------------------------------------------------
    def __getitem__(self, item) -> "ArrayType":
        """`f32[:]`, `f32[:, :]`, `f32[:, :, :, :]`, ... -> ArrayType of that many dimensions.

        Any rank is accepted: a global array parameter is passed as a base pointer plus one size
        per dimension, so nothing in the compiler or the launchers depends on the rank, and an
        array inferred from a launch argument already had whatever rank numpy gave it (only
        shared/local/const arrays, sized in the kernel, stop at 3 dimensions)."""
        items = item if isinstance(item, tuple) else (item,)
        n = self.name
        # `::1` is Numba's contiguity marker (float32[::1], int32[:, ::1]): read as one more
        # dimension, as the string signatures do — the launch checks the argument's layout
        if not items or not all(isinstance(s, slice) and s.start is None and s.stop is None
                                and s.step in (None, 1) for s in items):
            raise TypeError(f"array annotations are written {n}[:], {n}[:, :], {n}[:, :, :], "
                            f"... (one ':' per dimension, or Numba's '::1'; no sizes or steps: "
                            f"the shape comes from the argument at launch)")
        return ArrayType(self, len(items))

    def __call__(self, value=0, *more):
        """Outside a kernel, `f32(1.5)` is `np.float32(1.5)`; inside a kernel it is a cast.
        `bf16(1.5)` gives the bit pattern as `np.uint16` (the host form of bf16).  Called with
        types, `float32(float32, int32)` is a Numba-style `Signature` (a device function's)."""
        if more or isinstance(value, (ScalarType, ArrayType)):
            return Signature((value,) + more, self)
        if self.name == "bf16":
            return np.uint16(bf16_bits(value))
        return self.dtype.type(value)

    def __post_init__(self):
        # kind facts as plain attributes (read in every pass's inner loops): is_float,
        # is_int (signed or unsigned), is_signed, is_bool
        object.__setattr__(self, "is_float", self.kind == "float")
        object.__setattr__(self, "is_int", self.kind in ("int", "uint"))
        object.__setattr__(self, "is_signed", self.kind == "int")
        object.__setattr__(self, "is_bool", self.kind == "bool")

    def __repr__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other) -> bool:
        return other is self or isinstance(other, ScalarType) and other.name == self.name

    def __reduce__(self):
        return (scalar, (self.name,))


def _row(name, kind, bits, dtype, ptx, bitsuffix, reg, prefix, mem):
    return ScalarType(name, kind, bits, np.dtype(dtype), ptx, bitsuffix, reg, prefix, mem)


#: The scalar table.  Order matters only for printing.
SCALARS: dict[str, ScalarType] = {t.name: t for t in [
    #    name    kind     bits dtype      ptx     bits   .reg    prefix  mem
    _row("bool_", "bool",  1,  np.bool_,  "pred", "pred", ".pred", "%p",  1),
    _row("i8",   "int",    8,  np.int8,   "s8",   "b8",  ".b16", "%rs", 1),
    _row("i16",  "int",    16, np.int16,  "s16",  "b16", ".b16", "%rs", 2),
    _row("i32",  "int",    32, np.int32,  "s32",  "b32", ".b32", "%r",  4),
    _row("i64",  "int",    64, np.int64,  "s64",  "b64", ".b64", "%rd", 8),
    _row("u8",   "uint",   8,  np.uint8,  "u8",   "b8",  ".b16", "%rs", 1),
    _row("u16",  "uint",   16, np.uint16, "u16",  "b16", ".b16", "%rs", 2),
    _row("u32",  "uint",   32, np.uint32, "u32",  "b32", ".b32", "%r",  4),
    _row("u64",  "uint",   64, np.uint64, "u64",  "b64", ".b64", "%rd", 8),
    _row("f16",  "float",  16, np.float16, "f16", "b16", ".b16", "%h",  2),
    _row("f32",  "float",  32, np.float32, "f32", "b32", ".f32", "%f",  4),
    _row("f64",  "float",  64, np.float64, "f64", "b64", ".f64", "%fd", 8),
    # bfloat16: numpy has no such dtype, so on the host a bf16 array is a uint16 array of the
    # bit patterns (`pyptx.bfloat16` converts); inside kernels it is a float type.
    _row("bf16", "float",  16, np.uint16, "bf16", "b16", ".b16", "%h",  2),
]}

bool_ = SCALARS["bool_"]
i8, i16, i32, i64 = (SCALARS[n] for n in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (SCALARS[n] for n in ("u8", "u16", "u32", "u64"))
f16, f32, f64 = (SCALARS[n] for n in ("f16", "f32", "f64"))
bf16 = SCALARS["bf16"]

#: numpy dtype -> scalar type; a uint16 array is u16 (bf16 shares its host dtype, never implied)
_BY_DTYPE: dict[np.dtype, ScalarType] = {t.dtype: t for t in SCALARS.values() if t is not bf16}

#: complex64 (numpy complex64): kernels hold it as two f32 values (frontend/complex64.py); it is
#: kept out of SCALARS because no register, instruction or scalar parameter has this type.
c64 = ScalarType("c64", "complex", 64, np.dtype(np.complex64), "b64", "b64", ".b64", "%rd", 8)
_BY_DTYPE[c64.dtype] = c64


def scalar(name: str) -> ScalarType:
    """Look a scalar type up by name ('f32', 'bool_'; 'bool' is accepted too)."""
    if name == "bool":
        name = "bool_"
    return c64 if name == "c64" else SCALARS[name]


def from_dtype(dtype) -> ScalarType:
    """numpy dtype (or anything np.dtype accepts) -> ScalarType.  KeyError if unsupported."""
    return _BY_DTYPE[np.dtype(dtype)]


@dataclass(frozen=True)
class ArrayType:
    """A global-memory array parameter: element type, number of dimensions and layout.

    layout 'C' (what `f32[:, :]` gives): C-contiguous, passed as a base pointer plus one i32
    size per dimension.  layout 'A' (any, as in Numba): the strided specialisation a launch
    compiles for a non-contiguous argument (a numpy strided view, a transpose, Fortran order):
    the pointer and sizes, then one i64 stride per dimension, in *elements*, which may be
    negative (`x[::-1]`) or zero (`np.broadcast_to`, read only).  Its repr is `f32[:, :](A)`;
    the 'C' repr is unchanged, so every cache key of a contiguous kernel is too."""
    dtype: ScalarType
    ndim: int
    layout: str = "C"

    def __post_init__(self):
        if self.layout not in ("C", "A"):
            raise ValueError(f"array layout must be 'C' (contiguous) or 'A' (strided), got "
                             f"{self.layout!r}")

    @property
    def strided(self) -> "ArrayType":
        """The same array type with layout 'A': `x: f32[:, :].strided` takes any strides."""
        return ArrayType(self.dtype, self.ndim, "A")

    def __repr__(self) -> str:
        text = f"{self.dtype.name}[{', '.join([':'] * self.ndim)}]"
        return text if self.layout == "C" else text + "(A)"


@dataclass(frozen=True)
class PtrType:
    """An IR pointer: a 64-bit address into `space` ('global', 'shared', 'local', 'const') of
    `elem`s."""
    space: str
    elem: ScalarType

    def __repr__(self) -> str:
        return f"ptr.{self.space}<{self.elem.name}>"


@dataclass(frozen=True)
class VecType:
    """An IR value holding `n` lanes of `elem` read by one vector load (`vload`), or the
    registers of a multi-register instruction (`mma`, `ldmatrix`); only `lane` takes it apart,
    so no other op ever sees one.  Spelled `f32x4` in the IR text."""
    elem: ScalarType
    n: int

    @property
    def name(self) -> str:
        return f"{self.elem.name}x{self.n}"

    def __repr__(self) -> str:
        return self.name


def vec_type(name: str) -> VecType | None:
    """'f32x4' -> VecType(f32, 4); None when `name` is not a vector type's spelling."""
    elem, sep, n = name.rpartition("x")
    if not sep or not n.isdigit() or elem not in SCALARS:
        return None
    return VecType(SCALARS[elem], int(n))


class _Constexpr:
    """Annotation marker: `n: pyptx.constexpr` is a compile-time parameter."""

    def __repr__(self) -> str:
        return "constexpr"


constexpr = _Constexpr()


class _TensorMapParam:
    """Annotation marker: `tmap: pyptx.tensormap` is a TMA tensor map parameter (a
    `pyptx.TensorMap` argument, passed by value as PTX `.param .align 64 .b8 tmap[128]`)."""

    def __repr__(self) -> str:
        return "tensormap"


tensormap = _TensorMapParam()


# --- promotion ---------------------------------------------------------------------------------

def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy 2 promotion of two strongly typed values (`np.result_type`).  bf16 promotes as
    ml_dtypes' bfloat16 does: like f16 with everything but f16, and bf16 with f16 gives f32."""
    if a is bf16 or b is bf16:
        if a == b:
            return bf16
        other = b if a is bf16 else a
        if other is f16:
            return f32
        r = promote(f16, other)
        return bf16 if r is f16 else r
    return from_dtype(np.result_type(a.dtype, b.dtype))


def bf16_bits(value) -> int:
    """The bfloat16 bit pattern nearest to `value` (round to nearest even; NaN stays NaN)."""
    u = int(np.array(value, dtype=np.float32).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits: int) -> float:
    """The float a bfloat16 bit pattern stands for (exact)."""
    return float(np.array(int(bits) << 16, dtype=np.uint32).view(np.float32))


def promote_weak(strong: ScalarType, literal) -> ScalarType:
    """NumPy 2 (NEP 50) promotion of a typed value with a weak Python literal.

    Raises OverflowError when an int literal does not fit the integer type (as numpy does).
    """
    if isinstance(literal, bool):
        return from_dtype(np.result_type(strong.dtype, np.bool_)) if strong.is_bool else strong
    if isinstance(literal, int):
        if strong.is_bool:
            return literal_type(literal)
        if strong.is_int:
            info = np.iinfo(strong.dtype)
            if not info.min <= literal <= info.max:
                raise OverflowError(f"Python integer {literal} out of bounds for {strong.name}")
        return strong
    if isinstance(literal, float):
        # numpy 2: a weak float keeps a float type; with an int or bool it gives float64.
        return strong if strong.is_float else f64
    raise TypeError(f"unsupported literal {literal!r}")


def literal_type(value) -> ScalarType:
    """The type a Python literal has on its own: bool -> bool_, int -> i32 (i64 if too big),
    float -> f32."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return i32
        if -2**63 <= value < 2**63:
            return i64
        if 0 <= value < 2**64:
            return u64
        raise OverflowError(f"integer literal {value} does not fit in 64 bits")
    if isinstance(value, float):
        return f32
    raise TypeError(f"unsupported literal {value!r}")


class Signature:
    """`void(float32[:], int32)` / `float32(float32)` written with type objects (Numba's
    `Signature`): the argument types and the return type (None for void)."""

    def __init__(self, args, return_type=None):
        self.args, self.return_type = tuple(args), return_type

    def __repr__(self) -> str:
        ret = "void" if self.return_type is None else repr(self.return_type)
        return f"{ret}({', '.join(map(repr, self.args))})"


#: Numba's type names -> pyptx's types (None: `void`/`none`), for signatures and for the Numba
#: type objects a ported kernel passes as dtypes (`pyptx.cuda` re-exports the table's names)
NUMBA_NAMES = {
    "float16": f16, "float32": f32, "float64": f64, "int8": i8, "int16": i16, "int32": i32,
    "int64": i64, "uint8": u8, "uint16": u16, "uint32": u32, "uint64": u64, "boolean": bool_,
    "complex64": c64, "f2": f16, "f4": f32, "f8": f64, "i1": i8, "i2": i16, "i4": i32,
    "i8": i64, "u1": u8, "u2": u16, "u4": u32, "u8": u64, "b1": bool_, "c8": c64,
    "bool_": bool_, "double": f64, "float_": f32, "single": f32, "half": f16,
    "byte": u8, "char": i8, "uchar": u8, "short": i16, "ushort": u16,
    "intc": i32, "uintc": u32, "int_": i64, "uint": u64, "long_": i64,
    "ulong": u64, "longlong": i64, "ulonglong": u64, "intp": i64, "uintp": u64,
    "ssize_t": i64, "size_t": u64, "void": None, "none": None}


def from_numba_type(t):
    """A Numba type object (`numba.float32`, `numba.types.int32[:]`) -> the pyptx type, or
    None; lets `from numba import float32` keep working in ported kernels (dtype= arguments).
    Here, with the types, so the frontend needs nothing from `pyptx.cuda`."""
    name = getattr(t, "name", None)
    if not type(t).__module__.startswith("numba.") or not isinstance(name, str):
        return None
    dtype, ndim = getattr(t, "dtype", None), getattr(t, "ndim", None)
    if dtype is not None and isinstance(ndim, int):
        inner = from_numba_type(dtype)
        return ArrayType(inner, ndim) if isinstance(inner, ScalarType) else None
    return NUMBA_NAMES.get(name)
