"""The only code that talks to the CUDA driver: a thin layer over `cuda.bindings.driver`.

Why a layer at all: every call returns `(CUresult, *outputs)` and each result must become a
`DeviceError` carrying the driver's error name; the context, the module/function cache and the
kernel-parameter buffers have to live somewhere; and the driver object must be swappable so the
whole GPU path is testable without a GPU (`set_driver(fake)`).

Nothing here runs at import time: `cuda.bindings.driver` is imported and `cuInit(0)` called on the
first GPU use.
"""
from __future__ import annotations

import ctypes
import struct
import threading

from ..errors import DeviceError

JIT_LOG_BYTES = 16 * 1024
STATIC_SHARED_LIMIT = 48 * 1024     # above this (static + dynamic) a function must opt in

_lock = threading.RLock()
_injected = None                    # a test double installed by set_driver()
_state: dict = {}                   # 'driver', 'ctx', 'error' (the DeviceError init raised)


# ---- the driver object ------------------------------------------------------------------------

def get_driver():
    """The driver module in use: the injected fake, else `cuda.bindings.driver` (imported here).

    Raises DeviceError when cuda-python is not installed."""
    if _injected is not None:
        return _injected
    drv = _state.get("driver")
    if drv is None:
        try:
            import cuda.bindings.driver as drv
        except Exception as e:  # noqa: BLE001 - ImportError or a broken install
            raise DeviceError(f"no CUDA driver bindings: cannot import cuda.bindings.driver "
                              f"({e}); pip install cuda-python") from None
        _state["driver"] = drv
    return drv


def set_driver(drv):
    """Install a driver object (a test fake, or None for the real one); returns the previous.

    Forgets the context, caches and the cached device decision, so the next use starts over."""
    global _injected
    with _lock:
        prev = _injected
        _injected = drv
        reset()
        return prev


def reset() -> None:
    """Forget every per-process driver state (context, module cache, profile, device choice)."""
    with _lock:
        _state.clear()
        from . import profile
        profile._profile_cache.clear()
        from . import launch
        launch.invalidate_plans()


# ---- results → exceptions ---------------------------------------------------------------------

def error_name(drv, err) -> str:
    """`CUDA_ERROR_...` for a CUresult (cuGetErrorName), falling back to the enum's own name."""
    try:
        res = drv.cuGetErrorName(err)
        if res[0] == drv.CUresult.CUDA_SUCCESS and res[1]:
            name = res[1]
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - the name is only decoration
        pass
    return getattr(err, "name", None) or f"CUresult {int(err)}"


def _error_string(drv, err) -> str:
    try:
        res = drv.cuGetErrorString(err)
        if res[0] == drv.CUresult.CUDA_SUCCESS and res[1]:
            s = res[1]
            return s.decode() if isinstance(s, bytes) else str(s)
    except Exception:  # noqa: BLE001
        pass
    return ""


def check(res, what: str, drv=None):
    """Unpack a `(CUresult, *outputs)` tuple: the output(s), or DeviceError naming the error."""
    drv = drv or get_driver()
    err = res[0]
    if err != drv.CUresult.CUDA_SUCCESS:
        name = error_name(drv, err)
        desc = _error_string(drv, err)
        raise DeviceError(f"{what} failed: {name}" + (f" ({desc})" if desc else ""),
                          error_name=name)
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


# ---- init and the context ---------------------------------------------------------------------

def driver_version() -> int:
    """cuDriverGetVersion: 1000*major + 10*minor (12080 = CUDA 12.8).  Needs no device."""
    drv = get_driver()
    try:
        res = drv.cuDriverGetVersion()
    except Exception as e:  # noqa: BLE001 - no libcuda.so: the bindings raise, not return
        raise DeviceError(f"no CUDA driver: {e}", error_name="DRIVER_NOT_FOUND") from None
    return int(check(res, "cuDriverGetVersion", drv))


def context() -> "Context":
    """The process's CUDA context (primary context of device 0), created on first use.

    Raises DeviceError saying why there is none (no driver, no device, init failure); the
    failure is remembered so later calls are cheap."""
    ctx = _state.get("ctx")
    if ctx is not None:
        return ctx
    with _lock:
        if "error" in _state:
            raise _state["error"]
        if "ctx" not in _state:
            try:
                _state["ctx"] = _create_context()
            except DeviceError as e:
                _state["error"] = e
                raise
    return _state["ctx"]


def _create_context() -> "Context":
    drv = get_driver()
    try:
        res = drv.cuInit(0)
    except Exception as e:  # noqa: BLE001 - libcuda missing: DynamicLibNotFoundError, OSError
        raise DeviceError(f"no CUDA driver: {e}", error_name="DRIVER_NOT_FOUND") from None
    if res[0] != drv.CUresult.CUDA_SUCCESS:
        name = error_name(drv, res[0])
        why = "no CUDA device" if name == "CUDA_ERROR_NO_DEVICE" else "the CUDA driver failed"
        raise DeviceError(f"{why}: cuInit returned {name}", error_name=name)
    count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount", drv)
    if int(count) < 1:
        raise DeviceError("no CUDA device: the driver reports 0 devices",
                          error_name="CUDA_ERROR_NO_DEVICE")
    return Context(drv, 0)


def probe() -> str | None:
    """None when a usable GPU is present, else the reason there is none.  Never raises."""
    try:
        context()
        return None
    except DeviceError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"the CUDA driver failed: {e}"


#: profile key -> CUdevice_attribute name
_ATTRIBUTES = {
    "cc_major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
    "cc_minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
    "sm_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "max_shared": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK",
    "max_shared_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "warp_size": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "max_threads": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
}


class Context:
    """A retained primary context plus everything cached in it (modules, functions)."""

    def __init__(self, drv, ordinal: int):
        self.drv = drv
        self.device = check(drv.cuDeviceGet(ordinal), "cuDeviceGet", drv)
        self.handle = check(drv.cuDevicePrimaryCtxRetain(self.device),
                            "cuDevicePrimaryCtxRetain", drv)
        self._current = threading.local()
        self.make_current()
        self.functions: dict = {}      # (ptx text, entry) -> Function
        self.modules: dict = {}        # ptx text -> CUmodule
        self.alive = True

    def make_current(self) -> None:
        """cuCtxSetCurrent once per thread (the current context is per thread)."""
        if not getattr(self._current, "set", False):
            check(self.drv.cuCtxSetCurrent(self.handle), "cuCtxSetCurrent", self.drv)
            self._current.set = True

    def attributes(self) -> dict:
        drv = self.drv
        out = {}
        for key, enum_name in _ATTRIBUTES.items():
            attr = getattr(drv.CUdevice_attribute, enum_name)
            out[key] = int(check(drv.cuDeviceGetAttribute(attr, self.device),
                                 f"cuDeviceGetAttribute({enum_name})", drv))
        return out

    def name(self) -> str:
        raw = check(self.drv.cuDeviceGetName(256, self.device), "cuDeviceGetName", self.drv)
        if isinstance(raw, (bytes, bytearray)):
            raw = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        return str(raw).strip()

    # -- modules ---------------------------------------------------------------------------
    def function(self, ptx: str, entry: str) -> "Function":
        """The CUfunction for `entry` in `ptx`, JIT-loading the module on first use."""
        key = (ptx, entry)
        fn = self.functions.get(key)
        if fn is None:
            with _lock:
                fn = self.functions.get(key)
                if fn is None:
                    self.make_current()
                    module = self.modules.get(ptx)
                    if module is None:
                        module = self.modules[ptx] = self._load_module(ptx, entry)
                    handle = check(self.drv.cuModuleGetFunction(module, entry.encode()),
                                   f"cuModuleGetFunction({entry})", self.drv)
                    fn = self.functions[key] = Function(self, handle, entry)
        return fn

    def _load_module(self, ptx: str, entry: str):
        drv = self.drv
        opt = drv.CUjit_option
        err_log = bytearray(JIT_LOG_BYTES)
        info_log = bytearray(JIT_LOG_BYTES)
        options = [opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   opt.CU_JIT_LOG_VERBOSE]
        values = [err_log, JIT_LOG_BYTES, info_log, JIT_LOG_BYTES, 1]
        res = drv.cuModuleLoadDataEx(ptx.encode() + b"\0", len(options), options, values)
        if res[0] != drv.CUresult.CUDA_SUCCESS:
            name = error_name(drv, res[0])
            log = _c_string(err_log) or _c_string(info_log)
            raise DeviceError(f"the driver could not load the PTX of kernel '{entry}': {name}"
                              + (f"\nJIT log:\n{log}" if log else ""),
                              error_name=name, jit_log=log)
        return res[1]


def _c_string(buf: bytearray) -> str:
    return bytes(buf).split(b"\0", 1)[0].decode(errors="replace").strip()


class Function:
    """A loaded kernel: its handle and how much dynamic shared memory it has opted into."""

    def __init__(self, ctx: Context, handle, entry: str):
        self.ctx = ctx
        self.handle = handle
        self.entry = entry
        self.dynamic_shared_optin = 0

    def allow_dynamic_shared(self, static_bytes: int, dynamic_bytes: int) -> None:
        """Opt in (cuFuncSetAttribute) when static + dynamic shared memory exceeds 48 KiB."""
        if static_bytes + dynamic_bytes <= STATIC_SHARED_LIMIT:
            return
        if dynamic_bytes <= self.dynamic_shared_optin:
            return
        drv = self.ctx.drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(drv.cuFuncSetAttribute(self.handle, attr, dynamic_bytes),
              f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={dynamic_bytes}) for "
              f"'{self.entry}'", drv)
        self.dynamic_shared_optin = dynamic_bytes

    def launch(self, grid, block, shared_mem: int, stream, params_address) -> None:
        drv = self.ctx.drv
        res = drv.cuLaunchKernel(self.handle, grid[0], grid[1], grid[2], block[0], block[1],
                                 block[2], shared_mem, stream, params_address, 0)
        if res[0] != drv.CUresult.CUDA_SUCCESS:
            check(res, f"cuLaunchKernel({self.entry})", drv)


# ---- kernel parameter packing -----------------------------------------------------------------

#: PTX .param type -> struct code.  b16 carries f16 here (see architecture.md); a packer built
#: with `half_params` packs those as IEEE half ('e').
_STRUCT_CODE = {
    "u64": "Q", "s64": "q", "b64": "Q", "f64": "d",
    "u32": "I", "s32": "i", "b32": "I", "f32": "f",
    "u16": "H", "s16": "h", "b16": "H", "f16": "e",
    "u8": "B", "s8": "b", "b8": "B", "pred": "B",
}


class ParamPacker:
    """The `kernelParams` array for one compiled kernel, laid out once.

    One buffer holds every parameter at its natural alignment; a `void*[]` points at each.
    Per launch only `pack(values)` runs: a single `struct.pack_into`.  Not re-entrant across
    threads launching the same kernel at the same time (the driver copies the values during
    cuLaunchKernel, so sequential reuse is safe).
    """

    def __init__(self, params, half_params=()):
        fmt = ["<"]
        offsets = []
        off = 0
        for p in params:
            code = "e" if p.name in half_params else _STRUCT_CODE.get(p.ptx_type)
            if code is None:
                raise DeviceError(f"cannot pass a .param of type .{p.ptx_type} ('{p.name}')")
            size = struct.calcsize(code)
            pad = (-off) % size
            fmt.append("x" * pad + code)
            off += pad
            offsets.append(off)
            off += size
        self.struct = struct.Struct("".join(fmt))
        self.offsets = offsets
        self.sizes = [struct.calcsize(f[-1]) for f in fmt[1:]]
        self.buffer = ctypes.create_string_buffer(max(self.struct.size, 8))
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self.pointers) if offsets else 0

    def pack(self, values) -> int:
        """Write the values; returns the `void**` address to pass as kernelParams."""
        self.struct.pack_into(self.buffer, 0, *values)
        return self.address


# ---- memory, streams, events ------------------------------------------------------------------

def mem_alloc(nbytes: int) -> int:
    ctx = context()
    ctx.make_current()
    return int(check(ctx.drv.cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})", ctx.drv))


def mem_free(ptr: int, ctx: "Context | None" = None) -> None:
    """Free device memory; a no-op when `ctx` (the allocating context) is no longer current."""
    current = _state.get("ctx")
    if current is None or not ptr or (ctx is not None and ctx is not current):
        return                       # the context was reset: nothing left to free
    check(current.drv.cuMemFree(ptr), "cuMemFree", current.drv)


def memcpy_htod(dst: int, src_host: int, nbytes: int, stream=None) -> None:
    drv = context().drv
    if stream is None:
        check(drv.cuMemcpyHtoD(dst, src_host, nbytes), "cuMemcpyHtoD", drv)
    else:
        check(drv.cuMemcpyHtoDAsync(dst, src_host, nbytes, stream), "cuMemcpyHtoDAsync", drv)


def memcpy_dtoh(dst_host: int, src: int, nbytes: int, stream=None) -> None:
    drv = context().drv
    if stream is None:
        check(drv.cuMemcpyDtoH(dst_host, src, nbytes), "cuMemcpyDtoH", drv)
    else:
        check(drv.cuMemcpyDtoHAsync(dst_host, src, nbytes, stream), "cuMemcpyDtoHAsync", drv)


def synchronize(stream=None) -> None:
    """Wait for `stream` (or the whole context)."""
    drv = context().drv
    if stream is None:
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize", drv)
    else:
        check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize", drv)


class Stream:
    """A CUDA stream owned by pyptx; pass it as `k[g, b](..., stream=s)`."""

    def __init__(self):
        ctx = context()
        ctx.make_current()
        self.handle = check(ctx.drv.cuStreamCreate(0), "cuStreamCreate", ctx.drv)

    def synchronize(self) -> None:
        synchronize(self.handle)

    def close(self) -> None:
        if self.handle is not None and _state.get("ctx") is not None:
            drv = _state["ctx"].drv
            check(drv.cuStreamDestroy(self.handle), "cuStreamDestroy", drv)
        self.handle = None

    def __cuda_stream__(self):
        return (0, int(self.handle))


class Event:
    """A timing event: `e0.record(); ...; e1.record(); e1.elapsed_ms(e0)`."""

    def __init__(self):
        ctx = context()
        ctx.make_current()
        self.handle = check(ctx.drv.cuEventCreate(0), "cuEventCreate", ctx.drv)

    def record(self, stream=None) -> None:
        drv = context().drv
        check(drv.cuEventRecord(self.handle, stream_handle(stream)), "cuEventRecord", drv)

    def synchronize(self) -> None:
        drv = context().drv
        check(drv.cuEventSynchronize(self.handle), "cuEventSynchronize", drv)

    def elapsed_ms(self, start: "Event") -> float:
        """Milliseconds from `start` to this event (synchronises on this event)."""
        self.synchronize()
        drv = context().drv
        return float(check(drv.cuEventElapsedTime(start.handle, self.handle),
                           "cuEventElapsedTime", drv))


def stream_handle(stream):
    """Whatever the user passed as `stream=` → something cuLaunchKernel accepts.

    None (the default stream), an int handle, a driver CUstream, a pyptx `Stream`, or any object
    with `__cuda_stream__` (cuda.core, CuPy ≥ 13), `.cuda_stream` (PyTorch) or `.ptr` (CuPy)."""
    if stream is None or isinstance(stream, int):
        return stream
    if isinstance(stream, Stream):
        return stream.handle
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    return stream                    # a CUstream from cuda.bindings: pass through
