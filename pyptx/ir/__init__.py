"""The pyptx IR (typed SSA, CFG of blocks with block arguments) and its tools."""
from .core import Block, BlockArg, Const, Function, Instr, MemDecl, Param, Value  # noqa: F401
from .ops import OPS  # noqa: F401
from .printer import print_function  # noqa: F401
from .verifier import IRError, verify  # noqa: F401


def parse_function(text: str) -> Function:
    """Text (as `print_function` writes it) -> Function.  lark is imported on first use."""
    from .parser import parse_function as _parse
    return _parse(text)


parse = parse_function
