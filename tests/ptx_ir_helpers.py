"""Build IR functions by hand for the PTX backend tests (no frontend needed).

    b = FnBuilder("k")
    x = b.ptr("x", f32); n = b.param("n", i32)
    i = b.op("sreg", [], i32, name="tid.x")
    ...
    b.ret(); fn = b.fn
"""
from __future__ import annotations

from pyptx.ir.core import Block, Const, Function, Instr, MemDecl, Param
from pyptx.types import PtrType


class FnBuilder:
    def __init__(self, name: str = "k"):
        self.fn = Function(name)
        self.cur = self.block("entry")
        self.line = None

    # ---- structure --------------------------------------------------------------------------
    def param(self, name: str, t) -> Param:
        p = Param(name, t, len(self.fn.params))
        self.fn.params.append(p)
        return p

    def ptr(self, name: str, elem, space: str = "global") -> Param:
        return self.param(name, PtrType(space, elem))

    def block(self, name: str, *arg_types) -> Block:
        blk = Block(name)
        for t in arg_types:
            blk.add_arg(t)
        self.fn.blocks.append(blk)
        return blk

    def at(self, blk: Block) -> Block:
        self.cur = blk
        return blk

    def shared(self, name: str, elem, count: int, align: int = 16) -> MemDecl:
        d = MemDecl(name, elem, count, align)
        self.fn.shared.append(d)
        return d

    def local(self, name: str, elem, count: int, align: int = 16) -> MemDecl:
        d = MemDecl(name, elem, count, align)
        self.fn.locals.append(d)
        return d

    # ---- instructions -------------------------------------------------------------------------
    def op(self, op: str, operands, t=None, **attrs) -> Instr:
        ins = Instr(op, list(operands), t, attrs, loc=(self.line, 1) if self.line else None)
        return self.cur.append(ins)

    @staticmethod
    def c(t, value) -> Const:
        return Const(t, value)

    def gep(self, p, i):
        return self.op("gep", [p, i], p.type)

    def load(self, p, **attrs):
        return self.op("load", [p], p.type.elem, **attrs)

    def store(self, p, v, **attrs):
        return self.op("store", [p, v], None, **attrs)

    def addr(self, decl: MemDecl, space: str):
        return self.op("addr", [], PtrType(space, decl.elem), space=space, symbol=decl.name)

    def sreg(self, name: str):
        from pyptx.types import i32
        return self.op("sreg", [], i32, name=name)

    def br(self, target: Block, *args):
        return self.op_term("br", [], [(target, list(args))])

    def cbr(self, c, t: Block, targs, f: Block, fargs):
        return self.op_term("cbr", [c], [(t, list(targs)), (f, list(fargs))])

    def ret(self):
        return self.op_term("ret", [], [])

    def op_term(self, op, operands, succs):
        ins = Instr(op, operands, None, {}, loc=(self.line, 1) if self.line else None,
                    succs=succs)
        return self.cur.append(ins)


def elementwise(name: str, elem, body):
    """A kernel `out[i] = body(b, x[i], y[i])` for i = tid.x: the common test shape.

    `body(b, xv, yv)` returns the value to store (its type is the element type of `out`)."""
    from pyptx.types import i32
    b = FnBuilder(name)
    out_t = None
    x = b.ptr("x", elem)
    y = b.ptr("y", elem)
    i = b.sreg("tid.x")
    xv = b.load(b.gep(x, i))
    yv = b.load(b.gep(y, i))
    res = body(b, xv, yv)
    out_t = res.type
    out = b.ptr("out", out_t)
    b.store(b.gep(out, i), res)
    b.ret()
    assert i.type == i32
    return b.fn
