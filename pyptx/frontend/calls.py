"""Calls: dispatch on what is called, and inlining of `@pyptx.func` device functions.

A device function is inlined at every call: its body is lowered into the caller's builder in a
fresh scope; each `return` writes a hidden result variable and branches to a continuation block,
where SSA construction joins the results (their types promote like any variable's).
Parameters annotated with a scalar type convert their argument as `T(x)` would (Numba's rule:
f64 to f32 rounds, f32 to i32 truncates toward zero); unannotated parameters take the argument
as it is.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import types as pytypes


from .. import types as T
from ..functions import DeviceFunction, KernelBase as Kernel
from . import arith, memory, templates
from .source import get_source
from .describe import annotation_text
from .values import PY_SCALARS, ArrayView, is_const


def is_allowed_object(v) -> bool:
    return isinstance(v, (pytypes.ModuleType, DeviceFunction, T.ScalarType, T.ArrayType,
                          Intrinsic, SpecialRegister, Dim3, MemorySpace, Kernel,
                          pytypes.FunctionType, pytypes.BuiltinFunctionType, type,
                          memory.BoundView)) or v is T.constexpr


def lower_call(cx, node):
    callee = cx.expr(node.func)
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise cx.err("'*args' in calls is not supported; pass arguments one by one", a)
    for k in node.keywords:
        if k.arg is None:
            raise cx.err("'**kwargs' in calls is not supported; pass arguments by name", node)
    if isinstance(callee, Intrinsic) and callee.intrinsic == "static_range":
        raise cx.err("static_range() can only be used as 'for i in pyptx.static_range(N)'")
    if callee is builtins.range:
        raise cx.err("range() can only be used as 'for i in range(...)' (or in "
                     "'for k, i in enumerate(range(...))')")
    if isinstance(callee, Intrinsic) and callee.intrinsic == "range":
        raise cx.err("pyptx.range() can only be used as 'for i in pyptx.range(...)'")
    if callee is builtins.print:
        from .intrinsics import lower_print
        return lower_print(cx, node)
    args = [cx.expr(a) for a in node.args]
    kwargs = {k.arg: cx.expr(k.value) for k in node.keywords}
    cx.set_loc(node)
    if isinstance(callee, Intrinsic):
        return REGISTRY[callee.intrinsic](cx, args, kwargs)
    if callee is builtins.zip or callee is builtins.enumerate:
        from . import iterables
        return (iterables.builtin_zip if callee is builtins.zip
                else iterables.builtin_enumerate)(cx, args, kwargs)
    if callee is T.c64 or callee is builtins.complex:
        from .complex64 import make
        if kwargs or not 1 <= len(args) <= 2:
            raise cx.err("c64(re, im) / complex(re, im) take one or two numbers")
        return make(cx, *args)
    if isinstance(callee, BoundConjugate):
        return conjugate(cx, callee, args, kwargs)
    if isinstance(callee, T.ScalarType):
        return _cast(cx, callee, args, kwargs)
    if isinstance(callee, memory.BoundView):
        if len(args) != 1 or kwargs:
            raise cx.err("a.view(dtype) takes one argument, the new element type; write "
                         "a.view(f32)")
        return memory.reinterpret(cx, callee.array, memory.as_dtype(cx, args[0], "view()'s type"))
    if isinstance(callee, DeviceFunction):
        return inline(cx, callee, args, kwargs)
    if isinstance(callee, Kernel):
        if not callee.callable_from_kernels:
            raise cx.err(f"'{callee.name}' is a @pyptx.kernel and cannot be called from a "
                         f"kernel; make the shared code a @pyptx.func")
        return inline(cx, callee.as_device_function(), args, kwargs)
    if getattr(callee, "__module__", None) == "math" and \
            isinstance(callee, pytypes.BuiltinFunctionType):
        return _stdlib_math(cx, callee, args, kwargs, REGISTRY)
    key = BUILTINS.get(callee) if _hashable(callee) else None
    if key is not None:
        return REGISTRY[key](cx, args, kwargs)
    if callable(callee) and not isinstance(callee, type) and \
            str(getattr(callee, "__module__", "") or "").split(".")[0] == "numpy":
        raise cx.err(f"numpy.{getattr(callee, '__name__', '?')} cannot be called in a kernel "
                     f"(kernels have no array expressions); write the loop over elements, or "
                     f"use pyptx.math for scalar math")
    if callable(callee) and not isinstance(callee, type):
        name = getattr(callee, "__name__", "?")
        raise cx.err(f"'{name}' is a plain Python function and cannot be called in a kernel; "
                     f"decorate it with @pyptx.func (or use a pyptx intrinsic)")
    raise cx.err(f"cannot call {arith.describe(callee)} in a kernel; call a @pyptx.func, a "
                 f"pyptx intrinsic, a builtin such as min/max/abs or a type such as f32(x)")


def _stdlib_math(cx, fn, args, kwargs, registry):
    """`math.sqrt(x)` in a kernel means `pyptx.math.sqrt(x)` (Numba's reading of the stdlib
    module); the float result keeps the argument's type (`math.floor` gives a float, not int)."""
    name = fn.__name__
    lower = registry.get(f"math.{name}")
    if lower is None:
        raise cx.err(f"math.{name} is not available in kernels yet; pyptx.math has "
                     f"{', '.join(sorted(k[5:] for k in registry if k.startswith('math.') and not k.startswith('math.fast_')))}")
    return lower(cx, args, kwargs)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _cast(cx, t: T.ScalarType, args, kwargs):
    if len(args) != 1 or kwargs:
        raise cx.err(f"{t.name}(x) takes exactly one value to convert")
    v = args[0]
    if t.is_bool:
        return arith.truth(cx, v)
    arith.type_of(cx, v)
    return arith.convert(cx, v, t)


# ---- device functions -----------------------------------------------------------------------

class ReturnSite:
    """Where `return` goes inside one inlined call."""
    __slots__ = ("block", "var", "shape", "objects")

    def __init__(self, block, var):
        self.block = block
        self.var = var
        self.shape = None          # 'none' | 'scalar' | ('tuple', n) | 'object'
        self.objects: list = []


_SIGS: dict = {}


def _signature(df: DeviceFunction):
    got = _SIGS.get(df.py_func)
    if got is None:
        sig = inspect.signature(df.py_func)
        for p in sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                got = (sig, None, f"parameter '{p.name}' of {df.name} must be a plain "
                                  f"positional parameter (no *args, **kwargs, keyword-only); "
                                  f"write def {df.name}(a, b, ...)")
                break
        else:
            anns = {}
            for name, a in (getattr(df.py_func, "__annotations__", None) or {}).items():
                if isinstance(a, str):
                    try:
                        a = eval(a, dict(df.py_func.__globals__))  # noqa: S307 - user's own
                    except Exception:  # noqa: BLE001
                        a = None
                anns[name] = T.bool_ if a is bool else a
            got = (sig, anns, None)
        _SIGS[df.py_func] = got
    return got


def inline(cx, df: DeviceFunction, args, kwargs):
    if any(f is df.py_func for f in cx.inline_stack):
        chain = " -> ".join(f.__name__ for f in cx.inline_stack) + f" -> {df.name}"
        raise cx.err(f"recursion is not supported in kernels ({chain}); rewrite it as a loop")
    sig, anns, problem = _signature(df)
    if problem:
        raise cx.err(problem)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        raise cx.err(_bad_call(df, sig, args, kwargs)) from None
    bound.apply_defaults()
    converted = {n: _check_arg(cx, df, n, v, anns.get(n)) for n, v in bound.arguments.items()}
    got = templates.instantiate(cx, df, converted)
    if got is not templates.MISS:
        return got
    src = get_source(df.py_func)
    scope, site = callee_scope(cx, df, src)
    caller, was_frozen, saved_node = cx.scope, cx.loc_frozen, cx.node
    cx.scope, cx.loc_frozen = scope, True
    cx.inline_stack.append(df.py_func)
    try:
        result = lower_body(cx, df, src, site, converted)
    finally:
        cx.inline_stack.pop()
        cx.scope, cx.loc_frozen, cx.node = caller, was_frozen, saved_node
    return result


def callee_scope(cx, df: DeviceFunction, src):
    """A fresh name scope for one inlined call of `df`, and the block its returns go to."""
    from .lowering import Scope
    cx._n += 1
    scope = Scope(src, df.py_func, f"c{cx._n}:", df)
    scope.ret = site = ReturnSite(cx.b.new_block("ret"), cx.fresh("ret"))
    return scope, site


def lower_body(cx, df: DeviceFunction, src, site, values: dict):
    """Lower `df`'s body into `cx` (its scope already current) with parameters bound to
    `values`; every return branches to `site`.  Returns the call's result value(s).  Shared by
    in-place inlining and the instantiation cache (templates.py), so both build the same IR."""
    b = cx.b
    for n, v in values.items():
        cx.assign_name(n, v)
    cx.body(src.fn_node.body)
    if b.block is not None:
        _record(cx, site, None)
        b.br(site.block)
    b.seal(site.block)
    if not b.preds[site.block]:
        raise cx.err(f"{df.name} never returns; make every path reach a return statement "
                     f"or the end of the function", src.fn_node)
    b.block = site.block
    result = _result(cx, site)
    ret_ann = _signature(df)[1].get("return")
    if isinstance(ret_ann, T.ScalarType):
        result = _check_arg(cx, df, "return", result, ret_ann)
    return result


def _check_arg(cx, df, name, v, ann):
    what = "the return value" if name == "return" else f"argument '{name}'"
    if ann is None or ann is inspect.Parameter.empty:
        return v
    if ann is T.constexpr:
        if not is_const(v):
            raise cx.err(f"{what} of {df.name} is a constexpr: pass a compile-time value")
        return v
    if isinstance(ann, T.ArrayType):
        if not isinstance(v, ArrayView) or v.elem != ann.dtype or v.ndim != ann.ndim:
            raise cx.err(f"{what} of {df.name} must be a {ann!r} array, got "
                         f"{arith.describe(v)}; pass an array of that type")
        return v
    if isinstance(ann, T.ScalarType) and name != "return":
        # Numba's rule for a typed parameter: the argument converts as `ann(v)` would (a float
        # into an int parameter truncates toward zero), not only under same_kind casting.
        arith.type_of(cx, v)
        return arith.convert_literal(cx, v, ann)
    if isinstance(ann, T.ScalarType):
        return arith.convert_declared(cx, v, ann, f"{what} of {df.name}")
    raise cx.err(f"the annotation of '{name}' in {df.name} is not a pyptx type "
                 f"({annotation_text(ann)}); use f32, i32, f32[:] ...")


def _bad_call(df, sig, args, kwargs) -> str:
    """Why `args`/`kwargs` do not fit the device function's parameters, in the user's terms."""
    params = list(sig.parameters)
    usage = f"{df.name}({', '.join(params)})"
    if len(args) > len(params):
        return (f"{df.name}() takes {len(params)} argument(s) but {len(args)} were given; "
                f"call it as {usage}")
    for k in kwargs:
        if k not in params:
            return f"{df.name}() has no parameter '{k}'; call it as {usage}"
        if params.index(k) < len(args):
            return f"{df.name}() got '{k}' twice (by position and by name); call it as {usage}"
    given = set(params[:len(args)]) | set(kwargs)
    missing = [p for p in params if p not in given
               and sig.parameters[p].default is sig.parameters[p].empty]
    return (f"{df.name}() is missing the argument(s) {', '.join(repr(m) for m in missing)}; "
            f"call it as {usage}")


def lower_return(cx, st) -> None:
    site = cx.scope.ret
    if not isinstance(site, ReturnSite):
        if st.value is not None:
            raise cx.err("a kernel cannot return a value; write results into an output array",
                         st)
        cx.b.br(site)
        return
    value = cx.expr(st.value) if st.value is not None else None
    cx.set_loc(st)
    _record(cx, site, value)
    cx.b.br(site.block)


def _shape_of(value):
    if value is None:
        return "none"
    if isinstance(value, tuple):
        from .complex64 import Complex
        return ("complex" if isinstance(value, Complex) else "tuple", len(value))
    if is_const(value) or isinstance(getattr(value, "type", None), T.ScalarType):
        return "scalar"
    return "object"


def _record(cx, site: ReturnSite, value) -> None:
    shape = _shape_of(value)
    if site.shape is not None and site.shape != shape:
        raise cx.err(f"{cx.scope.func.name} returns different kinds of values on different "
                     f"paths; return the same number of values everywhere")
    site.shape = shape
    if shape == "scalar":
        cx.b.write(site.var, value)
    elif isinstance(shape, tuple):
        for k, v in enumerate(value):
            if _shape_of(v) != "scalar":
                site.objects.append((k, v))
            else:
                cx.b.write(f"{site.var}.{k}", v)
    elif shape == "object":
        if site.objects and site.objects[0][1] is not value:
            raise cx.err(f"{cx.scope.func.name} returns different arrays on different paths; "
                         f"return the same array on every path (or an element of it)")
        site.objects.append((None, value))


def _result(cx, site: ReturnSite):
    if site.shape == "none":
        return None
    if site.shape == "scalar":
        return cx.b.read(site.var)
    if site.shape == "object":
        return site.objects[0][1]
    objs = dict(site.objects)
    parts = tuple(objs[k] if k in objs else cx.b.read(f"{site.var}.{k}")
                  for k in range(site.shape[1]))
    if site.shape[0] == "complex":
        from .complex64 import Complex
        return Complex(*parts)
    return parts


__all__ = ["lower_call", "inline", "lower_return", "is_allowed_object", "PY_SCALARS"]

# Bound once (an import statement in lower_call costs about a microsecond per call); last,
# since intrinsics and complex64 import this package's other modules.
from ..dsl import Dim3, Intrinsic, MemorySpace, SpecialRegister  # noqa: E402
from .complex64 import BoundConjugate, conjugate  # noqa: E402
from .intrinsics import BUILTINS, REGISTRY  # noqa: E402
