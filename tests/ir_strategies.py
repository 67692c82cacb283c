"""Hypothesis strategies for random, valid, terminating IR functions (test-only).

Programs are built structurally (straight-line code, if/else diamonds joined by block arguments,
counted loops with carried values and optional breaks, forwarding blocks) so that they are always
well-formed and always terminate; ops are drawn from the whole opcode table with random types and
odd constants (-0.0, inf, NaN, subnormals, MIN/MAX ints).  Every program is executable by
`ir_interp`: memory indices are masked into range.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from pyptx import types as T
from pyptx.ir.core import Block, Const, Function, Instr, MemDecl, Param
from pyptx.ir.ops import APPROX_FNS, CMP_PREDICATES, SHFL_MODES, SREGS

INTS = [T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64]
FLOATS = [T.f16, T.f32, T.f64]
SCALARS = INTS + FLOATS + [T.bool_]
BUF_ELEMS = 48                        # elements per global buffer; indices are masked to < 40
PARAMS = [("gi", T.PtrType("global", T.i32)), ("gf", T.PtrType("global", T.f32)),
          ("a", T.i32), ("b", T.i64), ("c", T.f32), ("d", T.f64), ("e", T.f16), ("h", T.u32),
          ("k", T.u8), ("m", T.i16), ("flag", T.bool_)]
ODD_FLOATS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 3.0, 1e-45, 6e-8,
              65504.0, 3.4e38, 1e308, 5e-324, 2.0 ** -126, 1.5, -2.5, 0.1]


def const_value(draw, t):
    if t.is_bool:
        return draw(st.booleans())
    if t.is_float:
        v = draw(st.one_of(st.sampled_from(ODD_FLOATS), st.floats(width=t.bits)))
        with np.errstate(all="ignore"):
            return float(t.dtype.type(v))
    info = np.iinfo(t.dtype)
    return draw(st.one_of(st.sampled_from([0, 1, 2, 7, int(info.min), int(info.max), -1 if
                                           t.is_signed else 3]),
                          st.integers(int(info.min), int(info.max))))


def param_values(draw):
    vals = {}
    for name, t in PARAMS:
        if isinstance(t, T.PtrType):
            continue
        vals[name] = const_value(draw, t)
    return vals


def _divisors(t):
    """Constant divisors that passes/strength.py treats specially (powers of two, 0, +-1, ...)."""
    top = t.bits - 1 if t.is_signed else t.bits
    out = [0, 1, 3, 7, 10] + [1 << k for k in range(1, top)]
    return out + ([-1, -2, -4, -3] if t.is_signed else [])


class Gen:
    def __init__(self, draw, max_instrs=40, loops=True):
        self.draw = draw
        self.budget = max_instrs
        self.loops = loops
        self.nblocks = 0
        self.fn = Function("rand")
        self.fn.shared.append(MemDecl("tile", T.f32, 64, 16))
        self.fn.locals.append(MemDecl("scratch", T.i32, 48, 8))
        self.fn.consts.append(MemDecl("table", T.i32, 24, 16, bytes(
            draw(st.lists(st.integers(0, 255), min_size=96, max_size=96)))))
        self.fn.attrs.update({"fma": draw(st.booleans()), "source_file": "gen\"\n.py"})
        for i, (name, t) in enumerate(PARAMS):
            self.fn.params.append(Param(name, t, i))
        self.gi, self.gf = self.fn.params[0], self.fn.params[1]

    def new_block(self, hint="b"):
        b = Block(f"{hint}{self.nblocks}")
        self.nblocks += 1
        self.fn.blocks.append(b)
        return b

    # ---- values ------------------------------------------------------------------------------
    def pick(self, pool, t, allow_const=True):
        cands = pool.get(t, [])
        if cands and (not allow_const or self.draw(st.integers(0, 3)) > 0):
            return cands[self.draw(st.integers(0, len(cands) - 1))]
        if allow_const:
            return Const(t, const_value(self.draw, t))
        return None

    def emit(self, block, pool, op, operands, t, **attrs):
        ins = Instr(op, list(operands), t, attrs, loc=(self.draw(st.integers(1, 99)), 1))
        block.append(ins)
        self.budget -= 1
        if t is not None and not isinstance(t, T.PtrType):
            pool.setdefault(t, []).append(ins)
        return ins

    def index(self, block, pool):
        """An in-range i32/i64 index: (x & 31) [+ K]."""
        x = self.pick(pool, T.i32)
        j = self.emit(block, pool, "and", [x, Const(T.i32, 31)], T.i32)
        if self.draw(st.booleans()):
            j = self.emit(block, pool, "add", [j, Const(T.i32, self.draw(st.integers(0, 8)))],
                          T.i32)
        if self.draw(st.booleans()):
            j = self.emit(block, pool, "cvt", [j], T.i64)
        return j

    def random_op(self, block, pool):
        d = self.draw
        kind = d(st.sampled_from(["arith", "arith", "arith", "bit", "cmp", "select", "cvt",
                                  "fn", "mem", "mem", "misc", "int1", "print"]))
        if kind == "arith":
            t = d(st.sampled_from(INTS + FLOATS))
            op = d(st.sampled_from(["add", "sub", "mul", "div", "min", "max", "neg", "abs"]
                                   + (["fma"] if t.is_float else ["rem", "mulhi"]
                                      if t.bits >= 32 else ["rem"])
                                   + ([] if t.is_float else ["floordiv", "floormod"])))
            n = {"neg": 1, "abs": 1, "fma": 3}.get(op, 2)
            operands = [self.pick(pool, t) for _ in range(n)]
            if op in ("floordiv", "floormod", "div", "rem") and t.is_int and d(st.booleans()):
                operands[1] = Const(t, d(st.sampled_from(_divisors(t))))   # strength reduction
            return self.emit(block, pool, op, operands, t)
        if kind == "bit":
            t = d(st.sampled_from(INTS + [T.bool_]))
            op = d(st.sampled_from(["and", "or", "xor", "not"] + (["shl", "shr"] if t.is_int
                                                                   else [])))
            if op in ("shl", "shr"):
                n = Const(T.u32, d(st.integers(0, 70))) if d(st.booleans()) else \
                    self.pick(pool, T.u32)
                return self.emit(block, pool, op, [self.pick(pool, t), n], t)
            n = 1 if op == "not" else 2
            return self.emit(block, pool, op, [self.pick(pool, t) for _ in range(n)], t)
        if kind == "cmp":
            t = d(st.sampled_from(SCALARS))
            return self.emit(block, pool, "cmp", [self.pick(pool, t), self.pick(pool, t)],
                             T.bool_, pred=d(st.sampled_from(CMP_PREDICATES)))
        if kind == "select":
            t = d(st.sampled_from(SCALARS))
            return self.emit(block, pool, "select", [self.pick(pool, T.bool_),
                             self.pick(pool, t), self.pick(pool, t)], t)
        if kind == "cvt":
            src, dst = d(st.sampled_from(SCALARS)), d(st.sampled_from(SCALARS))
            if d(st.booleans()) and src.bits == dst.bits and not src.is_bool:
                return self.emit(block, pool, "bitcast", [self.pick(pool, src)], dst)
            return self.emit(block, pool, "cvt", [self.pick(pool, src)], dst)
        if kind == "fn":
            t = d(st.sampled_from(FLOATS))
            op = d(st.sampled_from(["sqrt", "rcp", "floor", "ceil", "trunc", "rint", "isnan",
                                    "approx"]))
            if op == "approx":
                return self.emit(block, pool, op, [self.pick(pool, T.f32)], T.f32,
                                 fn=d(st.sampled_from(APPROX_FNS)))
            return self.emit(block, pool, op, [self.pick(pool, t)],
                             T.bool_ if op == "isnan" else t)
        if kind == "int1":
            t = d(st.sampled_from([T.i32, T.u32, T.i64, T.u64]))
            op = d(st.sampled_from(["popc", "clz", "brev", "mulwide", "dp4a"]))
            if op == "mulwide" and t.bits == 32:
                wide = T.i64 if t.is_signed else T.u64
                return self.emit(block, pool, op, [self.pick(pool, t), self.pick(pool, t)], wide)
            if op == "dp4a" and t.bits == 32:
                other = d(st.sampled_from([T.i32, T.u32]))
                return self.emit(block, pool, op, [self.pick(pool, other), self.pick(pool, t),
                                                   self.pick(pool, t)], t)
            if op in ("popc", "clz"):
                return self.emit(block, pool, op, [self.pick(pool, t)], T.i32)
            return self.emit(block, pool, "brev", [self.pick(pool, t)], t)
        if kind == "mem":
            return self.mem_op(block, pool)
        if kind == "print":
            vals = [self.pick(pool, d(st.sampled_from(SCALARS))) for _ in range(d(st.integers(
                0, 3)))]
            return self.emit(block, pool, "print", vals, None,
                             fmt=d(st.sampled_from(["%d\n", "x=\"%f\"\t\\", "é %u ✓\n", ""])))
        return self.misc_op(block, pool)

    def mem_op(self, block, pool):
        d = self.draw
        which = d(st.sampled_from(["gi", "gf", "shared", "local", "const"]))
        if which in ("gi", "gf"):
            base = self.gi if which == "gi" else self.gf
        else:
            elem = T.f32 if which == "shared" else T.i32
            base = self.emit(block, pool, "addr", [], T.PtrType(which, elem), space=which,
                             symbol={"shared": "tile", "local": "scratch"}.get(which, "table"))
        pt = base.type
        j = self.index(block, pool)
        p = self.emit(block, pool, "gep", [base, j], pt)
        if d(st.booleans()):
            p = self.emit(block, pool, "gep", [p, Const(T.i32, d(st.integers(0, 4)))], pt)
        action = d(st.sampled_from(["load", "store", "atomic"]))
        if action == "load" or pt.space == "const" or (action == "atomic"
                                                       and pt.space == "local"):
            return self.emit(block, pool, "load", [p], pt.elem)
        if action == "store":
            return self.emit(block, pool, "store", [p, self.pick(pool, pt.elem)], None)
        kind = d(st.sampled_from(["add", "exch", "cas"] + (["min", "max", "and", "or", "xor"]
                                                          if pt.elem.is_int else [])))
        vals = [self.pick(pool, pt.elem) for _ in range(2 if kind == "cas" else 1)]
        return self.emit(block, pool, "atomic", [p] + vals, pt.elem, kind=kind)

    def misc_op(self, block, pool):
        d = self.draw
        which = d(st.sampled_from(["sreg", "shfl", "vote", "barrier", "fence", "syncwarp"]))
        full = Const(T.u32, 0xFFFFFFFF)
        if which == "sreg":
            return self.emit(block, pool, "sreg", [], T.i32, name=d(st.sampled_from(SREGS)))
        if which == "shfl":
            t = d(st.sampled_from([T.i32, T.u32, T.i64, T.f32, T.f64]))
            return self.emit(block, pool, "shfl", [self.pick(pool, t), Const(T.u32, 1), full], t,
                             mode=d(st.sampled_from(SHFL_MODES)))
        if which == "vote":
            mode = d(st.sampled_from(["any", "all", "ballot"]))
            return self.emit(block, pool, "vote", [self.pick(pool, T.bool_), full],
                             T.u32 if mode == "ballot" else T.bool_, mode=mode)
        if which == "fence":
            return self.emit(block, pool, "fence", [], None, scope=d(st.sampled_from(
                ["gl", "cta", "sys"])))
        if which == "syncwarp":
            return self.emit(block, pool, "syncwarp", [full], None)
        return self.emit(block, pool, "barrier", [], None)

    # ---- structure ---------------------------------------------------------------------------
    def region(self, block, pool, depth):
        """Emit code starting in `block`; returns the block where control continues."""
        while self.budget > 0:
            choice = self.draw(st.integers(0, 9))
            if choice <= 5 or depth >= 2:
                self.random_op(block, pool)
            elif choice <= 7:
                block = self.if_else(block, pool, depth)
            elif choice == 8 and self.loops:
                block = self.loop(block, pool, depth)
            else:
                break
        return block

    def if_else(self, block, pool, depth):
        d = self.draw
        cond = self.pick(pool, T.bool_)
        then_b, else_b, join = self.new_block("then"), self.new_block("else"), \
            self.new_block("join")
        jtypes = d(st.lists(st.sampled_from(SCALARS), max_size=2))
        jargs = [join.add_arg(t, d(st.sampled_from(["", "x", "acc"]))) for t in jtypes]
        block.append(Instr("cbr", [cond], succs=[(then_b, []), (else_b, [])]))
        for b in (then_b, else_b):
            sub = {t: list(v) for t, v in pool.items()}
            end = self.region(b, sub, depth + 1)
            if d(st.booleans()):                          # an extra forwarding block
                fwd = self.new_block("fwd")
                end.append(Instr("br", [], succs=[(fwd, [])]))
                end = fwd
            end.append(Instr("br", [], succs=[(join, [self.pick(sub, t) for t in jtypes])]))
        for a in jargs:
            pool.setdefault(a.type, []).append(a)
        return join

    def loop(self, block, pool, depth):
        d = self.draw
        head, body, exit_ = self.new_block("head"), self.new_block("body"), self.new_block("exit")
        ctypes = d(st.lists(st.sampled_from(SCALARS), max_size=2))
        i = head.add_arg(T.i32, "i")
        carried = [head.add_arg(t, "v") for t in ctypes]
        block.append(Instr("br", [], succs=[(head, [Const(T.i32, 0)] +
                                            [self.pick(pool, t) for t in ctypes])]))
        trip = Const(T.i32, d(st.integers(0, 3))) if d(st.booleans()) else None
        hpool = {t: list(v) for t, v in pool.items()}
        hpool.setdefault(T.i32, []).append(i)
        for a in carried:
            hpool.setdefault(a.type, []).append(a)
        if trip is None:
            trip = self.emit(head, hpool, "and", [self.pick(pool, T.i32), Const(T.i32, 3)], T.i32)
        c = self.emit(head, hpool, "cmp", [i, trip], T.bool_, pred="lt")
        head.append(Instr("cbr", [c], succs=[(body, []), (exit_, [])]))
        bpool = {t: list(v) for t, v in hpool.items()}
        end = self.region(body, bpool, depth + 1)
        if d(st.integers(0, 3)) == 0:                       # a `break`
            cont = self.new_block("cont")
            end.append(Instr("cbr", [self.pick(bpool, T.bool_)], succs=[(exit_, []),
                                                                        (cont, [])]))
            end = cont
        nxt = self.emit(end, bpool, "add", [i, Const(T.i32, 1)], T.i32)
        end.append(Instr("br", [], succs=[(head, [nxt] + [self.pick(bpool, t)
                                                          for t in ctypes])]))
        pool.clear()
        pool.update(hpool)
        return exit_

    def build(self):
        entry = self.new_block("entry")
        pool = {}
        for p in self.fn.params:
            if not isinstance(p.type, T.PtrType):
                pool.setdefault(p.type, []).append(p)
        end = self.region(entry, pool, 0)
        for t in (T.i32, T.f32, T.bool_):
            if pool.get(t):
                self.emit(end, pool, "print", [pool[t][-1]], None, fmt="%d")
        end.append(Instr("ret", []))
        return self.fn


@st.composite
def functions(draw, max_instrs=40, loops=True):
    return Gen(draw, max_instrs, loops).build()


@st.composite
def programs(draw, max_instrs=40, loops=True):
    """(function, scalar parameter values, initial memory)."""
    fn = draw(functions(max_instrs, loops))
    params = param_values(draw)
    params["gi"] = 0
    params["gf"] = BUF_ELEMS * 4
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    gi = rng.integers(-1000, 1000, BUF_ELEMS).astype(np.int32)
    gf = rng.standard_normal(BUF_ELEMS).astype(np.float32)
    memory = {"global": gi.tobytes() + gf.tobytes()}
    return fn, params, memory
