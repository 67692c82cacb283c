"""A tiny reference interpreter for the IR (test-only): one thread, scalar, straight from ops.py.

Written independently of `pyptx.passes.evaluate` so that folding is checked against a second
reading of the semantics.  Integers are Python ints wrapped to their width, floats are numpy
scalars of their own dtype, pointers are byte addresses into one bytearray per space.
Observable behaviour = the trace of `print`s and stores plus the final memory.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from pyptx.ir.core import Const, Param
from pyptx.types import PtrType

SREG_VALUES = {"tid.x": 3, "tid.y": 0, "tid.z": 0, "ntid.x": 32, "ntid.y": 1, "ntid.z": 1,
               "ctaid.x": 2, "ctaid.y": 1, "ctaid.z": 0, "nctaid.x": 4, "nctaid.y": 2,
               "nctaid.z": 1, "laneid": 3, "warpid": 0}
# %lanemask_* of lane 3, read as i32 like every sreg
SREG_VALUES.update({"lanemask_lt": 7, "lanemask_le": 15, "lanemask_eq": 8, "lanemask_gt": -16,
                    "lanemask_ge": -8})


class Trap(Exception):
    """Out-of-bounds access or step limit: the run has no defined result."""


def wrap(v, t):
    m = (1 << t.bits) - 1
    v &= m
    return v - (1 << t.bits) if t.is_signed and v >> (t.bits - 1) else v


def nearest(q: Fraction, t):
    """Exact rational -> nearest float of type t (ties to even), by checking neighbours."""
    with np.errstate(all="ignore"):
        try:
            fq = float(q)
        except OverflowError:
            fq = math.inf if q > 0 else -math.inf
        y = t.dtype.type(fq)
        if np.isinf(y):
            big = np.finfo(t.dtype).max
            lim = Fraction(float(big)) + Fraction(2) ** (int(np.log2(float(big))) - np.finfo(
                t.dtype).nmant - 1)
            return y if abs(q) >= lim else t.dtype.type(big if q > 0 else -big)
        cands = [np.nextafter(y, t.dtype.type(-np.inf)), y, np.nextafter(y, t.dtype.type(np.inf))]
    best = None
    for c in cands:
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - q)
        bits = int(np.array(c).view(f"u{t.dtype.itemsize}"))
        key = (d, bits & 1)
        if best is None or key < best[0]:
            best = (key, c)
    r = best[1]
    return t.dtype.type(math.copysign(0.0, q)) if r == 0 and q < 0 else r


def to_runtime(v, t):
    if isinstance(t, PtrType):
        return int(v)
    if t.is_bool:
        return bool(v)
    if t.is_float:
        return t.dtype.type(v)
    return int(v)


class Interp:
    def __init__(self, fn, params: dict, memory: dict[str, bytearray], max_steps=20000):
        self.fn = fn
        self.mem = memory                     # space -> bytearray
        self.env: dict[int, object] = {}
        for p in fn.params:
            self.env[id(p)] = to_runtime(params[p.name], p.type)
        self.trace: list = []
        self.steps = max_steps
        self.symbols = {}
        for space, decls in (("shared", fn.shared), ("local", fn.locals)):
            off = 0
            for d in decls:
                off = -(-off // d.align) * d.align
                self.symbols[(space, d.name)] = off
                off += d.count * d.elem.mem_bytes
            self.mem.setdefault(space, bytearray(max(off, 0)))
        const = bytearray()
        for d in fn.consts:                    # read-only tables, initialised with their data
            const += bytearray(-len(const) % d.align)
            self.symbols[("const", d.name)] = len(const)
            const += d.data
        self.mem["const"] = const
        self.symbols[("shared", "__dynamic_shared")] = len(self.mem["shared"])
        self.mem["shared"] += bytearray(256)

    def val(self, v):
        if isinstance(v, Const):
            return to_runtime(v.value, v.type)
        return self.env[id(v)]

    def run(self):
        b = self.fn.entry
        while True:
            for ins in b.instrs:
                self.steps -= 1
                if self.steps < 0:
                    raise Trap("step limit")
                if ins.op == "ret":
                    return self.trace
                if ins.op in ("br", "cbr"):
                    k = 0 if ins.op == "br" or self.val(ins.operands[0]) else 1
                    tgt, args = ins.succs[k]
                    vals = [self.val(a) for a in args]
                    for a, v in zip(tgt.args, vals):
                        self.env[id(a)] = v
                    b = tgt
                    break
                r = self.exec(ins, [self.val(v) for v in ins.operands])
                if ins.type is not None:
                    self.env[id(ins)] = r

    # ---- memory ----------------------------------------------------------------------------
    def _access(self, ptype, addr, elem):
        buf = self.mem[ptype.space]
        n = elem.mem_bytes
        if addr < 0 or addr + n > len(buf):
            raise Trap(f"out of bounds {ptype.space} access at {addr}")
        return buf, n

    def load(self, ptype, addr):
        elem = ptype.elem
        buf, n = self._access(ptype, addr, elem)
        raw = bytes(buf[addr:addr + n])
        if elem.is_bool:
            return raw[0] != 0
        x = np.frombuffer(raw, dtype=elem.dtype)[0]
        return x if elem.is_float else int(x)

    def store(self, ptype, addr, v):
        elem = ptype.elem
        buf, n = self._access(ptype, addr, elem)
        raw = bytes([1 if v else 0]) if elem.is_bool else np.array(v, dtype=elem.dtype).tobytes()
        buf[addr:addr + n] = raw
        self.trace.append(("st", ptype.space, addr, canon(v, elem)))

    # ---- one instruction -------------------------------------------------------------------
    def exec(self, ins, a):
        op, t, at = ins.op, ins.type, ins.attrs
        with np.errstate(all="ignore"):
            if op == "load":
                return self.load(ins.operands[0].type, a[0] + at.get("offset", 0))
            if op == "store":
                return self.store(ins.operands[0].type, a[0] + at.get("offset", 0), a[1])
            if op == "atomic":
                pt = ins.operands[0].type
                where = a[0] + at.get("offset", 0)
                old = self.load(pt, where)
                new = atomic_op(at["kind"], old, a[1:], t)
                self.store(pt, where, new)
                return old
            if op == "print":
                self.trace.append(("print", at["fmt"], tuple(
                    canon(x, v.type) for x, v in zip(a, ins.operands))))
                return None
            if op in ("barrier", "syncwarp", "fence"):
                return None
            if op == "trap_if":
                if a[0]:
                    raise Trap(at["why"])
                return None
            if op == "shfl":
                return a[0]
            if op == "activemask":
                return 1                  # one thread: only itself
            if op == "vote":
                return (1 if a[0] else 0) if at["mode"] == "ballot" else a[0]
            if op == "sreg":
                return SREG_VALUES[at["name"]]
            if op == "addr":
                return self.symbols[(at["space"], at["symbol"])]
            if op == "gep":
                return a[0] + a[1] * t.elem.mem_bytes
            return compute(op, t, at, a, [v.type for v in ins.operands])


def atomic_op(kind, old, vals, t):
    v = vals[0]
    if kind == "cas":
        return vals[1] if old == v else old
    if kind == "exch":
        return v
    if t.is_float:
        with np.errstate(all="ignore"):
            return {"add": lambda: old + v, "min": lambda: np.fmin(old, v),
                    "max": lambda: np.fmax(old, v)}[kind]()
    return wrap({"add": old + v, "min": min(old, v), "max": max(old, v), "and": old & v,
                 "or": old | v, "xor": old ^ v}[kind], t)


def canon(v, t):
    """A comparable form of a value: floats by bits, every NaN the same."""
    if isinstance(t, PtrType) or not t.is_float:
        return int(v) if not isinstance(v, bool) else v
    x = t.dtype.type(v)
    if np.isnan(x):
        return "nan"
    return int(np.array(x).view(f"u{t.dtype.itemsize}"))


def _cdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def compute(op, t, at, a, ts):
    """The pure ops."""
    if op == "cmp":
        x, y = a
        return bool({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                     "ge": x >= y}[at["pred"]])
    if op == "select":
        return a[1] if a[0] else a[2]
    if op == "isnan":
        return bool(np.isnan(a[0]))
    if op == "cvt":
        return convert(a[0], ts[0], t)
    if op == "bitcast":
        if t.is_bool:
            return a[0]
        r = np.array(a[0], dtype=ts[0].dtype).view(t.dtype)[()]
        return r if t.is_float else int(r)
    if op == "popc":
        return bin(a[0] & ((1 << ts[0].bits) - 1)).count("1")
    if op == "clz":
        return ts[0].bits - (a[0] & ((1 << ts[0].bits) - 1)).bit_length()
    if op == "mulwide":
        return wrap(a[0] * a[1], t)
    if op == "dp4a":
        def b4(x, s):
            return [((x >> (8 * i)) & 255) - (256 if s and (x >> (8 * i)) & 128 else 0)
                    for i in range(4)]
        return wrap(a[2] + sum(p * q for p, q in zip(b4(a[0], ts[0].is_signed),
                                                      b4(a[1], ts[1].is_signed))), t)
    if t.is_bool:
        return {"and": lambda: a[0] and a[1], "or": lambda: a[0] or a[1],
                "xor": lambda: a[0] != a[1], "not": lambda: not a[0]}[op]()
    if t.is_float:
        return float_op(op, t, at, a)
    x = a[0]
    y = a[1] if len(a) > 1 else None
    bits = t.bits
    if op == "shl":
        return 0 if (y & 0xFFFFFFFF) >= bits else wrap(x << (y & 0xFFFFFFFF), t)
    if op == "shr":
        n = y & 0xFFFFFFFF
        return (-1 if x < 0 else 0) if n >= bits else x >> n
    if op in ("floordiv", "floormod"):
        if y == 0:
            return 0
        return wrap(x // y, t) if op == "floordiv" else wrap(x % y, t)
    if op in ("div", "rem"):
        if y == 0:
            return 0                       # unspecified: any fixed value
        q = _cdiv(x, y)
        return wrap(q, t) if op == "div" else wrap(x - q * y, t)
    table = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
             "neg": lambda: -x, "abs": lambda: abs(x), "min": lambda: min(x, y),
             "max": lambda: max(x, y), "mulhi": lambda: (x * y) >> bits,
             "and": lambda: x & y, "or": lambda: x | y, "xor": lambda: x ^ y, "not": lambda: ~x,
             "brev": lambda: int(format(x & ((1 << bits) - 1), f"0{bits}b")[::-1], 2)}
    return wrap(table[op](), t)


def float_op(op, t, at, a):
    f = t.dtype.type
    x = a[0]
    if op == "fma":
        if not all(np.isfinite(v) for v in a):
            return f(np.float64(a[0]) * np.float64(a[1]) + np.float64(a[2]))
        q = Fraction(float(a[0])) * Fraction(float(a[1])) + Fraction(float(a[2]))
        if q == 0:
            p = float(a[0]) * float(a[1])
            return f(p + float(a[2]))       # the sign of an exact zero (both exact in f64)
        return nearest(q, t)
    if op == "approx":
        fn = {"ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
              "rsqrt": lambda v: 1 / np.sqrt(v), "rcp": lambda v: 1 / v,
              "sqrt": np.sqrt}[at["fn"]]
        return f(fn(x))
    if op in ("min", "max"):
        return (np.fmin if op == "min" else np.fmax)(a[0], a[1])
    table = {"add": lambda: x + a[1], "sub": lambda: x - a[1], "mul": lambda: x * a[1],
             "div": lambda: x / a[1], "neg": lambda: -x, "abs": lambda: np.abs(x),
             "sqrt": lambda: np.sqrt(x), "rcp": lambda: f(1) / x, "floor": lambda: np.floor(x),
             "ceil": lambda: np.ceil(x), "trunc": lambda: np.trunc(x), "rint": lambda: np.rint(x)}
    return f(table[op]())


def convert(v, src, dst):
    if dst.is_bool:
        return bool(v != 0)
    if src.is_bool:
        v = int(v)
        return dst.dtype.type(v) if dst.is_float else v
    if dst.is_int:
        if src.is_int:
            return wrap(v, dst)
        if np.isnan(v):
            return 0
        lo, hi = int(np.iinfo(dst.dtype).min), int(np.iinfo(dst.dtype).max)
        if np.isinf(v):
            return hi if v > 0 else lo
        return min(hi, max(lo, math.trunc(float(v))))
    if src.is_float and (np.isnan(v) or np.isinf(v)):
        return dst.dtype.type(v)
    q = Fraction(int(v)) if src.is_int else Fraction(float(v))
    if q == 0:
        return dst.dtype.type(float(v)) if src.is_float else dst.dtype.type(0.0)
    return nearest(q, dst)


def run_function(fn, params, memory, max_steps=20000):
    """(trace, memory) of one run, or ('trap', message)."""
    mem = {k: bytearray(v) for k, v in memory.items()}
    try:
        trace = Interp(fn, params, mem, max_steps).run()
    except Trap as e:
        return ("trap", str(e))
    return trace, {k: bytes(v) for k, v in mem.items()}


__all__ = ["Interp", "run_function", "Param", "Trap"]
