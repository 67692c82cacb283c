"""Memory: addresses, loads and stores (scalar and vector), atomics.

Every op that takes an address lists it in `addresses`: the access is at that pointer plus
attrs.get(key, 0) bytes (passes/addressing.py folds constant offsets into it, the backend prints
`[%r+key]`).
"""
from __future__ import annotations

from ...types import PtrType, VecType
from .record import family

op = family("memory")

ATOMIC_KINDS = ("add", "min", "max", "exch", "and", "or", "xor", "cas", "inc", "dec")
VECTOR_LANES = (1, 2, 4, 8)
_AT = ((0, "offset"),)


def _check_addr(c, ins, T, a):
    at, fn = ins.attrs, c.fn
    space, sym = at.get("space"), at.get("symbol")
    c.need(isinstance(T, PtrType) and T.space == space and space in ("shared", "local", "const"),
           "addr: result pointer space must equal attrs space (shared/local/const)")
    if sym == "__dynamic_shared":
        c.need(space == "shared" and fn.dynamic_shared,
               "__dynamic_shared needs space 'shared' and fn.dynamic_shared")
        return
    decls = {"shared": fn.shared, "local": fn.locals, "const": fn.consts}[space]
    c.need(any(d.name == sym for d in decls), f"unknown {space} symbol {sym!r}")


def _check_gep(c, ins, T, a):
    c.need(isinstance(T, PtrType) and a[0] == T and a[1] is not None
           and getattr(a[1], "name", "") in ("i32", "i64"),
           "gep: pointer of the result type and an i32/i64 index")


def _check_load(c, ins, T, a):
    c.need(isinstance(a[0], PtrType) and T == a[0].elem, "load: result = pointer's elem")


def _check_store(c, ins, T, a):
    c.need(isinstance(a[0], PtrType) and a[1] == a[0].elem,
           "store: value type must be the pointer's elem")
    c.need(a[0].space != "const", "store: const memory is read-only")


def _check_atomic(c, ins, T, a):
    kind = ins.attrs.get("kind")
    c.need(kind in ATOMIC_KINDS, f"atomic kind must be one of {ATOMIC_KINDS}")
    c.need(len(a) == (3 if kind == "cas" else 2), "atomic: p, v (cas: p, expected, new)")
    c.need(isinstance(a[0], PtrType) and a[0].space in ("global", "shared")
           and T == a[0].elem and all(x == T for x in a[1:]),
           "atomic: global/shared pointer, values and result of its elem type")


def _check_vector(c, ins, T, a):
    """vload / vstore: one access of n lanes, at most 16 bytes, never bool."""
    name = ins.op
    c.need(isinstance(a[0], PtrType) and not a[0].elem.is_bool, f"{name}: a non-bool pointer")
    elem = a[0].elem
    n = T.n if name == "vload" else len(a) - 1
    if name == "vload":
        c.need(isinstance(T, VecType) and T.elem == elem, "vload: result = VecType of elem")
    else:
        c.need(all(t == elem for t in a[1:]), "vstore: values of the pointer's elem type")
    c.need(n in VECTOR_LANES and n * elem.mem_bytes <= 16,
           f"{name}: 1, 2, 4 or 8 lanes of at most 16 bytes in all")


def _check_lane(c, ins, T, a):
    c.need(isinstance(a[0], VecType) and T == a[0].elem and isinstance(ins.attrs.get("index"), int)
           and 0 <= ins.attrs["index"] < a[0].n, "lane: index within a vector's lanes, result of "
           "its elem type")


OPS = [
    op("addr", "",
       "T ptr.<space><elem>: base address of a static shared/local/const MemDecl or of the "
       "dynamic shared memory.  attrs space in {'shared','local','const'}, symbol = MemDecl "
       "name, or symbol = '__dynamic_shared' for dynamic shared memory.  Not folded",
       check=_check_addr, ptx=("mov",)),
    op("gep", "p, i",
       "T = type of p: p + i * sizeof(elem).  i is i32 (sign-extended: the multiply is a "
       "widening one) or i64.  A negative i is allowed here (memcheck catches it).  Never "
       "evaluated (an address), but constant folding knows `gep p, 0` is p",
       check=_check_gep, ptx=("add", "cvt", "mad", "mov")),
    op("load", "p", "T = elem of p: read memory at p + attrs.get('offset', 0) bytes",
       pure=False, check=_check_load, addresses=_AT, ptx=("ld", "setp")),
    op("store", "p, v", "write v (type elem of p) at p + attrs.get('offset', 0) bytes",
       pure=False, result=False, check=_check_store, addresses=_AT, ptx=("st", "selp")),
    op("atomic", "p, v[, w]",
       "atomic read-modify-write at p + attrs.get('offset', 0), returns the old value "
       "(T = elem of p).  attrs kind in "
       "{'add','min','max','exch','and','or','xor','cas','inc','dec'}; cas: operands p, "
       "expected, new; inc/dec (u32): PTX atom.inc/dec (wrap at v)",
       pure=False, check=_check_atomic, addresses=_AT, features=(("atom.add.f64", 50, 60),),
       ptx=("atom",)),
    op("vload", "p",
       "T = VecType(elem of p, n), n in {1, 2, 4, 8}, n * sizeof(elem) <= 16: the n "
       "consecutive elements at p + attrs.get('offset', 0) bytes, read by one access; the "
       "address must be a multiple of n * sizeof(elem) (a misaligned one traps)",
       pure=False, check=_check_vector, addresses=_AT, ptx=("ld", "mov")),
    op("vstore", "p, v0, ..., v(n-1)",
       "write the n values (type elem of p) as one access at p + attrs.get('offset', 0); "
       "n and alignment as vload",
       nargs=None, pure=False, result=False, check=_check_vector, addresses=_AT,
       ptx=("st", "mov")),
    op("lane", "v", "v is a VecType value; T = its elem: lane attrs index (0-based) of v",
       check=_check_lane, ptx=("mov",)),
]
