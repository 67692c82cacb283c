"""The pyptx IR (typed SSA, CFG of blocks with block arguments) and its tools."""
from .core import Block, BlockArg, Const, Function, Instr, MemDecl, Param, Value  # noqa: F401
from .ops import OPS  # noqa: F401
