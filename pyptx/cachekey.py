"""What a compiled kernel depends on, as the disk cache's key.

A cache may only answer when the kernel it returns is the one compiling now would produce, so the
key holds everything the frontend reads from outside the kernel's parameters: the function itself
(its source text, file and first line: line comments and MemoryFault lines point there), its
closure cells, the module globals its code names, and, recursively, the same for every
`@pyptx.func` it can reach (through a global, a closure cell or a module attribute) with that
function's annotations and defaults.  Values are keyed by type and exact value (numpy scalars by
dtype and bytes, so `np.float32(1.5)` differs from `1.5` and `-0.0` from `0.0`; numpy arrays,
which `pyptx.const_array` compiles in, by dtype, shape and a hash of their bytes), tuples element
by element.  pyptx's own objects and functions are keyed by name: the compiler hash (the sources
of pyptx) covers what they do.  Objects a kernel cannot use at all are keyed by their type only:
compiling with them fails, and failures are never cached.

`dependencies(py_func)` is the key as a hashable tuple (functions held by identity; the names
each code object reads are computed once); `render(deps)` turns it into the text the disk key
hashes, with each function replaced by its file, first line and source.

A `Kernel`'s own in-memory cache is keyed by types, constexprs, arch and options only: as in
Numba, the module constants a kernel reads are frozen at its compile, so rebinding one later
does not change that Kernel object's compiled code.  A new Kernel (a re-imported module, another
closure, `pyptx.kernel(f)` again) starts with an empty cache and goes through the disk key.
"""
from __future__ import annotations

import ast
import hashlib
import types as pytypes

import numpy as np

from . import types as T
from .functions import DeviceFunction, KernelBase as Kernel

_NAMES: dict = {}                 # id(code) -> (code, global names, attribute names)
_MISSING = object()
_MAX_DEPTH = 8                    # tuples / modules nested deeper are keyed by type only


def _names(py_func) -> tuple:
    """(global names, attribute names) the function's source mentions, computed once per code
    object.  From the AST rather than the bytecode: a local's annotation (`v: T = ...`) is read
    by the frontend but never compiled by Python."""
    code = py_func.__code__
    got = _NAMES.get(id(code))
    if got is None or got[0] is not code:
        from .errors import CompileError
        from .frontend.source import get_source
        try:
            src = get_source(py_func)
        except CompileError:                 # no source: the compile fails, the key is moot
            got = (code, code.co_names, code.co_names)
        else:
            glob, attrs = set(), set()
            for node in ast.walk(src.fn_node):
                if isinstance(node, ast.Name) and node.id not in src.local_names:
                    glob.add(node.id)
                elif isinstance(node, ast.Attribute):
                    attrs.add(node.attr)
            got = (code, tuple(sorted(glob)), tuple(sorted(attrs)))
        _NAMES[id(code)] = got
    return got[1], got[2]


def _is_pyptx(module_name) -> bool:
    return isinstance(module_name, str) and (module_name == "pyptx"
                                             or module_name.startswith("pyptx."))


def dependencies(py_func) -> tuple:
    """Everything outside its parameters that compiling `py_func` reads, as a hashable tuple."""
    return _function_key(py_func, {}, 0)


def _function_key(py_func, seen: dict, depth: int) -> tuple:
    if py_func in seen:
        return ("recursive", py_func)
    seen[py_func] = True
    code = py_func.__code__
    glob, attrs = _names(py_func)
    parts: list = [py_func]
    cells = py_func.__closure__
    if cells:
        for n, cell in zip(code.co_freevars, cells):
            try:
                v = cell.cell_contents
            except ValueError:                          # an unassigned cell
                v = _MISSING
            parts.append(("cell", n, _value_key(v, attrs, seen, depth)))
    g = py_func.__globals__
    free = code.co_freevars
    for n in glob:
        if n in free:
            continue
        v = g.get(n, _MISSING)
        if v is not _MISSING:
            parts.append((n, _value_key(v, attrs, seen, depth)))
    return tuple(parts)


def _value_key(v, attrs: tuple, seen: dict, depth: int):
    t = type(v)
    if t in (bool, int, float, complex, str) or v is None:
        return (t.__name__, repr(v))
    if v is _MISSING:
        return ("unassigned",)
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.tobytes())
    if isinstance(v, np.ndarray):            # a pyptx.const_array table: its data is compiled in
        return ("ndarray", v.dtype.str, v.shape,
                hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
    if depth >= _MAX_DEPTH:
        return ("object", t.__module__, t.__qualname__)
    if isinstance(v, tuple):
        return ("tuple",) + tuple(_value_key(x, attrs, seen, depth + 1) for x in v)
    if isinstance(v, DeviceFunction):
        f = v.py_func
        if _is_pyptx(getattr(f, "__module__", None)):
            return ("pyptx func", f.__module__, f.__qualname__)
        ann = getattr(f, "__annotations__", None) or {}
        return ("func", v.inline,
                tuple((k, _value_key(a, attrs, seen, depth + 1)) for k, a in ann.items()),
                tuple(_value_key(d, attrs, seen, depth + 1) for d in (f.__defaults__ or ())),
                _function_key(f, seen, depth + 1))
    if isinstance(v, pytypes.ModuleType):
        if _is_pyptx(v.__name__) or (v, attrs) in seen:
            return ("module", v.__name__)
        seen[(v, attrs)] = True
        found = []
        for a in attrs:
            w = getattr(v, a, _MISSING)
            if w is not _MISSING:
                found.append((a, _value_key(w, attrs, seen, depth + 1)))
        return ("module", v.__name__, tuple(found))
    if isinstance(v, Kernel):              # a @cuda.jit kernel may be called (inlined)
        f = v.py_func
        ann = getattr(f, "__annotations__", None) or {}
        return ("kernel", v.name, v.callable_from_kernels,
                tuple((k, _value_key(a, attrs, seen, depth + 1)) for k, a in ann.items()),
                _function_key(f, seen, depth + 1))
    if isinstance(v, (T.ScalarType, T.ArrayType)) or v is T.constexpr or v is T.tensormap or \
            _is_pyptx(t.__module__):
        return ("pyptx", t.__qualname__, repr(v))
    if isinstance(v, (type, pytypes.FunctionType, pytypes.BuiltinFunctionType)):
        return ("callable", getattr(v, "__module__", None), getattr(v, "__qualname__", None))
    return ("object", t.__module__, t.__qualname__)


def render(deps) -> str | None:
    """The text the disk key hashes: functions as file, first line and source text; None when a
    function's source cannot be read (such a kernel does not compile, nothing to cache)."""
    from .errors import CompileError
    from .frontend.source import get_source
    out: list = []

    def walk(x):
        if isinstance(x, tuple):
            out.append("(")
            for y in x:
                walk(y)
                out.append(",")
            out.append(")")
        elif isinstance(x, pytypes.FunctionType):
            src = get_source(x)
            out.append(f"<def {src.filename}:{src.first_line}\n{''.join(src.lines)}>")
        elif isinstance(x, bytes):
            out.append(x.hex())
        else:
            out.append(repr(x))
    try:
        walk(deps)
    except CompileError:
        return None
    return "".join(out)
