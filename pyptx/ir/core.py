"""The pyptx IR: typed SSA values in a CFG of basic blocks with block arguments.

Why block arguments: `break`, `continue` and early `return` inside loops are plain branches,
and a loop-carried variable is an argument of the loop header.  A branch passes one value per
argument of its target (`br ^head(%i1, %s1)`), so there are no phi nodes to keep in sync.

Shapes of the data (see the records in `ops/` for what each opcode means):

    Function  name, params [Param], blocks [Block] (blocks[0] is the entry, it has no args),
              shared [MemDecl], locals [MemDecl], consts [MemDecl with data],
              dynamic_shared (bool), attrs {}
    Block     name, args [BlockArg], instrs [Instr] (the last one is the terminator)
    Instr     op, operands [Value], type (result type or None), attrs {}, loc (line, col) | None,
              succs [(Block, [Value])] for terminators ('br', 'cbr'), else []
    Value     Param | BlockArg | Instr | Const; every value has `.type`

Types are `pyptx.types.ScalarType` or `pyptx.types.PtrType` (and `VecType`, the n lanes a
`vload` reads, which only `lane` takes apart).  Arrays do not exist in the IR:
the frontend turns an array parameter `x: f32[:, :]` into a pointer param `x` plus i32 params
`x.shape0`, `x.shape1`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..types import PtrType, ScalarType
from .ops import TERMINATORS  # noqa: F401  (the ops whose record has `succs`)

Type = "ScalarType | PtrType"


class Value:
    """Anything an instruction can use as an operand."""
    __slots__ = ()
    type: object


class Const(Value):
    """A literal operand.  `value` is a Python int/float/bool already wrapped to `type`
    (ints are stored in their signed or unsigned range per the type; f16/f32 values are the
    exact float the type can hold)."""
    __slots__ = ("type", "value")

    def __init__(self, type, value):
        self.type = type
        self.value = value

    def __eq__(self, other):
        return (isinstance(other, Const) and other.type == self.type
                and repr(other.value) == repr(self.value))

    def __hash__(self):
        return hash((self.type, repr(self.value)))

    def __repr__(self):
        return f"Const({self.type!r}, {self.value!r})"


class Param(Value):
    """A kernel parameter as PTX sees it (a pointer or a scalar)."""
    __slots__ = ("type", "name", "index")

    def __init__(self, name: str, type, index: int):
        self.name = name
        self.type = type
        self.index = index

    def __repr__(self):
        return f"Param({self.name!r}, {self.type!r})"


class BlockArg(Value):
    """An argument of a basic block: the SSA join point (what a phi is elsewhere)."""
    __slots__ = ("type", "block", "index", "hint")

    def __init__(self, type, block: "Block", index: int, hint: str = ""):
        self.type = type
        self.block = block
        self.index = index
        self.hint = hint          # source variable name, for readable IR text

    def __repr__(self):
        return f"BlockArg({self.block.name}#{self.index}: {self.type!r})"


class Instr(Value):
    """One operation.  If `type` is None it produces no value (stores, barriers, branches)."""
    __slots__ = ("op", "operands", "type", "attrs", "loc", "succs", "block")

    def __init__(self, op: str, operands: list, type=None, attrs: dict | None = None,
                 loc: tuple[int, int] | None = None, succs: list | None = None):
        self.op = op
        self.operands = operands
        self.type = type
        self.attrs = attrs if attrs is not None else {}
        self.loc = loc
        self.succs = succs if succs is not None else []
        self.block: Block | None = None

    @property
    def is_terminator(self) -> bool:
        return self.op in TERMINATORS

    def __repr__(self):
        return f"Instr({self.op}, {self.type!r}, {len(self.operands)} operands)"




class Block:
    """A basic block.  Ends in exactly one terminator once the function is complete."""
    __slots__ = ("name", "args", "instrs")

    def __init__(self, name: str):
        self.name = name
        self.args: list[BlockArg] = []
        self.instrs: list[Instr] = []

    def add_arg(self, type, hint: str = "") -> BlockArg:
        arg = BlockArg(type, self, len(self.args), hint)
        self.args.append(arg)
        return arg

    def append(self, instr: Instr) -> Instr:
        instr.block = self
        self.instrs.append(instr)
        return instr

    @property
    def terminator(self) -> Instr | None:
        if self.instrs and self.instrs[-1].op in TERMINATORS:
            return self.instrs[-1]
        return None

    @property
    def successors(self) -> list["Block"]:
        term = self.terminator
        return [b for b, _ in term.succs] if term is not None else []

    def __repr__(self):
        return f"Block({self.name})"


@dataclass
class MemDecl:
    """A static `.shared` or `.local` array: `count` elements of `elem`, aligned to `align`;
    or (in `Function.consts`) a read-only `.const` array whose `data` is its initial bytes."""
    name: str
    elem: ScalarType
    count: int
    align: int = 16
    data: bytes | None = None


@dataclass
class Function:
    """A kernel after inlining every device function: the unit the passes and backend see.

    attrs (free-form, all optional): 'source_file', 'source_lines' {line: text},
    'written_params' (set of param names the kernel may store to / atomically update),
    'fma' (bool), 'min_arch' (int, e.g. 80), 'uses_printf' (bool).
    """
    name: str
    params: list[Param] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    shared: list[MemDecl] = field(default_factory=list)
    locals: list[MemDecl] = field(default_factory=list)
    consts: list[MemDecl] = field(default_factory=list)
    dynamic_shared: bool = False
    attrs: dict = field(default_factory=dict)
    #: the optimiser's bookkeeping while passes run on it (passes/report.PassReport)
    report: object = field(default=None, repr=False, compare=False)

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    def instructions(self) -> Iterator[Instr]:
        for b in self.blocks:
            yield from b.instrs

    def predecessors(self) -> dict[Block, list[Block]]:
        preds: dict[Block, list[Block]] = {b: [] for b in self.blocks}
        for b in self.blocks:
            for s in b.successors:
                preds[s].append(b)
        return preds
