"""`@pyptx.kernel` and `@pyptx.func`: the user's handles on a DSL function.

A `Kernel` holds the Python function, default compile options and the constexpr values fixed by
`specialize`; it compiles lazily (once per distinct types/constexprs/arch, cached on the object)
and launches with `k[grid, block](*args)`.  A `DeviceFunction` is only ever inlined into kernels.

The user-facing entry points that compile (`pyptx.compile`, the first launch `k[g, b](...)`)
re-raise a `CompileError` without the compiler's frames: the traceback is the user's call, one
line here, and the error's own file:line:col and caret.  `PYPTX_DEBUG=1` keeps every frame.
"""
from __future__ import annotations

import functools
import os

from .errors import CompileError
from .functions import DeviceFunction, KernelBase  # noqa: F401 - re-exported


def debug_tracebacks() -> bool:
    """`PYPTX_DEBUG=1`: show the compiler's frames in a CompileError's traceback."""
    return os.environ.get("PYPTX_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def _trimmed(err: CompileError) -> CompileError:
    """The error without the frames it passed through in the compiler (nor an internal
    exception it was raised while handling): `raise _trimmed(e) from None`."""
    return err.with_traceback(None)


def user_facing(fn):
    """Wrap an entry point (`pyptx.compile`) so that its CompileErrors come out trimmed."""
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        __tracebackhide__ = True        # noqa: F841 - pytest hides this frame
        try:
            return fn(*args, **kwargs)
        except CompileError as err:
            if debug_tracebacks():
                raise
            raise _trimmed(err) from None   # the kernel does not compile: PYPTX_DEBUG=1 for more
    return entry


class Kernel(KernelBase):
    """A `@pyptx.kernel`.  `k[grid, block](*args, stream=None, shared_mem=0)` launches it."""

    def specialize(self, **constexprs) -> "Kernel":
        """A new Kernel with some constexpr parameters fixed: `k.specialize(BLOCK=128)`."""
        merged = {**self.constexprs, **constexprs}
        return Kernel(self.py_func, fma=self.fma, opt_level=self.opt_level, constexprs=merged,
                      signature=self.signature, name=self.name, fastmath=self.fastmath,
                      arch=self.arch)

    def __getitem__(self, config) -> "_LaunchConfig":
        if not isinstance(config, tuple) or len(config) != 2:
            from .errors import LaunchError
            raise LaunchError(f"launch {self.name} as kernel[grid, block](...), "
                              f"got kernel[{config!r}]")
        return _LaunchConfig(self, config[0], config[1])


class _LaunchConfig:
    __slots__ = ("kernel", "grid", "block")

    def __init__(self, kernel: Kernel, grid, block):
        self.kernel = kernel
        self.grid = grid
        self.block = block

    def __call__(self, *args, stream=None, shared_mem: int = 0, **kwargs):
        if kwargs:
            from .errors import LaunchError
            raise LaunchError(f"{self.kernel.name}: kernel arguments are positional; unexpected "
                              f"keyword argument(s) " + ", ".join(f"'{k}'" for k in kwargs)
                              + " (only stream= and shared_mem= are launch options)")
        __tracebackhide__ = True        # noqa: F841 - pytest hides this frame
        launch = _launch_fn[0] if _launch_fn else _load_launch()
        try:
            return launch(self.kernel, self.grid, self.block, args, stream=stream,
                          shared_mem=shared_mem)
        except CompileError as err:             # the first launch compiles
            if debug_tracebacks():
                raise
            raise _trimmed(err) from None   # the kernel does not compile: PYPTX_DEBUG=1 for more


_launch_fn: list = []


def _load_launch():
    """Import the runtime on the first launch only (importing pyptx stays light)."""
    from .runtime.launch import launch
    _launch_fn.append(launch)
    return launch


def kernel(fn=None, *, fma: bool = True, opt_level: int = 2, signature=None,
           fastmath: bool = False, arch: str | None = None):
    """Decorator: `@pyptx.kernel` or `@pyptx.kernel(fma=False, opt_level=1)`;
    `fastmath=True` trades IEEE f32 division, square root and exp/log/sin/cos for the PTX
    approximations (docs/language.md, "fastmath").  `arch="sm_90a"` pins the target: the kernel
    is compiled for it unless a `pyptx.compile(..., arch=)` names another, launches on the CPU
    executor run that PTX, and a GPU launch needs a GPU the arch runs on (docs/launching.md)."""
    if arch is not None and not isinstance(arch, str):
        _bad_arch(arch)             # its value is checked where it is compiled
    if fn is None:
        return lambda f: Kernel(f, fma=fma, opt_level=opt_level, signature=signature,
                                fastmath=fastmath, arch=arch)
    return Kernel(fn, fma=fma, opt_level=opt_level, signature=signature, fastmath=fastmath,
                  arch=arch)


def _bad_arch(arch):
    raise CompileError(f"@pyptx.kernel(arch=...) takes a string like 'sm_90a', got "
                       f"{type(arch).__name__}")


def func(fn=None, *, inline: bool = True):
    """Decorator: `@pyptx.func` marks a device function (inlined into its callers)."""
    if fn is None:
        return lambda f: DeviceFunction(f, inline=inline)
    return DeviceFunction(fn, inline=inline)
