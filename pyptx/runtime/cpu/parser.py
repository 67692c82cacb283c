"""PTX text -> plain records (Module / Entry / Instr), via the lark LALR grammar in ptx.lark.

The parser only knows syntax; meaning comes from `decode.py`.  lark is imported on the first
parse (not at `import pyptx`), and the Lark object is built once per process.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import LaunchError

TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
              "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "b64": 8, "u64": 8, "s64": 8,
              "f64": 8, "b128": 16, "pred": 1}

_LINE_COMMENT = re.compile(r"//\s*line\s+(\d+)")
_TRAP_NOTE = re.compile(r"\btrap\s*;\s*//\s*(.*\S)")     # `@p trap; // why` (lower_sync.py)


@dataclass
class Instr:
    opcode: str                 # 'ld.global.v4.f32'
    operands: list              # tuples, see _operand
    guard: tuple | None         # (reg_name, negated)
    line: int                   # 1-based PTX line
    py_line: int | None = None  # Python source line from the preceding `// line N` comment
    note: str | None = None     # `trap`: the comment after it on its line (what was checked)


@dataclass
class Var:
    space: str                  # 'shared', 'local', 'global', 'const'
    name: str
    align: int
    type: str
    nbytes: int | None          # None: unsized (`.extern .shared ... name[]`)
    init: bytes | None = None
    extern: bool = False


@dataclass
class Entry:
    name: str
    params: list                # [(name, ptx type)]
    regs: dict                  # register name -> ptx type (local `.param`s of call blocks too)
    vars: list                  # [Var]
    body: list                  # Instr, or str for a label
    line: int


@dataclass
class Module:
    entries: dict = field(default_factory=dict)
    globals: list = field(default_factory=list)     # module-level Var
    funcs: set = field(default_factory=set)         # declared .func names (vprintf)


_LARK = None


def _lark():
    global _LARK
    if _LARK is None:
        import lark  # lazy: only a CPU launch needs it
        grammar = (Path(__file__).with_name("ptx.lark")).read_text()
        _LARK = lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                          maybe_placeholders=True)
    return _LARK


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    neg = t.startswith("-")
    t = t.lstrip("-")
    if t[:2] in ("0x", "0X"):
        v = int(t[2:], 16)
    elif t[:2] in ("0b", "0B"):
        v = int(t[2:], 2)
    elif len(t) > 1 and t.startswith("0"):
        v = int(t, 8)
    else:
        v = int(t)
    return -v if neg else v


def _imm(tree):
    """An immediate: ('int', value) or ('f32', bits) / ('f64', bits) / ('dec', float)."""
    tok = tree.children[0]
    if tok.type == "FHEX":
        return ("f32", int(tok[2:], 16))
    if tok.type == "DHEX":
        return ("f64", int(tok[2:], 16))
    if tok.type == "DECIMAL":
        return ("dec", float(tok))
    return ("int", parse_int(tok))


def _operand(tree):
    kind = tree.data
    ch = tree.children
    if kind == "reg":
        return ("reg", str(ch[0]))
    if kind == "reg_pair":
        return ("regpair", str(ch[0]), str(ch[1]))
    if kind == "not_reg":
        return ("notreg", str(ch[1]))
    if kind == "imm":
        return ("imm", _imm(tree))
    if kind == "sym":
        return ("sym", str(ch[0]))
    if kind == "mem":
        a = ch[0]
        if a.data == "abs_addr":
            return ("mem", None, parse_int(a.children[0]))
        base = str(a.children[0])
        off = 0
        if a.children[1] is not None:
            o = a.children[1]
            off = parse_int(o.children[0]) * (-1 if o.data == "neg_offset" else 1)
        return ("mem", base, off)
    if kind == "vec":
        return ("vec", [None if getattr(c, "type", None) == "SINK" else str(c.children[0])
                        for c in ch])
    if kind == "tensor_mem":
        return ("tensor_mem", str(ch[0]), _operand(ch[1])[1])
    if kind == "plist":
        return ("plist", [_operand(c) for c in ch if c is not None])
    raise LaunchError(f"unsupported PTX operand {kind}")


def _init_bytes(typ: str, init_tree) -> bytes:
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[TYPE_BYTES[typ]]
    out = bytearray()
    for c in init_tree.children:
        kind, v = _imm(c)
        if kind == "dec":
            v = struct.unpack("<Q" if fmt == "Q" else "<I",
                              struct.pack("<d" if fmt == "Q" else "<f", v))[0]
        out += struct.pack("<" + fmt, v & ((1 << (8 * TYPE_BYTES[typ])) - 1))
    return bytes(out)


def _var(tree, extern=False) -> Var:
    space_tok, align, typ, name, dims, init = tree.children
    typ = str(typ)[1:]
    count = 1
    unsized = False
    if dims is not None:
        for d in dims.children:
            if d is None:
                unsized = True
            else:
                count *= parse_int(d)
    nbytes = None if unsized else count * TYPE_BYTES[typ]
    data = _init_bytes(typ, init) if init is not None else None
    return Var(str(space_tok)[1:], str(name), parse_int(align.children[0]) if align else
               TYPE_BYTES[typ], typ, nbytes, data, extern)


def _linkage_is_extern(node) -> bool:
    return node is not None and str(node.children[0]) == ".extern"


def _entry(tree, py_lines, notes) -> Entry:
    _, name, plist = tree.children[:3]
    params = []
    for p in plist.children:
        if p is None:
            continue
        typ = [c for c in p.children if getattr(c, "type", None) == "TYPE"][0]
        ident = [c for c in p.children if getattr(c, "type", None) == "IDENT"][0]
        dims = [c for c in p.children if getattr(c, "data", None) == "dims"]
        if dims:      # a by-value byte array (a tensor map): 'b8[128]'
            count = 1
            for d in dims[0].children:
                count *= parse_int(d) if d is not None else 0
            params.append((str(ident), f"{str(typ)[1:]}[{count}]"))
            continue
        params.append((str(ident), str(typ)[1:]))
    entry = Entry(str(name), params, {}, [], [], tree.meta.line)
    _body(entry, tree.children[3:], py_lines, notes)
    return entry


def _body(entry: Entry, items, py_lines, notes):
    for it in items:
        if it is None or not hasattr(it, "data"):
            continue
        kind = it.data
        if kind == "perf" or kind == "pragma":
            continue
        if kind == "block":
            _body(entry, it.children, py_lines, notes)
        elif kind == "reg_decl":
            typ = str(it.children[0])[1:]
            for ri in it.children[1:]:
                base, count = str(ri.children[0]), ri.children[1]
                if count is None:
                    entry.regs[base] = typ
                else:
                    for k in range(parse_int(count)):
                        entry.regs[f"{base}{k}"] = typ
        elif kind == "body_var":
            entry.vars.append(_var(it.children[1], _linkage_is_extern(it.children[0])))
        elif kind == "body_param":
            _, typ, ident, _dims = it.children
            entry.regs[str(ident)] = "b64" if str(typ)[1:] in ("b64", "u64", "s64", "f64") \
                else str(typ)[1:]
        elif kind == "label":
            entry.body.append(str(it.children[0])[:-1])
        elif kind == "instr":
            guard, op, *ops = it.children
            g = None
            if guard is not None:
                neg = len(guard.children) == 2 and guard.children[0] is not None
                g = (str(guard.children[-1]), neg)
            line = it.meta.line
            entry.body.append(Instr(str(op), [_operand(o) for o in ops if o is not None], g,
                                    line, _py_line(py_lines, line), notes.get(line)))


def _py_line(py_lines, line):
    import bisect
    k = bisect.bisect_left(py_lines, (line, -1))
    return py_lines[k - 1][1] if k else None


def parse(text: str) -> Module:
    """Parse PTX text; a syntax error is a LaunchError quoting the PTX line."""
    import lark
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        lines = text.splitlines()
        ln = getattr(e, "line", 0) or 0
        src = lines[ln - 1].strip() if 0 < ln <= len(lines) else ""
        raise LaunchError(f"cannot parse PTX at line {ln}: {src!r}") from None
    lines = text.splitlines()
    py_lines = [(i + 1, int(m.group(1))) for i, l in enumerate(lines)
                if (m := _LINE_COMMENT.search(l))]
    notes = {i + 1: m.group(1) for i, l in enumerate(lines)
             if "trap" in l and (m := _TRAP_NOTE.search(l))}
    mod = Module()
    for node in tree.children:
        kind = node.data
        if kind == "module_var":
            mod.globals.append(_var(node.children[1], _linkage_is_extern(node.children[0])))
        elif kind == "func_decl":
            mod.funcs.add(str([c for c in node.children if getattr(c, "type", None) == "IDENT"][0]))
        elif kind == "entry":
            e = _entry(node, py_lines, notes)
            mod.entries[e.name] = e
    return mod
