"""What a DSL function is, for the stages that compile it: `DeviceFunction` (`@pyptx.func`, only
ever inlined) and `KernelBase` (a kernel's function and compile options).  A leaf module: the
compiler, the cache key and the frontend import it to recognise these objects, without importing
`pyptx.kernel`, whose `Kernel` adds launching and so reaches the runtime.
"""
from __future__ import annotations

import functools


class DeviceFunction:
    """A `@pyptx.func`: callable from kernels and other funcs (inlined), never launched."""

    def __init__(self, py_func, *, inline: bool = True):
        self.py_func = py_func
        self.name = py_func.__name__
        self.inline = inline
        functools.update_wrapper(self, py_func)

    def __call__(self, *args, **kwargs):
        # Outside a kernel, a device function is just its Python body (useful for testing).
        return self.py_func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<pyptx.DeviceFunction {self.name}>"


class KernelBase:
    """A `@pyptx.kernel` as the compiler sees it: the function, its compile options and fixed
    constexprs.  `pyptx.kernel.Kernel` adds launching (`k[grid, block](...)`) and `specialize`."""

    #: whether a kernel may call this one as a device function (inlined): Numba's rule for
    #: `@cuda.jit` functions (pyptx/cuda.py sets it); a `@pyptx.kernel` is only launched, the
    #: shared code being a `@pyptx.func` (docs/decisions.md)
    callable_from_kernels = False

    def as_device_function(self) -> "DeviceFunction":
        """This kernel's function as a device function, for a call from another kernel."""
        df = self.__dict__.get("_as_device")
        if df is None:
            df = self.__dict__["_as_device"] = DeviceFunction(self.py_func)
        return df

    def __init__(self, py_func, *, fma: bool = True, opt_level: int = 2,
                 constexprs: dict | None = None, signature=None, name: str | None = None,
                 fastmath: bool = False, arch: str | None = None):
        self.py_func = py_func
        #: the target this kernel is compiled for when the caller names none (`@pyptx.kernel(
        #: arch="sm_90a")`: a kernel using arch-specific instructions); None: the current GPU's
        self.arch = arch
        self._name = name or py_func.__name__
        self.fma = fma
        self.fastmath = fastmath        # approximate f32 '/', sqrt, exp, log, sin, cos
        self.opt_level = opt_level
        self.constexprs = dict(constexprs or {})
        self.signature = signature
        self._cache: dict = {}          # (arch, types, constexprs, opts) -> CompiledKernel
        functools.update_wrapper(self, py_func)

    @property
    def name(self) -> str:
        """The entry name the kernel's PTX has: the function's name, made a valid and unique
        PTX identifier by the backend's namer (`ядро` → `____`, `param0` → `param0_1`)."""
        n = self.__dict__.get("_entry_name")
        if n is None:
            from .ptx.names import Namer
            n = self.__dict__["_entry_name"] = Namer()(self._name)
        return n

    def __call__(self, *args, **kwargs):
        from .errors import LaunchError
        raise LaunchError(f"a kernel is launched with a grid and block: "
                          f"{self.name}[grid, block](...)")

    def __repr__(self) -> str:
        return f"<pyptx.Kernel {self.name}>"
