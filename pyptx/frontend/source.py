"""Reading a DSL function's source once: AST, file, line numbers, and a few syntactic facts.

Parsing is the slow part of a compile, so the result is cached per code object: recompiling a
kernel with new constexprs, or inlining the same device function a hundred times, parses once.
The cache is keyed by the code object's *identity*: code objects compare equal when their
bodies are identical, whatever file they come from and whatever their annotations say.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..errors import CompileError


class Source:
    """One parsed function: its `ast.FunctionDef` plus what diagnostics need."""
    __slots__ = ("filename", "first_line", "lines", "indent", "fn_node", "local_names",
                 "_assigned", "_jumps", "params")

    def __init__(self, py_func):
        try:
            lines, first = inspect.getsourcelines(py_func)
            filename = inspect.getsourcefile(py_func) or py_func.__code__.co_filename
        except (OSError, TypeError):
            raise CompileError(f"cannot read the source of '{py_func.__name__}' (defined in an "
                               f"interactive session or with exec?); define it in a .py file",
                               py_func.__code__.co_filename, py_func.__code__.co_firstlineno, 1)
        text = "".join(lines)
        first_text = lines[0] if lines else ""
        self.indent = len(first_text) - len(first_text.lstrip())
        self.filename = filename
        self.first_line = first
        self.lines = lines
        try:
            tree = ast.parse(textwrap.dedent(text))
        except SyntaxError as e:
            raise CompileError(f"cannot parse the function ({e.msg}); fix its syntax", filename,
                               first + (e.lineno or 1) - 1, e.offset) from None
        fn = tree.body[0] if tree.body else None
        if isinstance(fn, ast.AsyncFunctionDef):
            raise CompileError(f"'{py_func.__name__}' is an async def; kernels and device "
                               f"functions are plain functions: write def {py_func.__name__}(...)",
                               filename, first + fn.lineno - 1, self.indent + fn.col_offset + 1,
                               lines[fn.lineno - 1] if fn.lineno <= len(lines) else None)
        if not isinstance(fn, ast.FunctionDef):
            raise CompileError(f"'{py_func.__name__}' is not a plain def function; write it with "
                               f"def", filename, first, 1)
        self.fn_node = fn
        self.params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        self.local_names = set(self.params) | assigned_names(fn.body)
        self._assigned: dict[int, frozenset] = {}
        self._jumps: dict[int, bool] = {}

    # ---- locations -----------------------------------------------------------------------------
    def line_of(self, node) -> int:
        return self.first_line + getattr(node, "lineno", 1) - 1

    def col_of(self, node) -> int:
        return getattr(node, "col_offset", 0) + self.indent + 1

    def text_of(self, lineno: int) -> str | None:
        k = lineno - self.first_line
        return self.lines[k] if 0 <= k < len(self.lines) else None

    def error(self, node, message: str) -> CompileError:
        line = self.line_of(node)
        return CompileError(message, self.filename, line, self.col_of(node), self.text_of(line))

    # ---- syntactic facts (cached per loop node) -----------------------------------------------
    def assigned_in(self, loop) -> frozenset:
        """Names a loop's body (and target) may assign: they get loop-header arguments."""
        got = self._assigned.get(id(loop))
        if got is None:
            names = assigned_names(loop.body)
            if isinstance(loop, ast.For):
                names |= assigned_names([ast.Assign(targets=[loop.target], value=None)])
            got = self._assigned[id(loop)] = frozenset(names)
        return got

    def has_jumps(self, loop) -> bool:
        """Whether a loop body contains break/continue for this loop (not a nested one)."""
        got = self._jumps.get(id(loop))
        if got is None:
            got = self._jumps[id(loop)] = _has_jumps(loop.body)
        return got


def assigned_names(stmts) -> set:
    out: set = set()
    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
            elif isinstance(node, ast.Assign) and node.value is None:
                for t in node.targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            out.add(sub.id)
    return out


def _has_jumps(stmts) -> bool:
    for st in stmts:
        if isinstance(st, (ast.Break, ast.Continue)):
            return True
        if isinstance(st, (ast.For, ast.While)):
            if st.orelse and _has_jumps(st.orelse):
                return True
            continue
        for field in ("body", "orelse", "handlers", "finalbody"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt) and _has_jumps(sub):
                return True
    return False


_CACHE: dict = {}                 # id(code) -> (code, Source); the code held so its id stays unique


def get_source(py_func) -> Source:
    """The cached `Source` of a function (keyed by its code object's identity)."""
    code = py_func.__code__
    got = _CACHE.get(id(code))
    if got is None or got[0] is not code:
        got = _CACHE[id(code)] = (code, Source(py_func))
    return got[1]
