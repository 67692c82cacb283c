"""Text -> IR: the inverse of `printer.print_function`, with a lark LALR grammar (ir.lark).

Why: tests and debugging write IR by hand, and `CompiledKernel.ir` must be readable back.  lark is
imported lazily and the parser is built once (importing pyptx must not import lark).  Forward
references (a branch to a later block, a loop-carried value used before its definition in the
text) are resolved after the whole tree is read.
"""
from __future__ import annotations

import json
import re
from importlib import resources

import numpy as np

from .. import types as T
from .core import Block, Const, Function, Instr, MemDecl, Param
from .verifier import IRError

_PARSER = None
_HINTED = re.compile(r"^%([A-Za-z0-9_]+)\.(\d+)$")


def _lark_parser():
    global _PARSER
    if _PARSER is None:
        import lark
        grammar = resources.files(__package__).joinpath("ir.lark").read_text()
        _PARSER = lark.Lark(grammar, parser="lalr", lexer="contextual",
                            propagate_positions=False, maybe_placeholders=True)
    return _PARSER


def parse_type(text: str):
    if text.startswith("ptr."):
        space, elem = text[4:-1].split("<")
        return T.PtrType(space, T.scalar(elem))
    return T.vec_type(text) or T.scalar(text)


def literal_value(tok, t):
    """A literal token (NUMBER/true/false tree) as the Python value a Const of type t holds."""
    if isinstance(t, T.ScalarType) and t.is_bool:
        if tok in (True, False):
            return tok
        return bool(_number(tok))
    if isinstance(t, T.ScalarType) and t.is_float:
        if isinstance(tok, str) and tok.lstrip("+-").startswith("0x"):
            sign = -1 if tok.startswith("-") else 1
            bits = int(tok.lstrip("+-"), 16)
            v = (T.bf16_value(bits) if t is T.bf16 else
                 float(np.array(bits, dtype=f"u{t.dtype.itemsize}").view(t.dtype)))
            return -v if sign < 0 else v
        if t is T.bf16:
            return T.bf16_value(T.bf16_bits(float(tok)))
        return float(t.dtype.type(float(tok)))
    if tok in (True, False):
        return int(tok)
    return int(tok, 0) if tok.lstrip("+-")[:2] != "0x" else _hexint(tok)


def _hexint(tok: str) -> int:
    return -int(tok[1:], 16) if tok.startswith("-") else int(tok.lstrip("+"), 16)


def _number(tok: str):
    s = tok.lstrip("+-")
    if s.startswith("0x"):
        return _hexint(tok)
    if any(c in s for c in ".eEin"):
        return float(tok)
    return int(tok)


class _Builder:
    """Walks the lark tree and builds the Function, resolving names at the end."""

    def __init__(self):
        self.values: dict[str, object] = {}
        self.blocks: dict[str, Block] = {}
        self.pending: list = []          # (instr, operand index or ('succ', i, j), name)

    def block(self, label: str) -> Block:
        b = self.blocks.get(label)
        if b is None:
            b = self.blocks[label] = Block(label[1:])
        return b

    def define(self, name: str, value):
        if name in self.values:
            raise IRError(f"value {name} defined twice")
        self.values[name] = value

    def build(self, tree) -> Function:
        fn_tree = tree.children[0]
        sym, *rest = fn_tree.children
        fn = Function(name=str(sym)[1:])
        i = 0
        while i < len(rest) and (rest[i] is None or rest[i].data == "param"):
            if rest[i] is not None:
                vname, ty = rest[i].children
                p = Param(str(vname)[1:], parse_type(str(ty)), len(fn.params))
                fn.params.append(p)
                self.define(str(vname), p)
            i += 1
        seen_blocks = []
        for node in rest[i:]:
            if node.data == "memdecl":
                kind, dsym, ty, count, align, data = node.children
                decl = MemDecl(str(dsym)[1:], T.scalar(str(ty)), int(count), int(align),
                               None if data is None else bytes.fromhex(str(data)[1:-1]))
                {"shared": fn.shared, "local": fn.locals, "const": fn.consts}[str(kind)].append(decl)
            elif node.data == "dynshared":
                fn.dynamic_shared = True
            elif node.data == "fnattrs":
                fn.attrs.update(self.attrs(node.children[0]))
            elif node.data == "block":
                seen_blocks.append(self.read_block(node))
        for b in seen_blocks:
            if b in fn.blocks:
                raise IRError(f"block ^{b.name} defined twice")
            fn.blocks.append(b)
        for label, b in self.blocks.items():
            if b not in fn.blocks:
                raise IRError(f"branch to unknown block {label}")
        for ins, slot, name in self.pending:
            v = self.values.get(name)
            if v is None:
                raise IRError(f"use of undefined value {name}")
            if isinstance(slot, int):
                ins.operands[slot] = v
            else:
                ins.succs[slot[0]][1][slot[1]] = v
        return fn

    def read_block(self, node) -> Block:
        label, *rest = node.children
        b = self.block(str(label))
        if getattr(b, "_parsed", False):
            raise IRError(f"block {label} defined twice")
        k = 0
        while k < len(rest) and (rest[k] is None or rest[k].data == "blockarg"):
            if rest[k] is not None:
                vname, ty = rest[k].children
                m = _HINTED.match(str(vname))
                arg = b.add_arg(parse_type(str(ty)), m.group(1) if m else "")
                self.define(str(vname), arg)
            k += 1
        for inode in rest[k:]:
            b.append(self.read_instr(inode))
        return b

    def read_instr(self, node) -> Instr:
        children = node.children
        result, opname = children[0], str(children[1])
        items, attrs, ty, loc = [], {}, None, None
        for ch in children[2:]:
            if ch is None:
                continue
            if hasattr(ch, "data"):
                if ch.data == "attrdict":
                    attrs = self.attrs(ch)
                elif ch.data == "loc":
                    loc = (int(ch.children[0]), int(ch.children[1]))
                else:
                    items.append(ch)
            else:
                ty = parse_type(str(ch))
        ins = Instr(opname, [], ty, attrs, loc)
        if (result is None) != (ty is None):
            raise IRError(f"'{opname}': a result needs a type and a type needs a result")
        for it in items:
            if it.data == "target":
                label, *args = it.children
                vals = []
                ins.succs.append((self.block(str(label)), vals))
                for a in args:
                    if a is not None:
                        vals.append(self.operand(a, ins, (len(ins.succs) - 1, len(vals))))
            else:
                ins.operands.append(self.operand(it, ins, len(ins.operands)))
        if result is not None:
            self.define(str(result), ins)
        return ins

    def operand(self, it, ins, slot):
        if it.data == "const":
            lit, ty = it.children
            t = parse_type(str(ty))
            return Const(t, literal_value(self.literal(lit), t))
        if it.data == "target":
            raise IRError("a block label is only allowed as a branch target")
        self.pending.append((ins, slot, str(it.children[0])))
        return None

    @staticmethod
    def literal(node):
        if node.data == "true":
            return True
        if node.data == "false":
            return False
        return str(node.children[0])

    def attrs(self, node) -> dict:
        out = {}
        for a in node.children:
            if a is None:
                continue
            key, val = a.children
            out[str(key)] = self.attr_value(val)
        return out

    def attr_value(self, node):
        if node.data == "string":
            return json.loads(str(node.children[0]))
        if node.data == "none":
            return None
        lit = self.literal(node)
        return lit if isinstance(lit, bool) else _number(lit)


def parse_function(text: str) -> Function:
    """Parse the text of one function.  Raises IRError on bad text (lark errors are wrapped)."""
    import lark
    try:
        tree = _lark_parser().parse(text)
    except lark.exceptions.LarkError as e:
        raise IRError(f"IR syntax error: {e}") from None
    return _Builder().build(tree)


__all__ = ["parse_function", "parse_type"]
