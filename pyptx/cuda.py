"""`from pyptx import cuda`: Numba-CUDA's spellings over pyptx, so that a Numba kernel ports by
changing its import.

`cuda.jit` makes a `pyptx.Kernel` (or, with `device=True`, a `pyptx.func`); `cuda.threadIdx`
and friends are pyptx's index objects; `cuda.shared.array`, `cuda.atomic.add`,
`cuda.shfl_down_sync(mask, v, d)`, ... are pyptx intrinsics (the `*_sync` ones take Numba's
explicit member mask).  Host side, `cuda.to_device` / `device_array` / `copy_to_host` work on
the GPU and on the CPU executor alike.  `cuda.const.array_like(TABLE)` is pyptx's
`const_array` (constant memory).  What pyptx cannot honour (a launch with an explicit stream
object of another library, object mode) is a CompileError or a LaunchError that names the fix; docs/coming-from-numba.md lists the differences.
"""
from __future__ import annotations

import inspect
import re

import numpy as np

from . import dsl
from . import types as T
from .dsl import Intrinsic
from .kernel import DeviceFunction, Kernel, _LaunchConfig

# ---- indices, sizes ------------------------------------------------------------------------
threadIdx, blockIdx, blockDim, gridDim = (dsl.thread_idx, dsl.block_idx, dsl.block_dim,
                                          dsl.grid_dim)
#: `cuda.laneid` is an attribute in Numba (not a call): the %laneid special register
laneid = dsl.SpecialRegister("laneid")
warpsize = dsl.WARP_SIZE
grid, gridsize = dsl.grid, dsl.gridsize

# ---- barriers, warp --------------------------------------------------------------------------
syncthreads, syncwarp, threadfence = dsl.syncthreads, dsl.syncwarp, dsl.threadfence
syncthreads_count, syncthreads_and, syncthreads_or = (
    dsl.syncthreads_count, dsl.syncthreads_and, dsl.syncthreads_or)
threadfence_block = Intrinsic("cuda.threadfence_block")
threadfence_system = Intrinsic("cuda.threadfence_system")
activemask, lanemask_lt = dsl.activemask, dsl.lanemask_lt
_SYNC = ("shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync all_sync any_sync eq_sync "
         "ballot_sync match_any_sync match_all_sync").split()
globals().update({n: Intrinsic(f"cuda.{n}") for n in _SYNC})

# ---- arithmetic -------------------------------------------------------------------------------
popc, brev, clz, ffs = dsl.popc, dsl.brev, dsl.clz, dsl.ffs
fma = Intrinsic("cuda.fma")


class _Namespace(dsl.MemorySpace):
    """`cuda.shared`, `cuda.atomic`, ...: a namespace of pyptx intrinsics (kernels may read
    its attributes, as they read `pyptx.shared`'s)."""

    def __init__(self, name: str, **members):  # noqa: D107 - no Intrinsic of its own
        super().__init__(name)
        self._name = name
        self.__dict__.update(members)

    def __repr__(self):
        return f"<pyptx.cuda.{self._name}>"


shared = _Namespace("shared", array=dsl.shared.array)
local = _Namespace("local", array=dsl.local.array)
const = _Namespace("const", array_like=Intrinsic("cuda.const.array_like"))
atomic = _Namespace("atomic", **{k: getattr(dsl, f"atomic_{k}") for k in (
    "add sub min max nanmin nanmax exch and or xor inc dec cas").split()})
atomic.__dict__["and_"], atomic.__dict__["or_"] = atomic.__dict__["and"], atomic.__dict__["or"]
atomic.compare_and_swap = atomic.cas

# ---- types: Numba's names -------------------------------------------------------------------
float16, float32, float64 = T.f16, T.f32, T.f64
int8, int16, int32, int64 = T.i8, T.i16, T.i32, T.i64
uint8, uint16, uint32, uint64 = T.u8, T.u16, T.u32, T.u64
boolean, complex64 = T.bool_, T.c64
f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1, c8 = (
    T.f16, T.f32, T.f64, T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64, T.bool_, T.c64)
_SIG_NAMES = {k: v for k, v in globals().items() if isinstance(v, T.ScalarType)}
_SIG_NAMES.update({"bool_": T.bool_, "intp": T.i64, "uintp": T.u64, "void": None})


def from_numba_type(t):
    """A Numba type object (`numba.float32`, `numba.types.int32[:]`) -> the pyptx type, or
    None; lets `from numba import float32` keep working in ported kernels (dtype= arguments)."""
    name = getattr(t, "name", None)
    if not type(t).__module__.startswith("numba.") or not isinstance(name, str):
        return None
    dtype, ndim = getattr(t, "dtype", None), getattr(t, "ndim", None)
    if dtype is not None and isinstance(ndim, int):
        inner = from_numba_type(dtype)
        return T.ArrayType(inner, ndim) if isinstance(inner, T.ScalarType) else None
    return _SIG_NAMES.get(name)


def parse_signature(sig: str):
    """Numba's "void(float32[:], int32)" -> (argument types, return type or None)."""
    text = re.sub(r"\[\s*::\s*1\s*\]", "[:]", sig.strip())          # [::1] = C-contiguous
    text = re.sub(r"(,\s*)::1(\s*\])", r"\1:\2", text)
    m = re.fullmatch(r"(?:(\w+)\s*)?\((.*)\)", text, re.S)
    if m is None:
        raise ValueError(f"cannot read the Numba signature {sig!r}; write it like "
                         f"\"void(float32[:], int32)\"")
    try:
        ret = eval(m.group(1), {"__builtins__": {}}, _SIG_NAMES) if m.group(1) else None  # noqa: S307
        args = eval("(" + m.group(2) + ",)", {"__builtins__": {}}, _SIG_NAMES) \
            if m.group(2).strip() else ()                                              # noqa: S307
    except Exception as e:  # noqa: BLE001 - any parse problem is the user's signature
        raise ValueError(f"cannot read the Numba signature {sig!r} ({e}); types are "
                         f"float32, int32, float32[:], float32[:, :], ...") from None
    return tuple(args), ret


# ---- cuda.jit -------------------------------------------------------------------------------

class CudaKernel(Kernel):
    """A Kernel launched Numba's way too: `k[grid, block]`, `k[grid, block, stream]`,
    `k[grid, block, stream, shared_mem]`."""

    def __getitem__(self, config):
        if isinstance(config, tuple) and len(config) in (3, 4):
            stream = config[2] or None
            smem = config[3] if len(config) == 4 else 0
            return _NumbaLaunch(self, config[0], config[1], stream, smem)
        return super().__getitem__(config)


class _NumbaLaunch(_LaunchConfig):
    __slots__ = ("stream", "smem")

    def __init__(self, kernel, grid, block, stream, smem):
        super().__init__(kernel, grid, block)
        self.stream, self.smem = stream, smem

    def __call__(self, *args):
        return super().__call__(*args, stream=self.stream, shared_mem=self.smem)


def _annotate(fn, types):
    names = list(inspect.signature(fn).parameters)
    if len(types) != len(names):
        raise ValueError(f"the signature of {fn.__name__} has {len(types)} types for "
                         f"{len(names)} parameters ({', '.join(names)})")
    fn.__annotations__ = {**getattr(fn, "__annotations__", {}), **dict(zip(names, types))}


def jit(fn_or_sig=None, device: bool = False, **options):
    """`@cuda.jit`, `@cuda.jit("void(float32[:])")`, `@cuda.jit(device=True)`.

    Accepted options: `fastmath` (False only: pyptx's `fast_*` functions are explicit),
    `opt`/`debug`/`lineinfo`/`cache`/`inline` (ignored: pyptx always inlines device functions,
    keeps line information and caches in memory).  Anything else is a TypeError naming it."""
    unknown = set(options) - {"fastmath", "opt", "debug", "lineinfo", "cache", "inline",
                              "max_registers"}
    if unknown:
        raise TypeError(f"cuda.jit() got option(s) pyptx does not know: {', '.join(sorted(unknown))}")
    if options.get("fastmath"):
        raise TypeError("cuda.jit(fastmath=True) is not supported: call pyptx.math.fast_exp "
                        "... where the approximation is wanted")
    sig = None
    if isinstance(fn_or_sig, str) or isinstance(fn_or_sig, (list, tuple)):
        sig = fn_or_sig[0] if isinstance(fn_or_sig, (list, tuple)) else fn_or_sig
        fn_or_sig = None
    elif fn_or_sig is not None and not callable(fn_or_sig):     # a Numba Signature object
        sig = tuple(from_numba_type(a) for a in getattr(fn_or_sig, "args", ()))
        if not sig or any(t is None for t in sig):
            raise ValueError(f"cannot read the Numba signature {fn_or_sig!r}; write it as a "
                             f"string like \"void(float32[:], int32)\"")
        fn_or_sig = None

    def make(fn):
        if sig is not None:
            args = sig if isinstance(sig, tuple) else parse_signature(sig)[0]
            _annotate(fn, args)
        if device:
            return DeviceFunction(fn)
        return CudaKernel(fn)
    return make if fn_or_sig is None else make(fn_or_sig)


# ---- host side ------------------------------------------------------------------------------

def to_device(arr, stream=None, copy=True, to=None):
    """`cuda.to_device(a)` -> a `pyptx.DeviceArray` (host memory on the CPU executor)."""
    from .runtime.device_array import to_device as _to_device
    if to is not None:
        to.copy_from_host(arr)
        return to
    return _to_device(np.asarray(arr))


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=None):
    if order != "C" or strides is not None:
        raise ValueError("device_array: pyptx arrays are C-contiguous (order='C', no strides)")
    from .runtime.device_array import device_empty
    return device_empty(shape, np.dtype(dtype), api="cuda.device_array()")


def device_array_like(ary, stream=None):
    return device_array(np.shape(ary), np.asarray(ary).dtype if not hasattr(ary, "dtype")
                        else ary.dtype)


def synchronize():
    """Wait until every queued launch and copy has finished, like Numba's `cuda.synchronize()`.

    On the GPU a launch of DeviceArrays (or other device-resident arrays) returns as soon as the
    kernel is queued; this synchronises the context (`cuCtxSynchronize`), and a fault of a
    queued kernel is raised here as a DeviceError.  On the CPU executor launches are
    synchronous and this does nothing."""
    from .runtime.launch import device
    if device() == "gpu":
        from .runtime import driver
        driver.synchronize()


def is_available() -> bool:
    from .runtime.launch import device
    return device() == "gpu"


# ---- devices (Numba's spellings over pyptx.devices / pyptx.use_device) ----------------------

def select_device(device_id):
    """`cuda.select_device(i)`: launch on device `i` from this thread on; returns the `Device`
    (`.id`, `.name`, `.compute_capability`).  A bad id is a pyptx.DeviceError (Numba raises
    IndexError) raised here, not at the next launch."""
    from .runtime.devices import use_device
    return use_device(device_id).__enter__()


def get_current_device():
    """The calling thread's `Device` (on the CPU executor a pseudo-device named
    "pyptx CPU executor", like Numba's simulator)."""
    from .runtime.devices import current_device
    return current_device()


class _DeviceList:
    """`cuda.gpus`: the devices, list-like (`len`, `[i]`, iteration; empty on the CPU
    executor); `with cuda.gpus[i]:` launches on device `i` inside the block."""

    def _list(self):
        from .runtime.devices import devices
        return devices()

    def __getitem__(self, i):
        return self._list()[i]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self):
        return iter(self._list())

    @property
    def current(self):
        """The calling thread's device (None on the CPU executor)."""
        from .runtime.devices import current_device, _on_cpu
        return None if _on_cpu() else current_device()

    def __repr__(self) -> str:
        return f"<pyptx.cuda.gpus: {self._list()!r}>"


gpus = _DeviceList()


def list_devices():
    return gpus


def detect() -> bool:
    """Print the CUDA devices found and whether pyptx supports each (compute capability 7.5
    or newer); True when at least one is supported, as Numba's `cuda.detect()`."""
    from .errors import DeviceError
    from .runtime.devices import devices
    from .runtime.launch import device_reason
    try:
        found = devices()
    except DeviceError as e:
        found, why = [], str(e)
    else:
        why = None if found else device_reason()
    print(f"Found {len(found)} CUDA devices")
    supported = 0
    for d in found:
        ok = d.arch is not None
        supported += ok
        support = "[SUPPORTED]" if ok else "[NOT SUPPORTED: CC < 7.5]"
        print(f"id {d.id}    {d.name:>20} {support:>40}")
        print(f"{'Compute Capability':>40}: {d.compute_capability[0]}.{d.compute_capability[1]}")
        print(f"{'Total Memory':>40}: {d.total_memory / (1 << 30):.1f} GiB")
        if ok:
            print(f"{'pyptx arch':>40}: {d.arch}")
    if why:
        print(f"pyptx runs kernels on the CPU executor: {why}")
    print("Summary:")
    print(f"\t{supported}/{len(found)} devices are supported")
    return supported > 0


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "inspect", "re", "np", "dsl", "T", "Intrinsic", "DeviceFunction", "Kernel")]
