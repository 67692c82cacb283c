"""The only code that talks to the CUDA driver: a thin layer over `cuda.bindings.driver`.

Why a layer at all: every call returns `(CUresult, *outputs)` and each result must become a
`DeviceError` carrying the driver's error name; the context, the module/function cache and the
kernel-parameter buffers have to live somewhere; and the driver object must be swappable so the
whole GPU path is testable without a GPU (`set_driver(fake)`).

Nothing here runs at import time: `cuda.bindings.driver` is imported and `cuInit(0)` called on the
first GPU use.  Every call that needs a context makes ours current for the calling thread first
(`Context.enter`), so other threads, finalizers and other CUDA libraries are safe.

Devices: one retained primary `Context` per device ordinal, created on first use.  Each thread
has a current device (`select`, `pyptx.use_device`; a new thread starts on device 0, as with the
CUDA runtime); `context()` is the current device's context.

Beside it, on the same contexts: device memory and copies (`driver_memory.py`), streams, events
and `synchronize` (`streams.py`), and the kernel-parameter buffer (`param_packer.py`).
"""
from __future__ import annotations

import os
import threading

from ..errors import DeviceError
from . import gpu_faults

JIT_LOG_BYTES = 16 * 1024
STATIC_SHARED_LIMIT = 48 * 1024     # above this (static + dynamic) a function must opt in

_lock = threading.RLock()
_injected = None                    # a test double installed by set_driver()
_state: dict = {}                   # 'driver', 'count', 'error' (the DeviceError init raised),
                                    # ('ctx_error', ordinal): a context that could not be made
_contexts: dict = {}                # device ordinal -> its Context


class _Selection(threading.local):
    """The calling thread's device: the class attribute (device 0) until the thread selects
    another.  reset() replaces the object, putting every thread back on device 0."""
    ordinal = 0


_selected = _Selection()
_epoch = [0]                        # bumped by reset(): keys of per-driver caches (devices.py)


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
                              f"({e}); pip install cuda-python (cuda-python<13 for a CUDA 12 "
                              f"driver)", error_name="BINDINGS_NOT_FOUND") from None
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
    """Forget every per-process driver state (the contexts of every device with their module
    caches, profiles, the device choice, and every thread's selected device)."""
    global _selected
    with _lock:
        for ctx in _contexts.values():
            ctx.alive = False
        _contexts.clear()
        _state.clear()
        _warned.clear()
        from ..target import CUDA_INITIALISED_IN
        CUDA_INITIALISED_IN[0] = None
        from . import device_array
        device_array._constants.clear()
        _selected = _Selection()
        _epoch[0] += 1
        from . import profile
        profile._profile_cache.clear()
        from . import launch
        launch.invalidate_plans()


# ---- handles → ints ---------------------------------------------------------------------------

_handle_converters: dict = {int: int, type(None): lambda _h: 0}     # type -> its conversion


def handle_int(h) -> int:
    """The C value of a driver handle (CUcontext, CUstream, CUevent, CUmodule, CUfunction,
    CUdeviceptr, CUdevice, ...) or of a plain int; None is 0.  The one place pyptx turns a handle
    into an int.

    cuda-bindings deprecated `int(handle)` for its opaque handle types (12.9.1 / 13.0) in favour of
    `cuda.bindings.utils.get_cuda_native_handle`, which knows those types; the integer types
    (CUdeviceptr, CUdevice), older bindings and test doubles' handles still convert with int().
    The choice is made once per type."""
    conv = _handle_converters.get(type(h))
    if conv is None:
        conv = _handle_converters[type(h)] = _handle_converter(h)
    return conv(h)


def _handle_converter(h):
    try:
        from cuda.bindings.utils import get_cuda_native_handle
        get_cuda_native_handle(h)           # TypeError: a type it does not register
        return get_cuda_native_handle
    except Exception:  # noqa: BLE001 - no cuda.bindings, an older one, an unregistered type
        return int


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
        raise DeviceError(gpu_faults.explain(what, name, _error_string(drv, err)),
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
        raise _call_failed(e) from None
    return int(check(res, "cuDriverGetVersion", drv))


def bindings_version(drv) -> str | None:
    """The cuda-python bindings' version ('13.0.1'); a test double says its own."""
    v = getattr(drv, "bindings_version", None)
    if v is None:
        try:
            import cuda.bindings
            v = cuda.bindings.__version__
        except Exception:  # noqa: BLE001
            return None
    return str(v)


def _call_failed(e: Exception) -> DeviceError:
    """The bindings raised instead of returning a CUresult: no driver library at all (the
    normal case on a machine without a GPU), or one too old to have the entry point."""
    lib_missing = "not found" in str(e).lower() and "function" not in str(e).lower()
    if lib_missing or type(e).__name__ in ("DynamicLibNotFoundError", "LibraryNotFound") \
            or not driver_library_present():
        return DeviceError(f"no CUDA driver: {e}", error_name="DRIVER_NOT_FOUND")
    return DeviceError(f"the CUDA driver library could not be used: {e}",
                       error_name="DRIVER_UNUSABLE")


# ---- the calling thread's device ---------------------------------------------------------------

def current_ordinal() -> int:
    """The device ordinal the calling thread selected (0 unless `select` said otherwise)."""
    return _selected.ordinal


def select(ordinal: int) -> int:
    """Make `ordinal` the calling thread's device (unchecked: callers validate); returns the
    previous one."""
    sel = _selected
    prev = sel.ordinal
    sel.ordinal = int(ordinal)
    return prev


def device_count() -> int:
    """How many CUDA devices the driver reports (initialising it).  Raises DeviceError."""
    count = _state.get("count")
    if count is not None:
        return count
    with _lock:
        if "error" in _state:
            raise _state["error"]
        if "count" not in _state:
            try:
                _state["count"] = _init()
            except DeviceError as e:
                _state["error"] = e
                raise
    return _state["count"]


#: what to do about each way the driver can be unusable (DeviceError.error_name -> the fix)
_FIXES = {
    "CUDA_ERROR_NO_DEVICE": "no CUDA device is visible to this process: check nvidia-smi, "
                            "CUDA_VISIBLE_DEVICES, and that a container was started with the "
                            "GPU passed through (docker run --gpus all)",
    "CUDA_ERROR_INSUFFICIENT_DRIVER": "the NVIDIA driver is older than the CUDA release the "
                                      "cuda-python bindings need: pip install "
                                      "'cuda-python<13' for a CUDA 12 driver, or update the "
                                      "NVIDIA driver",
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": "the NVIDIA driver is older than the cuda-python "
                                             "bindings need: pip install 'cuda-python<13' for "
                                             "a CUDA 12 driver, or update the NVIDIA driver",
    "DRIVER_UNUSABLE": "the NVIDIA driver library is installed but its entry points could not be "
                       "used (often a driver older than cuda-python needs): pip install "
                       "'cuda-python<13' for a CUDA 12 driver, or update the NVIDIA driver",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "the CUDA forward-compatibility package does "
                                                 "not support this GPU: install cuda-python "
                                                 "matching the installed driver",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the NVIDIA kernel module and the user-space driver "
                                         "library have different versions: reboot, or "
                                         "reinstall the NVIDIA driver",
    "CUDA_ERROR_NOT_PERMITTED": "this process may not use the GPU (permissions of "
                                "/dev/nvidia*, or a container without GPU access)",
    "BINDINGS_NOT_FOUND": "pip install cuda-python (cuda-python<13 for a CUDA 12 driver)",
    "DRIVER_NOT_FOUND": "install the NVIDIA driver to run on a GPU; until then the CPU executor "
                        "runs every kernel",
    "GPU_TOO_OLD": "pyptx needs a GPU of compute capability 7.5 (sm_75) or newer",
}


def fix_for(error_name: str | None) -> str:
    """The advice for a DeviceError's `error_name` (generic when there is no specific one)."""
    return _FIXES.get(error_name or "", "check that nvidia-smi works; see docs/launching.md, "
                                         "'Which cuda-python for which driver'")


def driver_library_present() -> bool:
    """Is an NVIDIA driver library (libcuda) installed, whether or not it works?"""
    import ctypes
    import sys
    names = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
    for name in names:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def warn_fallback(err: DeviceError) -> None:
    """`PYPTX_DEVICE=auto` is falling back to the CPU executor because of `err`: issue one
    DeviceWarning per process (until `reset()`) when a driver library exists, none when there
    is no NVIDIA driver at all (a laptop, CI: the CPU executor is the expected device)."""
    if _warned:
        return
    name = err.error_name
    if name == "DRIVER_NOT_FOUND":
        return
    if name == "BINDINGS_NOT_FOUND" and not driver_library_present():
        return
    _warned.append(True)
    import warnings
    from ..errors import DeviceWarning
    warnings.warn(fallback_message(err), DeviceWarning, stacklevel=4)


def with_fix(err: DeviceError) -> str:
    """`str(err)`, followed by what to do about it unless the message already says."""
    text = str(err)
    fix = fix_for(err.error_name)
    if fix not in text and "pip install" not in text:
        text += f"; fix: {fix}"
    return text


def fallback_message(err: DeviceError) -> str:
    """The text of the fallback warning: the reason and fix `python -m pyptx info` prints."""
    return (f"pyptx is running kernels on the CPU executor (much slower than a GPU) because the "
            f"GPU cannot be used: {with_fix(err)}. Set PYPTX_DEVICE=cpu to choose the CPU "
            f"executor explicitly (no warning), or PYPTX_DEVICE=gpu to make this an error.")


_warned: list = []                  # non-empty once the fallback warning was issued


def context(ordinal: int | None = None) -> "Context":
    """The primary context of `ordinal` (default: the calling thread's device), retained on
    first use.

    Raises DeviceError saying why there is none (no driver, no device, init failure, a forked
    child of a process that used CUDA, an ordinal the driver does not have); failures are
    remembered so later calls are cheap."""
    if ordinal is None:
        ordinal = current_ordinal()
    ctx = _contexts.get(ordinal)
    if ctx is not None:
        return ctx
    with _lock:
        count = device_count()
        ctx = _contexts.get(ordinal)
        if ctx is not None:
            return ctx
        key = ("ctx_error", ordinal)
        if key in _state:
            raise _state[key]
        if not 0 <= ordinal < count:
            raise DeviceError(f"there is no CUDA device {ordinal}: the driver reports {count} "
                              f"device{'s' if count != 1 else ''} (ordinals 0 to {count - 1})",
                              error_name="CUDA_ERROR_INVALID_DEVICE")
        try:
            ctx = _contexts[ordinal] = Context(get_driver(), ordinal)
        except DeviceError as e:
            _state[key] = e
            raise
    return ctx


def contexts() -> list:
    """The contexts created so far (live ones), by ordinal."""
    return [c for _o, c in sorted(_contexts.items())]


def _init() -> int:
    """Check the driver and bindings, cuInit, and return the number of devices (>= 1)."""
    drv = get_driver()
    version = driver_version()           # DeviceError "no CUDA driver" when libcuda is missing
    bv = bindings_version(drv)
    if bv and bv.split(".")[0].isdigit() and int(bv.split(".")[0]) > version // 1000:
        major = bv.split(".")[0]
        raise DeviceError(f"cuda-python {bv} needs a CUDA {major}.x driver, but the installed "
                          f"driver is CUDA {version // 1000}.{version % 1000 // 10}: install "
                          f"cuda-python<{major} (pip install 'cuda-python<{major}') or update "
                          f"the NVIDIA driver", error_name="CUDA_ERROR_INSUFFICIENT_DRIVER")
    try:
        res = drv.cuInit(0)
    except Exception as e:  # noqa: BLE001 - libcuda missing: DynamicLibNotFoundError, OSError
        raise _call_failed(e) from None
    if res[0] == drv.CUresult.CUDA_SUCCESS:
        from ..target import CUDA_INITIALISED_IN
        CUDA_INITIALISED_IN[0] = os.getpid()
    if res[0] != drv.CUresult.CUDA_SUCCESS:
        name = error_name(drv, res[0])
        why = "no CUDA device" if name == "CUDA_ERROR_NO_DEVICE" else "the CUDA driver failed"
        raise DeviceError(f"{why}: cuInit returned {name}; {fix_for(name)}", error_name=name)
    count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount", drv)
    if int(count) < 1:
        raise DeviceError(f"no CUDA device: the driver reports 0 devices; "
                          f"{fix_for('CUDA_ERROR_NO_DEVICE')}", error_name="CUDA_ERROR_NO_DEVICE")
    return int(count)


def device_properties(ordinal: int) -> dict:
    """name, compute capability and total memory of a device, straight from the driver (no
    context is created).  Raises DeviceError."""
    drv = get_driver()
    dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet", drv)
    raw = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName", drv)
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
    cc = []
    for what in ("MAJOR", "MINOR"):
        attr = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{what}")
        cc.append(int(check(drv.cuDeviceGetAttribute(attr, dev),
                            f"cuDeviceGetAttribute(COMPUTE_CAPABILITY_{what})", drv)))
    total = int(check(drv.cuDeviceTotalMem(dev), "cuDeviceTotalMem", drv))
    return {"name": str(raw).strip(), "cc": tuple(cc), "total_memory": total}


def ordinal_of_context(handle) -> int | None:
    """The device of a CUDA context handle: a primary context pyptx retained is looked up;
    another one is asked (pushed, cuCtxGetDevice, popped).  None when that fails."""
    h = int(handle or 0)
    if not h:
        return None
    for ctx in list(_contexts.values()):
        if ctx.handle_int == h:
            return ctx.ordinal
    drv = get_driver()
    get_device = getattr(drv, "cuCtxGetDevice", None)
    if get_device is None:
        return None
    try:
        if drv.cuCtxPushCurrent(handle)[0] != drv.CUresult.CUDA_SUCCESS:
            return None
    except Exception:  # noqa: BLE001 - a handle the driver refuses
        return None
    try:
        res = get_device()
        return int(res[1]) if res[0] == drv.CUresult.CUDA_SUCCESS else None
    finally:
        drv.cuCtxPopCurrent()


def _after_fork_in_child() -> None:
    """CUDA cannot be used in a child forked after the parent initialised it: say so clearly
    (instead of CUDA_ERROR_INITIALIZATION_ERROR at some later call), and never free the
    parent's memory from the child.  cuInit alone (the compiler asks device 0's arch before any
    context exists) is enough to make CUDA unusable in the child."""
    from ..target import CUDA_INITIALISED_IN
    initialised = CUDA_INITIALISED_IN[0] is not None or "count" in _state
    if not _contexts and not initialised:
        return
    for ctx in _contexts.values():
        ctx.alive = False
    _contexts.clear()
    _state.clear()
    _state["error"] = DeviceError(
        "this process was forked after its parent used the GPU, and CUDA cannot be used in "
        "such a child; start worker processes with multiprocessing's 'spawn' (or "
        "'forkserver') method, or do all GPU work in the children",
        error_name="CUDA_ERROR_INITIALIZATION_ERROR")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
    """A retained primary context plus everything cached in it (modules, functions, the
    staging-memory pool, internal events, work whose completion releases something).

    The current context is per thread and other libraries (CuPy, PyTorch) switch it, so every
    driver call that needs it runs between `enter()` and `leave()`: one cuCtxGetCurrent; if no
    context is current in this thread ours is made current (cuCtxSetCurrent), if another is,
    ours is pushed for the call and popped after (the other library's state is left as found).
    """

    def __init__(self, drv, ordinal: int):
        self.drv = drv
        self.ordinal = ordinal
        self.device = check(drv.cuDeviceGet(ordinal), "cuDeviceGet", drv)
        self.handle = check(drv.cuDevicePrimaryCtxRetain(self.device),
                            "cuDevicePrimaryCtxRetain", drv)
        self.handle_int = handle_int(self.handle)
        self.success = drv.CUresult.CUDA_SUCCESS
        self.functions: dict = {}      # (ptx text, entry) -> Function
        self.modules: dict = {}        # ptx text -> CUmodule
        self.alive = True
        self.pid = os.getpid()
        from .devmem import MemoryPool
        self.pool = MemoryPool(self)
        #: the stream handle pyptx's "default stream" work goes to: 0, or CU_STREAM_LEGACY (1)
        #: when cuda-python runs in per-thread default stream mode, where handle 0 is a
        #: different stream in every thread (pool reuse and ordering assume one home stream)
        self.home = home_stream_handle()
        self._events: list = []        # idle internal events (timing disabled)
        self.deferred: list = []       # (event, callbacks): run once the event has completed
        self._deferred_lock = threading.Lock()
        pushed = self.enter()          # a first check that the context is usable here
        self.leave(pushed)

    # -- the current context ------------------------------------------------------------------
    def enter(self) -> bool:
        """Make this context current for the calling thread; True when it was pushed (then
        `leave(True)` pops it).  Raises DeviceError."""
        drv = self.drv
        res = drv.cuCtxGetCurrent()
        if res[0] == self.success:
            cur = handle_int(res[1])
            if cur == self.handle_int:
                return False
            if cur == 0:
                check(drv.cuCtxSetCurrent(self.handle), "cuCtxSetCurrent", drv)
                return False
        check(drv.cuCtxPushCurrent(self.handle), "cuCtxPushCurrent", drv)
        return True

    def leave(self, pushed: bool) -> None:
        if pushed:
            self.drv.cuCtxPopCurrent()

    def call(self, what: str, fn, *args):
        """`check(fn(*args))` with this context current."""
        pushed = self.enter()
        try:
            return check(fn(*args), what, self.drv)
        finally:
            if pushed:
                self.drv.cuCtxPopCurrent()

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

    # -- internal events and deferred work ------------------------------------------------------
    def event(self):
        """An idle internal event (timing disabled); give it back with `idle_event`."""
        with self._deferred_lock:       # launches from several threads share the idle list
            ev = self._events.pop() if self._events else None
        if ev is not None:
            return ev
        flags = int(getattr(getattr(self.drv, "CUevent_flags", None), "CU_EVENT_DISABLE_TIMING",
                            2))
        return self.call("cuEventCreate", self.drv.cuEventCreate, flags)

    def idle_event(self, ev) -> None:
        with self._deferred_lock:
            self._events.append(ev)

    def after(self, stream, callbacks: list) -> None:
        """Run `callbacks` once the work queued on `stream` so far has completed (checked at the
        next launch or synchronise: `reap()`).  Caller holds the context current."""
        ev = self.event()
        try:
            check(self.drv.cuEventRecord(ev, stream or self.home), "cuEventRecord", self.drv)
        except DeviceError:
            self.idle_event(ev)
            self.synchronize_all_quietly()
            run_all(callbacks)          # could not track completion: waited for everything
            return
        with self._deferred_lock:
            self.deferred.append((ev, callbacks))

    def synchronize_all_quietly(self) -> None:
        try:
            self.drv.cuCtxSynchronize()
        except Exception:  # noqa: BLE001 - best effort before releasing memory to its owner
            pass

    def reap(self, wait: bool = False) -> None:
        """Run the callbacks of deferred work that has completed (all of it when `wait`).
        Every callback runs even if one fails; the first failure is raised after."""
        if not self.deferred:
            return
        not_ready = getattr(self.drv.CUresult, "CUDA_ERROR_NOT_READY", None)
        keep, done = [], []
        with self._deferred_lock:
            for ev, callbacks in self.deferred:
                res = (self.drv.cuEventSynchronize if wait else self.drv.cuEventQuery)(ev)
                if res[0] == not_ready:
                    keep.append((ev, callbacks))
                else:
                    done.append((ev, callbacks))
            self.deferred = keep
        run_all([cb for ev, cbs in done for cb in cbs] + [lambda e=ev: self.idle_event(e)
                                                          for ev, _ in done])

    # -- modules ---------------------------------------------------------------------------
    def function(self, ptx: str, entry: str) -> "Function":
        """The CUfunction for `entry` in `ptx`, JIT-loading the module on first use."""
        key = (ptx, entry)
        fn = self.functions.get(key)
        if fn is None:
            with _lock:
                fn = self.functions.get(key)
                if fn is None:
                    from .graph import outside_capture
                    pushed = self.enter()
                    try:
                        with outside_capture():      # first use inside a graph: setup work
                            module = self.modules.get(ptx)
                            if module is None:
                                module = self.modules[ptx] = self._load_module(ptx, entry)
                            handle = check(self.drv.cuModuleGetFunction(module, entry.encode()),
                                           f"cuModuleGetFunction({entry})", self.drv)
                            fn = self.functions[key] = Function(self, handle, entry)
                    finally:
                        self.leave(pushed)
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
            hint = _LOAD_HINTS.get(name)
            raise DeviceError(f"the driver could not load the PTX of kernel '{entry}': {name}"
                              + (f": {hint}" if hint else "")
                              + (f"\nJIT log:\n{log}" if log else ""),
                              error_name=name, jit_log=log)
        return res[1]


#: what a cuModuleLoadDataEx failure means and what to do, where the error name does not say
_LOAD_HINTS = {
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND":
        "the NVIDIA driver's PTX JIT compiler library (libnvidia-ptxjitcompiler.so.1) is missing "
        "or not visible to this process, and pyptx hands the driver PTX to compile.  Install "
        "the driver package that ships it, of the same version as the driver (Debian/Ubuntu: "
        "libnvidia-compute-<driver branch>, e.g. libnvidia-compute-550; RHEL/Fedora: "
        "nvidia-driver-cuda-libs; Jetson: nvidia-l4t-3d-core); in a container, let the NVIDIA "
        "Container Toolkit mount the driver's compute libraries (docker run --gpus all with "
        "NVIDIA_DRIVER_CAPABILITIES including 'compute') or mount the host's "
        "libnvidia-ptxjitcompiler.so.* into the container's library path",
}


def run_all(actions) -> None:
    """Call every action even when some fail; raise the first failure afterwards."""
    first = None
    for act in actions:
        try:
            act()
        except BaseException as e:  # noqa: BLE001 - collected, re-raised below
            if first is None:
                first = e
    if first is not None:
        raise first


def _c_string(buf: bytearray) -> str:
    return bytes(buf).split(b"\0", 1)[0].decode(errors="replace").strip()


class Function:
    """A loaded kernel: its handle, the driver's limits for it, and how much dynamic shared
    memory it has opted into."""

    def __init__(self, ctx: Context, handle, entry: str):
        self.ctx = ctx
        self.handle = handle
        self.entry = entry
        self.dynamic_shared_optin = 0
        fa = ctx.drv.CUfunction_attribute
        #: the most threads a block of this kernel may have (fewer than 1024 when registers
        #: limit it) and its static shared memory, as the driver counts them
        self.max_threads = int(check(ctx.drv.cuFuncGetAttribute(
            fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, handle),
            f"cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) for '{entry}'", ctx.drv))
        self.static_shared = int(check(ctx.drv.cuFuncGetAttribute(
            fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, handle),
            f"cuFuncGetAttribute(SHARED_SIZE_BYTES) for '{entry}'", ctx.drv))

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
        """cuLaunchKernel (the caller holds the context current)."""
        drv = self.ctx.drv
        res = drv.cuLaunchKernel(self.handle, grid[0], grid[1], grid[2], block[0], block[1],
                                 block[2], shared_mem, stream, params_address, 0)
        if res[0] != self.ctx.success:
            check(res, f"cuLaunchKernel({self.entry})", drv)
        gpu_faults.last_kernel[0] = self.entry


#: CU_STREAM_LEGACY: the legacy default stream, named explicitly
STREAM_LEGACY = 1


def per_thread_default_stream() -> bool:
    """cuda-python's per-thread default stream mode (`CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM
    =1`, read by the bindings when they load; any other value is legacy mode, as in
    cuda-bindings >= 13.2.1)."""
    return os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0").strip() == "1"


def home_stream_handle() -> int:
    """The handle pyptx uses for "the default stream": 0, or CU_STREAM_LEGACY in per-thread
    mode — so pyptx's own work stays on one stream that every thread shares and that every
    blocking stream (per-thread default streams included) synchronises with."""
    return STREAM_LEGACY if per_thread_default_stream() else 0


# ---- public names that moved ------------------------------------------------------------------

#: Public API: `pyptx.runtime.driver.Stream`, `.Event`, `.synchronize` and `.free_cached_memory`
#: were documented here before streams.py and driver_memory.py were split off (and user code and
#: benchmarks name them so); resolved on first use, since those modules import this one.
_MOVED = {"Stream": "streams", "Event": "streams", "synchronize": "streams",
          "free_cached_memory": "driver_memory"}


def __getattr__(name):
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"{__package__}.{home}"), name)
