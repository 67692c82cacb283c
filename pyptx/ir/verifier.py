"""IR well-formedness checks.  A failure is a compiler bug (never a user error): `IRError`.

Why so strict: the passes and the backend rely on these invariants (types per ops.py, one
terminator per block, SSA dominance, branch arguments matching block arguments, `instr.block`
kept up to date), and catching a broken pass right where it breaks is far cheaper than debugging
wrong PTX.
"""
from __future__ import annotations

from ..types import PtrType, ScalarType, VecType, bool_, u32
from .core import TERMINATORS, Block, BlockArg, Const, Function, Instr, Param
from .ops import ADDRESS_OFFSETS, APPROX_FNS, ATOMIC_KINDS, CMP_PREDICATES, OPS, SHFL_MODES, SREGS, VECTOR_LANES


class IRError(Exception):
    """The IR is malformed (an internal compiler error)."""


def _is_num(t) -> bool:
    return isinstance(t, ScalarType) and (t.is_int or t.is_float)


def _is_int(t, widths=None) -> bool:
    return isinstance(t, ScalarType) and t.is_int and (widths is None or t.bits in widths)


def _is_float(t) -> bool:
    return isinstance(t, ScalarType) and t.is_float


def _is_i32ish(t) -> bool:
    return isinstance(t, ScalarType) and t.is_int and t.bits == 32


class _Checker:
    def __init__(self, fn: Function):
        self.fn = fn
        self.where = ""

    def fail(self, msg: str):
        raise IRError(f"{self.fn.name}: {self.where}: {msg}" if self.where else
                      f"{self.fn.name}: {msg}")

    def need(self, cond, msg: str):
        if not cond:
            self.fail(msg)

    # ---- per-op type rules ------------------------------------------------------------------
    def check_types(self, ins: Instr):
        op, T, a = ins.op, ins.type, [v.type for v in ins.operands]
        for _, key in ADDRESS_OFFSETS.get(op, ()):
            self.need(type(ins.attrs.get(key, 0)) is int, f"{op} {key} must be an int")
        need = self.need
        at = ins.attrs
        if op in ("add", "sub", "mul", "div", "min", "max"):
            need(_is_num(T) and a == [T, T], f"operands and result must be one int/float type")
        elif op in ("rem", "floordiv", "floormod"):
            need(_is_int(T) and a == [T, T], f"{op} needs int operands of the result type")
        elif op in ("neg", "abs"):
            need(_is_num(T) and a == [T], "operand must have the result's int/float type")
        elif op == "fma":
            need(_is_float(T) and a == [T, T, T], "fma needs three floats of the result type")
        elif op == "mulhi":
            need(_is_int(T, (32, 64)) and a == [T, T], "mulhi needs 32/64-bit int operands")
        elif op == "mulwide":
            need(_is_int(T, (64,)) and a[0] == a[1] and _is_int(a[0], (32,))
                 and a[0].kind == T.kind, "mulwide: i32/u32 operands, i64/u64 result")
        elif op in ("and", "or", "xor"):
            need(isinstance(T, ScalarType) and not T.is_float and a == [T, T],
                 "bitwise ops need int/bool operands of the result type")
        elif op == "not":
            need(isinstance(T, ScalarType) and not T.is_float and a == [T],
                 "not needs an int/bool operand of the result type")
        elif op in ("shl", "shr"):
            need(_is_int(T) and a[0] == T and _is_i32ish(a[1]),
                 "shifts: value of the result type, 32-bit shift count")
        elif op in ("popc", "clz"):
            need(T.__class__ is ScalarType and T.name == "i32" and _is_int(a[0], (32, 64)),
                 "popc/clz: 32/64-bit int operand, i32 result")
        elif op == "brev":
            need(_is_int(T, (32, 64)) and a == [T], "brev: 32/64-bit int of the result type")
        elif op == "dp4a":
            need(_is_i32ish(T) and a[2] == T and _is_i32ish(a[0]) and _is_i32ish(a[1]),
                 "dp4a: i32/u32 operands, result = type of c")
        elif op in ("sqrt", "rcp", "floor", "ceil", "trunc", "rint"):
            need(_is_float(T) and a == [T], "needs a float operand of the result type")
        elif op == "approx":
            need(T == a[0] and _is_float(T) and T.name == "f32", "approx is f32 -> f32")
            need(at.get("fn") in APPROX_FNS, f"approx fn must be one of {APPROX_FNS}")
        elif op == "cmp":
            need(T == bool_ and a[0] == a[1] and a[0] is not None, "cmp: equal operand types, "
                 "bool_ result")
            need(at.get("pred") in CMP_PREDICATES, f"cmp pred must be one of {CMP_PREDICATES}")
        elif op == "select":
            need(a[0] == bool_ and a[1] == T and a[2] == T, "select: bool_ condition, both "
                 "values of the result type")
        elif op == "isnan":
            need(T == bool_ and _is_float(a[0]), "isnan: float operand, bool_ result")
        elif op == "cvt":
            need(isinstance(T, ScalarType) and isinstance(a[0], ScalarType),
                 "cvt converts between scalar types")
        elif op == "bitcast":
            need(_width(T) is not None and _width(T) == _width(a[0]),
                 "bitcast needs types of the same width")
        elif op == "sreg":
            need(T is not None and T.name == "i32", "sreg result is i32")
            need(at.get("name") in SREGS, f"unknown special register {at.get('name')!r}")
        elif op == "addr":
            self.check_addr(ins)
        elif op == "gep":
            need(isinstance(T, PtrType) and a[0] == T and a[1] is not None
                 and getattr(a[1], "name", "") in ("i32", "i64"),
                 "gep: pointer of the result type and an i32/i64 index")
        elif op == "load":
            need(isinstance(a[0], PtrType) and T == a[0].elem, "load: result = pointer's elem")
            need(isinstance(at.get("offset", 0), int), "load offset must be an int")
        elif op == "store":
            need(isinstance(a[0], PtrType) and a[1] == a[0].elem,
                 "store: value type must be the pointer's elem")
            need(a[0].space != "const", "store: const memory is read-only")
            need(isinstance(at.get("offset", 0), int), "store offset must be an int")
        elif op in ("vload", "vstore", "lane"):
            self.check_vector(ins)
        elif op == "atomic":
            kind = at.get("kind")
            need(kind in ATOMIC_KINDS, f"atomic kind must be one of {ATOMIC_KINDS}")
            need(len(a) == (3 if kind == "cas" else 2), "atomic: p, v (cas: p, expected, new)")
            need(isinstance(a[0], PtrType) and a[0].space in ("global", "shared")
                 and T == a[0].elem and all(x == T for x in a[1:]),
                 "atomic: global/shared pointer, values and result of its elem type")
        elif op == "syncwarp":
            need(a[0] == u32, "syncwarp mask is u32")
        elif op == "fence":
            need(at.get("scope") in ("gl", "cta", "sys"), "fence scope must be gl/cta/sys")
        elif op == "shfl":
            need(T == a[0] and (_is_int(T, (32, 64)) or _is_float(T) and T.bits >= 32),
                 "shfl: 32/64-bit int/float value of the result type")
            need(_is_i32ish(a[1]) and a[2] == u32, "shfl: i32/u32 lane, u32 mask")
            need(at.get("mode") in SHFL_MODES, f"shfl mode must be one of {SHFL_MODES}")
        elif op == "activemask":
            need(T == u32, "activemask result is u32")
        elif op == "vote":
            mode = at.get("mode")
            need(mode in ("any", "all", "uni", "ballot"), "vote mode must be any/all/uni/ballot")
            need(a[0] == bool_ and a[1] == u32, "vote: bool_ predicate, u32 mask")
            need(T == (u32 if mode == "ballot" else bool_), "vote result: bool_ (ballot: u32)")
        elif op == "match":
            need(T == u32 and at.get("mode") in ("any", "all") and a[1] == u32,
                 "match: mode any/all, u32 mask, u32 result")
        elif op == "barrier_red":
            mode = at.get("mode")
            need(a[0] == bool_ and mode in ("popc", "and", "or"), "barrier_red: bool_, popc/and/or")
        elif op == "trap_if":
            why = at.get("why")
            need(a[0] == bool_ and isinstance(why, str) and why.isascii() and "\n" not in why,
                 "trap_if: bool_ condition, an ASCII one-line why")
        elif op == "bfind":
            need(T == u32 and _is_int(a[0], (32, 64)), "bfind: 32/64-bit int operand, u32 result")
        elif op == "print":
            need(isinstance(at.get("fmt"), str), "print needs a fmt string")
            need(all(isinstance(t, ScalarType) for t in a), "print takes scalars")
        elif op == "cbr":
            need(a[0] == bool_, "cbr condition must be bool_")

    def check_vector(self, ins: Instr):
        """vload / vstore / lane: one access of n lanes, at most 16 bytes, never bool."""
        op, T, a, need = ins.op, ins.type, [v.type for v in ins.operands], self.need
        if op == "lane":
            need(isinstance(a[0], VecType) and T == a[0].elem
                 and isinstance(ins.attrs.get("index"), int)
                 and 0 <= ins.attrs["index"] < a[0].n, "lane: index within a vector's lanes, "
                 "result of its elem type")
            return
        need(isinstance(a[0], PtrType) and not a[0].elem.is_bool, f"{op}: a non-bool pointer")
        elem = a[0].elem
        n = T.n if op == "vload" else len(a) - 1
        if op == "vload":
            need(isinstance(T, VecType) and T.elem == elem, "vload: result = VecType of elem")
        else:
            need(all(t == elem for t in a[1:]), "vstore: values of the pointer's elem type")
        need(n in VECTOR_LANES and n * elem.mem_bytes <= 16,
             f"{op}: 1, 2, 4 or 8 lanes of at most 16 bytes in all")
        need(isinstance(ins.attrs.get("offset", 0), int), f"{op} offset must be an int")

    def check_addr(self, ins: Instr):
        T, at, fn = ins.type, ins.attrs, self.fn
        space, sym = at.get("space"), at.get("symbol")
        self.need(isinstance(T, PtrType) and T.space == space
                  and space in ("shared", "local", "const"),
                  "addr: result pointer space must equal attrs space (shared/local/const)")
        if sym == "__dynamic_shared":
            self.need(space == "shared" and fn.dynamic_shared,
                      "__dynamic_shared needs space 'shared' and fn.dynamic_shared")
            return
        decls = {"shared": fn.shared, "local": fn.locals, "const": fn.consts}[space]
        self.need(any(d.name == sym for d in decls), f"unknown {space} symbol {sym!r}")

    # ---- structure -------------------------------------------------------------------------
    def run(self):
        from .analysis import DomTree
        fn = self.fn
        self.need(fn.blocks, "function has no blocks")
        self.need(not fn.entry.args, "the entry block has arguments")
        block_set = set(fn.blocks)
        self.need(len(block_set) == len(fn.blocks), "a block is listed twice")
        params = {id(p) for p in fn.params}
        defined_in: dict[int, tuple[Block, int]] = {}
        for b in fn.blocks:
            for a in b.args:
                self.need(a.block is b, f"block arg of ^{b.name} points at another block")
                defined_in[id(a)] = (b, -1)
            for k, ins in enumerate(b.instrs):
                if id(ins) in defined_in:
                    self.where = f"^{b.name}"
                    self.fail(f"instruction '{ins.op}' appears twice")
                defined_in[id(ins)] = (b, k)
        dom = DomTree(fn)
        for b in fn.blocks:
            self.where = f"^{b.name}"
            self.need(b.instrs, "empty block (no terminator)")
            for k, ins in enumerate(b.instrs):
                self.where = f"^{b.name}[{k}] {ins.op}"
                last = k == len(b.instrs) - 1
                self.need(ins.block is b, "instr.block is not its block")
                self.need(ins.is_terminator == last,
                          "missing terminator" if last else "terminator in the middle of a block")
                self.check_instr(ins, block_set)
                for v in self.operand_values(ins):
                    self.check_use(v, b, k, params, defined_in, dom)

    @staticmethod
    def operand_values(ins: Instr):
        yield from ins.operands
        for _, args in ins.succs:
            yield from args

    def check_instr(self, ins: Instr, block_set):
        info = OPS.get(ins.op)
        self.need(info is not None, f"unknown opcode {ins.op!r}")
        if info.nargs is not None:
            self.need(len(ins.operands) == info.nargs,
                      f"expects {info.nargs} operands, has {len(ins.operands)}")
        elif ins.op == "atomic":
            self.need(len(ins.operands) in (2, 3), "atomic takes 2 or 3 operands")
        for v in ins.operands:
            self.need(isinstance(v, (Instr, BlockArg, Param, Const)) and v.type is not None,
                      f"operand {v!r} is not a value")
            self.need(ins.op == "lane" or not isinstance(v.type, VecType),
                      "a vector value can only be taken apart by 'lane'")
        self.need((ins.type is not None) == info.result,
                  "must produce a value" if info.result else "must not produce a value")
        nsucc = {"br": 1, "cbr": 2}.get(ins.op, 0)
        self.need(len(ins.succs) == nsucc, f"needs {nsucc} branch targets")
        for tgt, args in ins.succs:
            self.need(tgt in block_set, f"branch to unknown block {getattr(tgt, 'name', tgt)}")
            self.need(len(args) == len(tgt.args),
                      f"^{tgt.name} takes {len(tgt.args)} arguments, branch passes {len(args)}")
            for v, formal in zip(args, tgt.args):
                self.need(getattr(v, "type", None) == formal.type,
                          f"branch argument type {getattr(v, 'type', None)!r} does not match "
                          f"^{tgt.name}'s {formal.type!r}")
        self.check_types(ins)

    def check_use(self, v, b, k, params, defined_in, dom):
        if isinstance(v, Const):
            return
        if isinstance(v, Param):
            self.need(id(v) in params, f"use of a parameter {v.name!r} of another function")
            return
        site = defined_in.get(id(v))
        self.need(site is not None, f"use of a value not defined in this function: {v!r}")
        if not dom.reachable(b):
            return                       # uses in dead code are not constrained
        dblock, dk = site
        if dblock is b:
            self.need(dk < k, f"use of {v!r} before its definition")
        else:
            self.need(dom.dominates(dblock, b), f"use of {v!r} not dominated by its definition")


def _width(t):
    if isinstance(t, PtrType):
        return 64
    if isinstance(t, ScalarType):
        return t.bits
    return None


def verify(fn: Function) -> None:
    """Raise IRError if `fn` breaks an IR invariant; return None otherwise."""
    _Checker(fn).run()


__all__ = ["IRError", "verify", "TERMINATORS"]
