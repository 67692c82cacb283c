"""`lower_kernel`: a kernel's Python function -> `ir.Function` (the frontend's one entry point).

The walk (`lowering.Lowerer`) runs once for most kernels.  When it had to guess a variable's
type (a loop-carried accumulator `s = 0.0` read before `s += x[i]` promotes it), it runs again
with the types it observed, until the guesses hold: every local then has one type, the NumPy-2
promotion of all values assigned to it.
"""
from __future__ import annotations

from .. import types as T
from ..errors import CompileError, PyptxError
from ..ir.core import Function, Param
from . import (constmem, intrinsics, mathfns, mathfns_numba, parity,  # noqa: F401 - fill the
               power, specialize, tensorcore, vector, wgmma)             # intrinsic registry
from .calls import ReturnSite  # noqa: F401
from .lowering import Lowerer, Scope
from .memory import array_param
from .tma import TensorMapRef
from .signature import ArgSpec
from .source import get_source

MAX_WALKS = 6
#: a Python error inside the frontend that no diagnostic anticipated (chained as __cause__)
_UNEXPECTED = ("pyptx cannot compile this expression (a value is out of range or of an "
               "unexpected kind); split it into simpler steps or convert explicitly, e.g. "
               "i64(x) or f64(x)")


def lower_kernel(py_func, param_types: dict, constexprs: dict, *, name=None,
                 fastmath: bool = False) -> Function:
    """Lower `py_func` with parameter types `{name: ScalarType | ArrayType | constexpr}` and
    constexpr values `{name: value}`.  Raises only CompileError for bad user code.
    `fastmath`: approximate f32 math in the kernel's own code (frontend/fastmath.py)."""
    src = get_source(py_func)
    declared: dict = {}
    for _ in range(MAX_WALKS):
        cx = _walk(py_func, src, param_types, constexprs, name, declared, fastmath)
        final = {k: acc.final() for k, acc in cx.observed.items()}
        if _consistent(cx, final):
            break
        declared = final
    _guarded(cx, cx.b.finish)      # SSA clean-up only for the walk whose IR is kept
    return _finish(cx, src, param_types)


def _consistent(cx, final: dict) -> bool:
    for key, t, weak in cx.assumed:
        if key in final and final[key] != (t, weak):
            return False
    for key in cx.const_writes:
        if key in final and not final[key][1] and key not in cx.declared:
            return False
    return True


def _walk(py_func, src, param_types, constexprs, name, declared, fastmath=False) -> Lowerer:
    fn = Function(name or py_func.__name__)
    cx = Lowerer(fn, declared)
    cx.fastmath = fastmath
    scope = Scope(src, py_func, "k:")
    cx.scope = scope
    b = cx.b
    entry = b.new_block("entry")
    b.seal(entry)
    exit_block = b.new_block("exit")
    scope.ret = exit_block
    b.block = entry
    cx.set_loc(src.fn_node)
    try:
        shapes: set = set()
        for pname in src.params:
            t = param_types.get(pname)
            if t is T.constexpr:
                if pname not in constexprs:
                    raise src.error(src.fn_node, f"constexpr parameter '{pname}' has no value; "
                                                 f"pass it with kernel.specialize({pname}=...)")
                cx.assign_name(pname, constexprs[pname])
            elif isinstance(t, T.ArrayType):
                view = scope.objvars[pname] = array_param(pname, t, fn.params)
                shapes |= {s.name for s in view.shape}      # >= 0: passes/ranges.py uses it
            elif t is T.tensormap:
                p = Param(pname, T.PtrType("param", T.u8), len(fn.params))
                fn.params.append(p)
                scope.objvars[pname] = TensorMapRef(pname, p)
            elif t is T.c64:
                raise src.error(src.fn_node, f"parameter '{pname}': complex scalars cannot be "
                                             f"kernel parameters; pass the real and imaginary "
                                             f"parts as two f32 and build pyptx.c64(re, im)")
            elif isinstance(t, T.ScalarType):
                p = Param(pname, t, len(fn.params))
                fn.params.append(p)
                cx.assign_name(pname, p)
            else:
                raise src.error(src.fn_node, f"parameter '{pname}' has no pyptx type; annotate "
                                             f"it, e.g. {pname}: f32[:] or {pname}: i32")
        fn.attrs["nonneg_params"] = frozenset(shapes)
        body = src.fn_node.body
        cx.body(body)
        if b.block is not None:
            b.br(exit_block)
        b.seal(exit_block)
        b.block = exit_block
        cx.loc_frozen = False
        b.ret()
        fn.blocks.remove(exit_block)
        fn.blocks.append(exit_block)
    except PyptxError:
        raise
    except RecursionError:
        raise cx.err("the kernel is too deeply nested to compile; split it into device "
                     "functions") from None
    except (OverflowError, ValueError, TypeError, ZeroDivisionError) as e:
        raise cx.err(_UNEXPECTED) from e
    return cx


def _guarded(cx, step) -> None:
    """Run `step` with the same error conversion as the walk itself."""
    try:
        step()
    except PyptxError:
        raise
    except RecursionError:
        raise cx.err("the kernel is too deeply nested to compile; split it into device "
                     "functions") from None
    except (OverflowError, ValueError, TypeError, ZeroDivisionError) as e:
        raise cx.err(_UNEXPECTED) from e


def _finish(cx, src, param_types) -> Function:
    fn = cx.fn
    lines = {}
    for ins in fn.instructions():
        if ins.loc is not None and ins.loc[0] not in lines:
            text = src.text_of(ins.loc[0])
            if text is not None:
                lines[ins.loc[0]] = text.rstrip("\n")
    signature = []
    for pname in src.params:
        t = param_types.get(pname)
        if isinstance(t, T.ArrayType):
            signature.append(ArgSpec(pname, "array", t.dtype, t.ndim, pname in cx.written,
                                     t.layout != "C"))
        elif isinstance(t, T.ScalarType):
            signature.append(ArgSpec(pname, "scalar", t, 0, False))
        elif t is T.tensormap:
            signature.append(ArgSpec(pname, "tensormap", T.u8, 0, pname in cx.written))
    fn.attrs.update(source_file=src.filename, first_line=src.first_line, source_lines=lines,
                    written_params=set(cx.written), uses_printf=cx.uses_printf,
                    signature=signature)
    return fn


__all__ = ["lower_kernel", "CompileError"]
