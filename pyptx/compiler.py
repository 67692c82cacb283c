"""`pyptx.compile`: resolve parameter types, run frontend → passes → backend, cache the result.

This module is glue: it owns the `CompiledKernel` record the runtime consumes, the in-memory
cache (on each `Kernel` object) and the on-disk cache, and nothing about how code is generated.
"""
from __future__ import annotations

import gc
import inspect
import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import diskcache
from . import types as T
from .errors import CompileError, PyptxError
from .functions import DeviceFunction, KernelBase as Kernel
from .frontend.describe import annotation_text, shown
from .frontend.signature import ArgSpec  # noqa: F401  (re-exported: pyptx.ArgSpec)
from .ptx import KernelParam  # noqa: F401  (the backend's record, re-exported as pyptx.KernelParam)
from .target import DEFAULT_ARCH, SUGGESTED_ARCHS, default_arch  # noqa: F401  (the runtime is never imported)

_ARCH_RE = re.compile(r"^sm_(\d+)(a|f)?$")


@dataclass
class CompiledKernel:
    """The result of `pyptx.compile`: PTX text plus what a launcher needs to call it.

    `name` is the entry name the PTX really has (the backend may rename: a non-ASCII or
    reserved function name); `params` is the entry's `.param` list in order, which launchers
    fill by position, never by name."""
    ptx: str
    name: str
    arch: str
    params: list
    signature: list
    version: str = ""
    _ir_text: str | None = field(default=None, repr=False)
    _ir_fn: object = field(default=None, repr=False)

    @property
    def ir(self) -> str:
        """The optimised SSA IR as text (parseable by `pyptx.ir.parse`)."""
        if self._ir_text is None:
            from .ir.printer import print_function
            self._ir_text = print_function(self._ir_fn)
        return self._ir_text

    def resources(self) -> dict:
        """registers, spill_stores, spill_loads, shared_bytes, local_bytes from `ptxas -v`."""
        from .toolchain import resources
        return resources(self.ptx, self.arch)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} {self.arch}>"


# ---- type resolution ---------------------------------------------------------------------------

def _signature_types(signature, names: list[str], where: dict | None = None):
    """`signature=` as a string "f32[:], i32" or a tuple of pyptx types -> list of types."""
    if isinstance(signature, str):
        env = {n: t for n, t in T.SCALARS.items()}
        env.update(bool=T.bool_, constexpr=T.constexpr)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # SyntaxWarnings of a nonsense signature
                value = eval("(" + signature + ",)", {"__builtins__": {}}, env)  # noqa: S307
        except NameError as e:
            from .frontend.describe import did_you_mean
            bad = getattr(e, "name", None) or "?"
            hint = did_you_mean(bad, env, quote="'")[2:]
            raise CompileError(f"cannot read signature {signature!r}: '{bad}' is not a pyptx "
                               f"type{f' ({hint})' if hint else ''}; write it like "
                               f"\"f32[:], f32[:], i32\"", **(where or {})) from None
        except TypeError as e:            # ours (f32[3]) say what to write
            ours = str(e).startswith("array annotations")
            raise CompileError(f"cannot read signature {signature!r}"
                               + (f": {e}" if ours else "; write it like \"f32[:], f32[:], i32\""),
                               **(where or {})) from None
        except Exception:  # noqa: BLE001 - any parse problem is the user's signature
            raise CompileError(f"cannot read signature {signature!r}; write it like "
                               f"\"f32[:], f32[:], i32\"", **(where or {})) from None
    else:
        value = tuple(signature)
    for v in value:
        if not isinstance(v, (T.ScalarType, T.ArrayType)) and v is not T.constexpr:
            raise CompileError(f"signature entry {annotation_text(v)} is not a pyptx type; use "
                               f"f32, i32[:], ...",
                               **(where or {}))
    if len(value) != len(names):
        raise CompileError(f"signature has {len(value)} types but the function has "
                           f"{len(names)} parameters ({', '.join(names)}); give one type per "
                           f"parameter", **(where or {}))
    return list(value)


def _where(fn) -> dict:
    """The location of `def NAME(` (not of a decorator above it), for errors about the whole
    function or its parameters."""
    try:
        lines, first = inspect.getsourcelines(fn)
        for k, line in enumerate(lines):
            stripped = line.lstrip()
            if stripped.startswith(("def ", "async def ")):
                return dict(filename=inspect.getsourcefile(fn), lineno=first + k,
                            offset=len(line) - len(stripped) + 1, source_line=line)
        return dict(filename=inspect.getsourcefile(fn), lineno=first, offset=1,
                    source_line=lines[0] if lines else None)
    except (OSError, TypeError):
        return dict(filename=getattr(fn.__code__, "co_filename", None),
                    lineno=fn.__code__.co_firstlineno, offset=1)


def resolve_param_types(py_func, signature=None, arg_types: dict | None = None) -> dict:
    """{param: ScalarType | ArrayType | constexpr} from `signature=`, annotations, or (for
    unannotated parameters at launch) the types the launcher inferred from the arguments."""
    try:
        params = list(inspect.signature(py_func).parameters.values())
    except (TypeError, ValueError) as e:
        raise CompileError(f"cannot read the parameters of "
                           f"{getattr(py_func, '__name__', 'this function')}; pass a function "
                           f"defined with def") from None
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise CompileError(f"kernel parameter '{p.name}' must be a plain positional "
                               f"parameter (no *args, **kwargs or keyword-only); write "
                               f"def k(a, b, ...)",
                               **_where(py_func))
    names = [p.name for p in params]
    if signature is not None:
        return _strided_layouts(dict(zip(names, _signature_types(signature, names,
                                                                 _where(py_func)))), arg_types)
    ann = getattr(py_func, "__annotations__", {}) or {}
    out = {}
    for n in names:
        t = ann.get(n)
        if isinstance(t, str):
            try:
                t = eval(t, dict(py_func.__globals__))  # noqa: S307 - the user's own annotation
            except Exception:  # noqa: BLE001
                t = None
        if t is bool:
            t = T.bool_
        if t is None and arg_types and n in arg_types:
            t = arg_types[n]
        if t is None:
            raise CompileError(f"parameter '{n}' has no type: annotate it (e.g. {n}: f32[:] or "
                               f"{n}: i32) or pass signature=", **_where(py_func))
        if not isinstance(t, (T.ScalarType, T.ArrayType)) and t is not T.constexpr \
                and t is not T.tensormap:
            raise CompileError(f"parameter '{n}' is annotated {annotation_text(t)}, which is "
                               f"not a pyptx type; "
                               f"write f32, i32, f32[:], pyptx.constexpr ...", **_where(py_func))
        out[n] = t
    return _strided_layouts(out, arg_types)


def _strided_layouts(types: dict, arg_types: dict | None) -> dict:
    """A declared contiguous array parameter (`x: f32[:, :]`, or in `signature=`) that the
    launcher found a non-contiguous argument for (arg_types gives it layout 'A') is compiled in
    its strided specialisation: same element type and rank, strides passed with the array."""
    if arg_types:
        for n, a in arg_types.items():
            t = types.get(n)
            if isinstance(a, T.ArrayType) and a.layout == "A" and isinstance(t, T.ArrayType) \
                    and t.layout == "C":
                types[n] = t.strided
    return types


# ---- arch --------------------------------------------------------------------------------------

def check_arch(arch: str) -> str:
    m = _ARCH_RE.match(arch or "")
    if not m or int(m.group(1)) < 75:
        raise CompileError(f"unsupported arch {arch!r}: use one of {SUGGESTED_ARCHS}")
    return arch


# ---- the disk cache ----------------------------------------------------------------------------

def _disk_key(k: Kernel, types, constexprs, arch, opt_level, fma, fastmath=False) -> str | None:
    """The disk key, or None when the kernel's dependencies cannot be read (then nothing is
    cached: the compile itself reports what is wrong)."""
    from .cachekey import dependencies, render
    try:
        text = render(dependencies(k.py_func))
    except Exception:  # noqa: BLE001 - e.g. a module whose __getattr__ fails: just no caching
        return None
    if text is None:
        return None
    return diskcache.key((k.name, arch, str(opt_level), str(fma), f"fastmath={fastmath}",
                          repr(sorted((n, repr(t)) for n, t in types.items())),
                          repr(sorted((n, type(v).__name__, repr(v))
                                      for n, v in constexprs.items())),
                          text))


def _from_content(d: dict) -> CompiledKernel:
    return CompiledKernel(
        ptx=d["ptx"], name=d["name"], arch=d["arch"], version=d["version"],
        params=[KernelParam(*p) for p in d["params"]],
        signature=[ArgSpec(a[0], a[1], T.scalar(a[2]), a[3], a[4], *a[5:])
                   for a in d["signature"]],
        _ir_text=d["ir"])


def _content(ck: CompiledKernel) -> dict:
    return dict(ptx=ck.ptx, name=ck.name, arch=ck.arch, version=ck.version, ir=ck.ir,
                params=[[p.name, p.ptx_type] for p in ck.params],
                signature=[[a.name, a.kind, a.dtype.name, a.ndim, a.writable]
                           + ([True] if a.strided else []) for a in ck.signature])


# ---- compile -----------------------------------------------------------------------------------

def compile_uncached(py_func, types: dict, constexprs: dict, arch: str, opt_level: int,
                     fma: bool, name: str, fastmath: bool = False) -> CompiledKernel:
    """The pipeline itself: frontend → passes → PTX.  No caches.

    The cyclic garbage collector is paused for the duration: a compile allocates tens of
    thousands of small IR objects that all stay alive until it ends (blocks and instructions
    point at each other), so the collections it would trigger scan them and free little;
    that was 3-10 % of a compile.  The garbage it leaves is collected
    after it as usual."""
    if not gc.isenabled():
        return _compile_uncached(py_func, types, constexprs, arch, opt_level, fma, name,
                                 fastmath)
    gc.disable()
    try:
        return _compile_uncached(py_func, types, constexprs, arch, opt_level, fma, name,
                                 fastmath)
    finally:
        gc.enable()


def _compile_uncached(py_func, types, constexprs, arch, opt_level, fma, name,
                      fastmath=False) -> CompiledKernel:
    from .frontend import lower_kernel
    from .passes import run_pipeline
    from .ptx import emit
    try:
        fn = lower_kernel(py_func, types, constexprs, name=name, fastmath=fastmath)
    except (PyptxError, RecursionError):
        raise
    except Exception as e:  # noqa: BLE001 - only CompileError escapes for bad code
        raise CompileError(
            f"pyptx cannot compile {name}: it uses a construct the compiler has no diagnostic "
            f"for yet; rewrite it with the statements and intrinsics of the pyptx language "
            f"(docs/language.md lists them) and please report this message",
            **_where(py_func)) from e
    fn.attrs["fma"] = fma
    fn = run_pipeline(fn, opt_level=opt_level, fma=fma)
    mod = emit(fn, arch)
    ck = CompiledKernel(ptx=mod.text, name=mod.entry or name, arch=arch, params=list(mod.params),
                        signature=list(fn.attrs.get("signature", [])), version=mod.version,
                        _ir_fn=fn)
    for hook in _emit_hooks:
        hook(ck)
    return ck


#: callables run on every freshly emitted CompiledKernel (the test-suite assembles each with ptxas)
_emit_hooks: list = []


def _split_constexprs(types: dict, given: dict, py_func) -> dict:
    out = {}
    for n, t in types.items():
        if t is T.constexpr:
            if n not in given:
                raise CompileError(f"constexpr parameter '{n}' has no value: pass it at launch, "
                                   f"or use kernel.specialize({n}=...) or "
                                   f"compile(..., constexprs={{'{n}': ...}})", **_where(py_func))
            v = given[n]
            if not isinstance(v, (bool, int, float)):
                raise CompileError(f"constexpr '{n}' must be an int, float or bool, got "
                                   f"{type(v).__name__}; pass e.g. {n}=128", **_where(py_func))
            out[n] = v
    unknown = set(given) - set(types)
    if unknown:
        raise CompileError(f"constexprs names unknown parameter(s) {sorted(unknown)}; use the "
                           f"names of the kernel's pyptx.constexpr parameters",
                           **_where(py_func))
    return out


def _check_options(opt_level, fma, constexprs, signature, py_func, fastmath=False) -> None:
    """Bad `compile`/decorator options are CompileErrors too (nothing else escapes)."""
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2):
        raise CompileError(f"opt_level must be 0, 1 or 2, got {shown(opt_level)}; pass e.g. "
                           f"opt_level=2", **_where(py_func))
    if not isinstance(fma, (bool, np.bool_)):
        raise CompileError(f"fma must be True or False, got {shown(fma)}; pass fma=True or "
                           f"fma=False", **_where(py_func))
    if not isinstance(fastmath, (bool, np.bool_)):
        raise CompileError(f"fastmath must be True or False, got {shown(fastmath)}; pass "
                           f"fastmath=True or fastmath=False", **_where(py_func))
    if constexprs is not None and not hasattr(constexprs, "items"):
        raise CompileError(f"constexprs must be a dict {{name: value}}, got "
                           f"{type(constexprs).__name__}; pass e.g. constexprs={{'BLOCK': 128}}",
                           **_where(py_func))
    if signature is not None and not isinstance(signature, (str, tuple, list)):
        raise CompileError(f"signature must be a string like \"f32[:], i32\" or a tuple of "
                           f"pyptx types, got {type(signature).__name__}; write e.g. "
                           f"signature=\"f32[:], i32\"",
                           **_where(py_func))


def compile_kernel(k: Kernel, *, arch=None, constexprs=None, signature=None, opt_level=None,
                   fma=None, arg_types: dict | None = None, fastmath=None) -> CompiledKernel:
    """Compile a Kernel for given options, through its in-memory cache and the disk cache."""
    if arch is not None and not isinstance(arch, str):
        raise CompileError(f"arch must be a string like 'sm_80', got {shown(arch)}; pass "
                           f"e.g. arch='sm_80'",
                           **_where(k.py_func))
    arch = check_arch(arch or getattr(k, "arch", None) or default_arch())
    opt_level = k.opt_level if opt_level is None else opt_level
    fma = k.fma if fma is None else fma
    fastmath = getattr(k, "fastmath", False) if fastmath is None else fastmath
    _check_options(opt_level, fma, constexprs, signature, k.py_func, fastmath)
    opt_level, fma, fastmath = int(opt_level), bool(fma), bool(fastmath)
    types = resolve_param_types(k.py_func, signature if signature is not None else k.signature,
                                arg_types)
    cx = _split_constexprs(types, {**k.constexprs, **(constexprs or {})}, k.py_func)
    mkey = (arch, opt_level, fma, fastmath, tuple((n, repr(t)) for n, t in types.items()),
            tuple(sorted((n, type(v).__name__, repr(v)) for n, v in cx.items())))
    hit = k._cache.get(mkey)
    if hit is not None:
        return hit
    cdir = diskcache.cache_dir()
    path = key = None
    ck = None
    if cdir:
        key = _disk_key(k, types, cx, arch, opt_level, fma, fastmath)
    if key is not None:
        path = diskcache.path_of(cdir, key)
        content = diskcache.load(path, key)
        if content is not None:
            try:
                ck = _from_content(content)
            except Exception:  # noqa: BLE001 - an entry this version cannot read: a miss
                ck = None
    if ck is None:
        try:
            ck = compile_uncached(k.py_func, types, cx, arch, opt_level, fma, k.name, fastmath)
        except PyptxError:
            raise
        except RecursionError:
            raise CompileError("the kernel is too deeply nested to compile; split it into "
                               "device functions", **_where(k.py_func)) from None
        if path:
            diskcache.store(path, key, _content(ck))
    k._cache[mkey] = ck
    return ck


def compile(fn, *, arch=None, constexprs=None, signature=None, opt_level=2, fma=True,  # noqa: A001
            fastmath=None) -> CompiledKernel:
    """Compile a `@pyptx.kernel` (or a plain function, compiled as a kernel) to PTX.

    `opt_level` and `fma` given here override the kernel's decorator defaults only
    when the caller passes them explicitly through a Kernel created here.  `fastmath`
    (default: the kernel's own, False for a plain function) approximates f32 division,
    square root, exp/exp2/log/log2/sin/cos as Numba's `fastmath=True` does.
    """
    if isinstance(fn, Kernel):
        return compile_kernel(fn, arch=arch, constexprs=constexprs, signature=signature,
                              opt_level=opt_level if opt_level != 2 else None,
                              fma=fma if fma is not True else None, fastmath=fastmath)
    if isinstance(fn, DeviceFunction):
        raise CompileError(f"{fn.name} is a @pyptx.func (a device function); compile a "
                           f"@pyptx.kernel that calls it", **_where(fn.py_func))
    if not inspect.isfunction(fn):
        raise CompileError(f"pyptx.compile expects a @pyptx.kernel or a Python function, got "
                           f"{type(fn).__name__}; pass the decorated kernel, e.g. "
                           f"pyptx.compile(my_kernel)")
    return compile_kernel(Kernel(fn, fma=fma, opt_level=opt_level,
                                 fastmath=False if fastmath is None else fastmath), arch=arch,
                          constexprs=constexprs, signature=signature)
