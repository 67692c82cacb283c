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
from . import _cuda_host as _host
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


def _compare_and_swap(ary, old, val):
    """Numba's `cuda.atomic.compare_and_swap(ary, old, val)`: a compare-and-swap of `ary[0]`
    (the first element, whatever the rank); returns the value found there."""
    if ary.ndim == 1:
        return dsl.atomic_cas(ary, 0, old, val)
    elif ary.ndim == 2:
        return dsl.atomic_cas(ary, (0, 0), old, val)
    elif ary.ndim == 3:
        return dsl.atomic_cas(ary, (0, 0, 0), old, val)
    else:
        return dsl.atomic_cas(ary, (0, 0, 0, 0), old, val)


atomic.compare_and_swap = DeviceFunction(_compare_and_swap)

# ---- types: Numba's names -------------------------------------------------------------------
float16, float32, float64 = T.f16, T.f32, T.f64
int8, int16, int32, int64 = T.i8, T.i16, T.i32, T.i64
uint8, uint16, uint32, uint64 = T.u8, T.u16, T.u32, T.u64
boolean, complex64 = T.bool_, T.c64
f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1, c8 = (
    T.f16, T.f32, T.f64, T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64, T.bool_, T.c64)
_SIG_NAMES = T.NUMBA_NAMES
#: Numba's names pyptx has no type for (a signature using one is a ValueError naming it)
_NO_TYPE = ("complex128", "c16", "cpointer", "voidptr", "optional", "Record", "UniTuple")


Signature = T.Signature          # re-exported: cuda.Signature, void(...)


class _Void:
    """Numba's `void`: `void(float32[:], int32)` is a kernel's signature."""

    def __call__(self, *args):
        return Signature(args, None)

    def __repr__(self) -> str:
        return "void"


void = none = _Void()


from_numba_type = T.from_numba_type      # re-exported (it lives with the types)


# `float32[::1]`, `int32[:, ::1]`, `int32[::1, :, :]`: Numba's layouts; pyptx reads the rank
# (arrays are C-contiguous in pyptx: an F-ordered numpy argument is a LaunchError at launch)
_LAYOUT = re.compile(r"\[\s*(:{1,2}\s*(?:1\s*)?(?:,\s*:{1,2}\s*(?:1\s*)?)*)\]")


def _dims(m: re.Match) -> str:
    return "[" + ", ".join([":"] * (m.group(1).count(",") + 1)) + "]"


def _eval_types(text: str, sig: str):
    try:
        return eval(text, {"__builtins__": {}}, _SIG_NAMES)  # noqa: S307
    except Exception as e:  # noqa: BLE001 - any parse problem is the user's signature
        missing = [n for n in _NO_TYPE if re.search(rf"\b{n}\b", text)]
        why = f"pyptx has no {missing[0]} type" if missing else str(e)
        raise ValueError(f"cannot read the Numba signature {sig!r} ({why}); types are "
                         f"float32, int32, float32[:], float32[:, ::1], ...") from None


def parse_signature(sig: str):
    """Numba's "void(float32[:], int32)" (or "(float32[::1], f8)", "float64(double, i4)")
    -> (argument types, return type or None)."""
    text = _LAYOUT.sub(_dims, sig.strip())
    m = re.fullmatch(r"(?:(\w+)\s*)?\((.*)\)", text, re.S)
    if m is None:
        raise ValueError(f"cannot read the Numba signature {sig!r}; write it like "
                         f"\"void(float32[:], int32)\"")
    ret = _eval_types(m.group(1), sig) if m.group(1) else None
    args = _eval_types("(" + m.group(2) + ",)", sig) if m.group(2).strip() else ()
    for a in args:
        if not isinstance(a, (T.ScalarType, T.ArrayType)):
            raise ValueError(f"cannot read the Numba signature {sig!r}: {a!r} is not a type")
    return tuple(args), ret


def _as_type(t, where):
    """One argument type of a signature given as objects: a pyptx type or a Numba type."""
    if isinstance(t, (T.ScalarType, T.ArrayType)):
        return t
    if isinstance(t, str):
        return parse_signature(f"({t})")[0][0]
    got = from_numba_type(t)
    if got is None:
        raise ValueError(f"cannot read the Numba signature {where!r}: {t!r} is not a type "
                         f"pyptx has (float32, int32, float32[:], ...)")
    return got


def signature_types(sig):
    """One Numba signature (a string, a tuple of argument types, or a Signature object such
    as `void(float32[:])` / `numba.void(numba.float32[:])`) -> (argument types, return type)."""
    if isinstance(sig, str):
        return parse_signature(sig)
    if isinstance(sig, tuple):
        return tuple(_as_type(t, sig) for t in sig), None
    args = getattr(sig, "args", None)
    if isinstance(args, tuple):
        ret = getattr(sig, "return_type", None)
        if ret is not None and not isinstance(ret, (T.ScalarType, T.ArrayType)):
            ret = None if getattr(ret, "name", "none") in ("none", "void") else \
                _as_type(ret, sig)
        return tuple(_as_type(t, sig) for t in args), ret
    raise ValueError(f"cannot read the Numba signature {sig!r}; write it as a string like "
                     f"\"void(float32[:], int32)\", a tuple of types or void(float32[:], ...)")


# ---- cuda.jit -------------------------------------------------------------------------------

class CudaKernel(Kernel):
    """A Kernel launched Numba's way too: `k[grid, block]`, `k[grid, block, stream]`,
    `k[grid, block, stream, shared_mem]`, `k.forall(n)(*args)`.  Given several signatures
    (`cuda.jit(["void(int64[:])", "void(float64[:])"])`) it holds one kernel per signature and
    each launch picks the one its arguments match (as Numba's dispatcher does).  Called from
    another kernel it is a device function, inlined (as Numba compiles a `@cuda.jit` function
    called from a kernel)."""

    callable_from_kernels = True

    def __init__(self, py_func, *, overloads=(), fastmath=False, **kw):
        super().__init__(py_func, fastmath=fastmath, **kw)
        #: [(argument types, Kernel)] of a multi-signature cuda.jit, else empty
        self.overloads = [(args, Kernel(py_func, signature=args, name=self._name,
                                        fastmath=fastmath))
                          for args in overloads]

    @property
    def signatures(self) -> list:
        """The argument types of each signature given to cuda.jit."""
        if self.overloads:
            return [args for args, _ in self.overloads]
        return [self.signature] if self.signature is not None else []

    def __getitem__(self, config):
        if isinstance(config, tuple) and len(config) in (2, 3, 4):
            stream = config[2] if len(config) >= 3 else None
            smem = config[3] if len(config) == 4 else 0
            return _NumbaLaunch(self, config[0], config[1], stream, smem)
        return super().__getitem__(config)

    def forall(self, ntasks: int, tpb: int = 0, stream=0, sharedmem: int = 0):
        """`k.forall(n)(*args)`: a 1-D launch of at least `n` threads (the kernel checks
        `cuda.grid(1) < n`); `tpb` threads per block (default 128, or fewer for a small n)."""
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
        tpb = int(tpb) or max(1, min(128, 32 * ((ntasks + 31) // 32)))
        blocks = (ntasks + tpb - 1) // tpb
        if blocks == 0:
            return lambda *args: None
        return self[blocks, tpb, stream, sharedmem]

    def _select(self, args) -> Kernel:
        """The kernel of the signature `args` match best (self without signatures)."""
        if not self.overloads:
            return self
        best, best_score = None, None
        for types, k in self.overloads:
            score = _match_score(types, args)
            if score is not None and (best_score is None or score < best_score):
                best, best_score = k, score
        if best is None:
            from .errors import LaunchError
            got = ", ".join(_describe(a) for a in args)
            sigs = "; ".join("(" + ", ".join(map(repr, t)) + ")" for t, _ in self.overloads)
            raise LaunchError(f"{self.name}: no signature matches the argument types ({got}); "
                              f"its signatures are {sigs}")
        return best


def _arg_dtype(a):
    dt = getattr(a, "dtype", None)
    if dt is None:
        return None
    try:
        return np.dtype(dt)
    except TypeError:
        s = str(dt).rsplit(".", 1)[-1]       # torch.float32 -> float32
        try:
            return np.dtype(s)
        except TypeError:
            return None


def _describe(a) -> str:
    shape = getattr(a, "shape", None)
    if shape is not None and not isinstance(a, np.generic):
        return f"{_arg_dtype(a)} array with {len(shape)} dimension(s)"
    return type(a).__name__ if not isinstance(a, np.generic) else str(a.dtype)


def _scalar_score(t, a):
    """How well scalar argument `a` converts to ScalarType `t` (0 exact ... 3 unsafe; None:
    not at all)."""
    if isinstance(a, (bool, np.bool_)):
        return 0 if t.is_bool else 2
    if isinstance(a, np.generic):
        dt = a.dtype
        if dt == t.dtype:
            return 0
        if dt.kind == "c" and t.dtype.kind != "c":
            return None
        return 1 if np.can_cast(dt, t.dtype, "safe") else 3
    if isinstance(a, int):
        if t.is_int:
            return 0 if t.dtype == np.int64 else 1
        return 2 if t.is_float or t.dtype.kind == "c" else 3
    if isinstance(a, float):
        if t.is_float:
            return 0 if t.dtype == np.float64 else 1
        return 2 if t.dtype.kind == "c" else 3
    if isinstance(a, complex):
        return 1 if t.dtype.kind == "c" else None
    return None


def _match_score(types, args):
    if len(types) != len(args):
        return None
    total = 0
    for t, a in zip(types, args):
        is_array = hasattr(a, "shape") and not isinstance(a, np.generic)
        if isinstance(t, T.ArrayType):
            if not is_array or len(a.shape) != t.ndim:
                return None
            dt = _arg_dtype(a)
            if dt is not None and dt != t.dtype.dtype:
                return None
            continue
        if is_array:
            return None
        score = _scalar_score(t, a)
        if score is None:
            return None
        total += score
    return total


class _NumbaLaunch(_LaunchConfig):
    __slots__ = ("stream", "smem")

    def __init__(self, kernel, grid, block, stream, smem):
        super().__init__(kernel, grid, block)
        self.stream, self.smem = stream, smem

    def __call__(self, *args, stream=None, shared_mem=None):
        kernel = self.kernel._select(args)
        stream = _host.launch_stream(self.stream if stream is None else stream)
        smem = self.smem if shared_mem is None else shared_mem
        return _LaunchConfig(kernel, self.grid, self.block)(*args, stream=stream,
                                                             shared_mem=smem or 0)


def _annotate(fn, types):
    names = list(inspect.signature(fn).parameters)
    if len(types) != len(names):
        raise ValueError(f"the signature of {fn.__name__} has {len(types)} types for "
                         f"{len(names)} parameters ({', '.join(names)})")
    fn.__annotations__ = {**getattr(fn, "__annotations__", {}), **dict(zip(names, types))}


def _is_signature(x) -> bool:
    return isinstance(x, (str, tuple, list, Signature)) or (
        x is not None and not inspect.isfunction(x) and hasattr(x, "args")
        and hasattr(x, "return_type"))


def jit(fn_or_sig=None, device: bool = False, **options):
    """`@cuda.jit`, `@cuda.jit("void(float32[:])")`, `@cuda.jit((int32[:], int32))`,
    `@cuda.jit(void(float32[:]))`, `@cuda.jit(["void(int64[:])", "void(float64[:])"])` (one
    kernel per signature, picked by the arguments at launch), `@cuda.jit(device=True)`.

    Accepted options: `fastmath` (f32 `/` is `div.full.f32`, `math.sqrt` `sqrt.approx.f32`,
    `math.exp/exp2/log/log2/sin/cos` the `ex2/lg2/sin/cos.approx.f32` forms, as Numba's
    fastmath gives; a*b+c contracts to fma either way: see docs/coming-from-numba.md),
    `opt`/`debug`/`lineinfo`/`cache`/`inline`/`max_registers`/`link`/`boundscheck` (ignored:
    pyptx always inlines device functions, keeps line information and caches in memory).
    Anything else is a TypeError naming it."""
    unknown = set(options) - {"fastmath", "opt", "debug", "lineinfo", "cache", "inline",
                              "max_registers", "link", "boundscheck"}
    if unknown:
        raise TypeError(f"cuda.jit() got option(s) pyptx does not know: {', '.join(sorted(unknown))}")
    if options.get("link"):
        raise TypeError("cuda.jit(link=[...]) is not supported: pyptx compiles Python only "
                        "(no CUDA C / PTX / LTO-IR files to link)")
    sigs = None
    if _is_signature(fn_or_sig):
        sigs = [signature_types(s) for s in fn_or_sig] if isinstance(fn_or_sig, list) \
            else [signature_types(fn_or_sig)]
        fn_or_sig = None
    elif fn_or_sig is not None and not callable(fn_or_sig):
        raise ValueError(f"cannot read the Numba signature {fn_or_sig!r}; write it as a "
                         f"string like \"void(float32[:], int32)\"")
    if sigs and not device:
        for _, ret in sigs:
            if ret is not None:
                raise TypeError(f"a kernel's signature must return void, got {ret!r}; "
                                f"return values need @cuda.jit(device=True)")
    fastmath = bool(options.get("fastmath"))

    def make(fn):
        if sigs is not None and len(sigs) == 1:
            _annotate(fn, sigs[0][0])
        if device:
            return DeviceFunction(fn)
        if sigs is not None and len(sigs) > 1:
            names = list(inspect.signature(fn).parameters)
            for args, _ in sigs:
                if len(args) != len(names):
                    raise ValueError(f"the signature of {fn.__name__} has {len(args)} types "
                                     f"for {len(names)} parameters ({', '.join(names)})")
            return CudaKernel(fn, overloads=[args for args, _ in sigs], fastmath=fastmath)
        return CudaKernel(fn, fastmath=fastmath)
    return make if fn_or_sig is None else make(fn_or_sig)


# ---- host side ------------------------------------------------------------------------------

def to_device(obj, stream=0, copy=True, to=None):
    """`cuda.to_device(a)` -> a `pyptx.DeviceArray` (host memory on the CPU executor);
    `to=d` copies into the existing `d`; `copy=False` allocates without copying.  A `stream`
    is waited for, then the copy is synchronous."""
    from .runtime.device_array import to_device as _to_device
    _host.sync_stream(stream)
    if to is not None:
        to.copy_to_device(obj)
        return to
    arr = np.asarray(obj)
    if not copy:
        return device_array(arr.shape, arr.dtype)
    return _to_device(arr)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An uninitialised DeviceArray (zeros on the CPU executor); `dtype` may be a numpy dtype
    or a type name such as `float32`."""
    if order != "C" or strides is not None:
        raise ValueError("device_array: pyptx arrays are C-contiguous (order='C', no strides)")
    from .runtime.device_array import device_empty
    return device_empty(shape, _host.np_dtype(dtype), api="cuda.device_array()")


def device_array_like(ary, stream=0):
    return device_array(np.shape(ary), np.asarray(ary).dtype if not hasattr(ary, "dtype")
                        else ary.dtype)


# streams, events, host arrays: pyptx/_cuda_host.py
stream, default_stream, event, event_elapsed_time = (
    _host.stream, _host.default_stream, _host.event, _host.event_elapsed_time)
legacy_default_stream, per_thread_default_stream = (
    _host.legacy_default_stream, _host.per_thread_default_stream)
pinned_array, mapped_array, pinned_array_like, mapped_array_like, pinned, mapped = (
    _host.pinned_array, _host.mapped_array, _host.pinned_array_like, _host.mapped_array_like,
    _host.pinned, _host.mapped)
Stream, Event = _host.Stream, _host.Event


def is_cuda_array(obj) -> bool:
    """True for a DeviceArray or an object with `__cuda_array_interface__`."""
    from .runtime.device_array import DeviceArray
    return isinstance(obj, DeviceArray) or hasattr(obj, "__cuda_array_interface__")


def synchronize():
    """Wait until every queued launch and copy has finished, like Numba's `cuda.synchronize()`.

    On the GPU a launch of DeviceArrays (or other device-resident arrays) returns as soon as the
    kernel is queued; this synchronises the context (`cuCtxSynchronize`), and a fault of a
    queued kernel is raised here as a DeviceError.  On the CPU executor launches are
    synchronous and this does nothing."""
    from .runtime.launch import device
    if device() == "gpu":
        from .runtime import streams
        streams.synchronize()


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
    "annotations", "inspect", "re", "np", "dsl", "T", "Intrinsic", "DeviceFunction", "Kernel",
    "none")]
