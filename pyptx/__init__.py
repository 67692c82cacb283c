"""pyptx: write GPU kernels in Python, get NVIDIA PTX (no LLVM/NVVM/nvcc), run on a GPU or on the
CPU PTX executor.

Importing pyptx is cheap and never touches a GPU, a driver or the CUDA toolkit: the heavier parts
(compiler, runtime, lark) load on first use through `__getattr__`.
"""
from __future__ import annotations

import importlib

from .errors import (CacheWarning, CompileError, DeviceError, DeviceWarning,  # noqa: F401
                     LaunchError, MemoryFault, PyptxError, ToolchainError)
from .kernel import DeviceFunction, Kernel, func, kernel  # noqa: F401
from .types import (ArrayType, bool_, constexpr, f16, f32, f64, i8, i16, i32,  # noqa: F401
                    i64, u8, u16, u32, u64, c64)
from .types import bf16  # noqa: F401
from .types import tensormap  # noqa: F401

__version__ = "0.1.0"

# Numba's type names (`from pyptx import float32, int32, void` where the code said
# `from numba import ...`): aliases of pyptx's types.  Only the long names: Numba's `i8`/`u8`
# mean int64/uint64 where pyptx's `i8`/`u8` are 8-bit, so the short aliases (f4, i4, ...) are
# in `pyptx.cuda` only.  Not part of `from pyptx import *`.
float16, float32, float64, double = f16, f32, f64, f64
int8, int16, int32, int64, intp = i8, i16, i32, i64, i64
uint8, uint16, uint32, uint64, uintp = u8, u16, u32, u64, u64
boolean, complex64 = bool_, c64

# name -> module that defines it (loaded on first access)
_LAZY = {
    "compile": "pyptx.compiler",
    "CompiledKernel": "pyptx.compiler",
    "KernelParam": "pyptx.compiler",
    "ArgSpec": "pyptx.compiler",
    "device": "pyptx.runtime.launch",
    "devices": "pyptx.runtime.devices",
    "use_device": "pyptx.runtime.devices",
    "Device": "pyptx.runtime.devices",
    "to_device": "pyptx.runtime.device_array",
    "DeviceArray": "pyptx.runtime.device_array",
    "graph": "pyptx.runtime.graph",
    "Graph": "pyptx.runtime.graph",
    "math": None,          # the pyptx.math submodule itself
    "sanitize": "pyptx.runtime.checking",
    "profile": "pyptx.runtime.checking",
    "SanitizerError": "pyptx.errors",
    "TensorMap": "pyptx.runtime.tensormap",
    "void": "pyptx.cuda",  # Numba's `void(float32[:], int32)` signature maker (not in __all__)
}


_EAGER = ["CacheWarning", "CompileError", "DeviceError", "DeviceWarning", "LaunchError", "MemoryFault", "PyptxError",
          "ToolchainError", "DeviceFunction", "Kernel", "func", "kernel", "ArrayType", "bool_",
          "constexpr", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bf16",
          "c64", "tensormap"]


def __getattr__(name: str):
    if name == "__all__":          # `from pyptx import *`: the eager names, the lazy ones, the DSL
        dsl = importlib.import_module("pyptx.dsl")
        return _EAGER + [n for n in _LAZY if n not in ("math", "void")] + list(dsl.__all__)
    if name in _LAZY:
        mod = _LAZY[name]
        if mod is None:
            value = importlib.import_module(f"pyptx.{name}")
        else:
            value = getattr(importlib.import_module(mod), name)
        if name == "compile":       # a CompileError without the compiler's frames (kernel.py)
            from .kernel import user_facing
            value = user_facing(value)
        globals()[name] = value
        return value
    try:
        dsl = importlib.import_module("pyptx.dsl")
    except ImportError:
        raise AttributeError(f"module 'pyptx' has no attribute {name!r}") from None
    if name in getattr(dsl, "__all__", ()) or name in getattr(dsl, "QUALIFIED_ONLY", ()):
        value = getattr(dsl, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pyptx' has no attribute {name!r}")


def __dir__():
    dsl = importlib.import_module("pyptx.dsl")
    return sorted(set(globals()) | set(_LAZY) | set(getattr(dsl, "__all__", ())))
