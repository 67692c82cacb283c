"""A stand-in for `cuda.bindings.driver`, for testing the GPU path without a GPU.

It implements the subset pyptx uses with the same calling convention (every call returns
`(CUresult, *outputs)`, enums are the real ones from cuda.bindings), records every call, keeps
"device memory" in numpy byte buffers, reads `kernelParams` through the real `void**` the code
under test built, and decodes each parameter with the sizes the loaded PTX's `.param` list gives.
A launch runs the loaded module's PTX for its entry on pyptx's CPU executor, on the fake's device
memory (`FakeDriver.execute`), so GPU-mode tests see real results; a test can instead register a
Python "kernel body" per entry name to act on device memory.  A fault (an out-of-bounds access)
makes the context sticky-failed with CUDA_ERROR_ILLEGAL_ADDRESS, reported by the next
synchronising call, as on a GPU.  `record=False` (benchmarks) neither logs nor runs anything.

Where it matters it behaves like the real driver, so bugs that only hardware would show fail
here too: the current context is per thread (a call that needs one fails with
CUDA_ERROR_INVALID_CONTEXT in a thread that has none); kernels, async copies and event records
are queued and run only when something waits (a stream/context/event synchronise, a synchronous
copy, cuMemFree), so results are invisible until then; launches are validated (grid/block
limits, the function's register-limited MAX_THREADS_PER_BLOCK, shared memory, parameter bytes);
cuModuleLoadDataEx runs ptxas on the PTX for the device's arch when one is installed and fails
with its log like the JIT; every failure is the CUresult the real driver returns.  The queue runs
in submission order, which is one legal order, so races *between* streams are not detected.

FakeDriver is assembled from mixins by what they fake: streams and events (fake_streams.py), the
tensor-map encoder (fake_tensormap.py) and the bridge that runs a launch's PTX on the CPU
executor (fake_exec.py, with `FakeFault`); stream capture and graphs are fake_graph.py's
`GraphFakeDriver`.
"""
from __future__ import annotations

import ctypes
import re
import struct
import threading

import numpy as np
from cuda.bindings import driver as _real

from fake_exec import ExecutorBridge, FakeFault
from fake_streams import StreamsAndEvents
from fake_tensormap import TensorMapEncoder

R = _real.CUresult
_PARAM_SIZE = {"u64": 8, "s64": 8, "b64": 8, "f64": 8, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
               "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u8": 1, "s8": 1, "b8": 1,
               "b8[128]": 128}
_PARAM_FMT = {"u64": "<Q", "s64": "<q", "b64": "<Q", "f64": "<d", "u32": "<I", "s32": "<i",
              "b32": "<I", "f32": "<f", "u16": "<H", "s16": "<h", "b16": "<H", "f16": "<e",
              "u8": "<B", "s8": "<b", "b8": "<B", "b8[128]": "128s"}
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$]+)(\[\d+\])?")


def _params(body) -> list:
    """[(ptx type, name)] of an entry's `.param` list; a by-value byte array (a tensor map,
    `.param .align 64 .b8 tm[128]`) has the type 'b8[128]'."""
    return [(t + dims, n) for t, n, dims in _PARAM.findall(body)]
_VERSION = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)", re.M)


class LibraryNotFound(Exception):
    """What cuda.bindings raises when libcuda.so is not installed."""


class Launch:
    """One recorded cuLaunchKernel: geometry, raw parameter bytes and decoded values."""

    def __init__(self, entry, grid, block, shared, stream, params, raw, pointers):
        self.entry, self.grid, self.block = entry, grid, block
        self.shared, self.stream = shared, stream
        self.params = params          # {name: decoded value}
        self.raw = raw                # {name: bytes as the driver would copy them}
        self.pointers = pointers      # {name: host address kernelParams[i] pointed at}
        self.done = False             # the body ran (the stream reached it)


#: calls the real driver refuses with CUDA_ERROR_INVALID_CONTEXT when the calling thread has no
#: current context (device queries, init, version and context management need none)
NEEDS_CONTEXT = frozenset({
    "cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync", "cuModuleLoadDataEx", "cuLaunchKernel", "cuCtxSynchronize",
    "cuStreamCreate", "cuStreamDestroy", "cuStreamSynchronize", "cuStreamWaitEvent",
    "cuStreamQuery", "cuEventCreate", "cuEventDestroy", "cuEventRecord", "cuEventSynchronize",
    "cuEventQuery", "cuEventElapsedTime", "cuFuncSetAttribute", "cuFuncGetAttribute"})

#: Each PTX ISA version and the CUDA release that introduced it (as cuDriverGetVersion reports
#: it), from the "PTX ISA release history" table of NVIDIA's PTX ISA document (Release Notes,
#: https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history);
#: cuda.bindings.utils._ptx_utils carries the same table.  Note the gaps: CUDA 12.6 brought no
#: new ISA (it JITs up to 8.5), 8.6 came with 12.7.  A driver JITs every ISA up to the newest one
#: its release introduced; one newer than the last row is taken to know no newer ISA.  Written
#: out here, not imported from pyptx.runtime.profile: the fake is an independent check of it.
PTX_ISA_RELEASES = (
    ((6, 0), 9000), ((6, 1), 9010), ((6, 2), 9020), ((6, 3), 10000), ((6, 4), 10010),
    ((6, 5), 10020),
    ((7, 0), 11000), ((7, 1), 11010), ((7, 2), 11020), ((7, 3), 11030), ((7, 4), 11040),
    ((7, 5), 11050), ((7, 6), 11060), ((7, 7), 11070), ((7, 8), 11080),
    ((8, 0), 12000), ((8, 1), 12010), ((8, 2), 12020), ((8, 3), 12030), ((8, 4), 12040),
    ((8, 5), 12050), ((8, 6), 12070), ((8, 7), 12080), ((8, 8), 12090),
    ((9, 0), 13000), ((9, 1), 13010), ((9, 2), 13020), ((9, 3), 13030),
)


def max_ptx_isa(driver_version: int):
    """The newest PTX ISA (major, minor) a driver of this CUDA version JITs (None: older than
    every row)."""
    known = [isa for isa, first in PTX_ISA_RELEASES if first <= driver_version]
    return max(known) if known else None


PARAM_BUFFER_LIMIT = 4096          # bytes of kernel parameters a launch may pass before CUDA 12.1
PARAM_BUFFER_LIMIT_12_1 = 32764    # ... and from CUDA 12.1 on (Volta and newer)
_ptxas_cache: dict = {}            # (ptx, arch) -> (error log | None, resources dict)


def _jit(ptx: str, arch: str):
    """Run ptxas like the driver's JIT would: (error log or None, {'registers', 'shared_bytes'}).
    Without a ptxas the PTX is accepted and resources are unknown ({})."""
    key = (ptx, arch)
    hit = _ptxas_cache.get(key)
    if hit is None:
        from pyptx.errors import ToolchainError
        from pyptx.toolchain import find_ptxas, parse_resources
        if find_ptxas() is None:
            hit = (None, {})
        else:
            from pyptx.toolchain import assemble
            try:
                m = _ENTRY.search(ptx)
                hit = (None, parse_resources(assemble(ptx, arch, verbose=True),
                                             m.group(1) if m else None))
            except ToolchainError as e:
                hit = (str(e), {})
        _ptxas_cache[key] = hit
    return hit


_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+)([af]?)", re.M)


def _jit_arch(ptx: str, cc) -> str:
    """The arch the driver's JIT compiles `ptx` for on a device of compute capability `cc`: the
    device's own, or its arch-specific / family variant when the PTX targets that (a real driver
    runs `.target sm_90a` PTX on a 9.0 GPU; ptxas then rejects any other mismatch, as it does)."""
    own = f"sm_{cc[0]}{cc[1]}"
    m = _TARGET.search(ptx)
    return own + m.group(2) if m and m.group(1) == own and m.group(2) else own


def _max_threads_for(registers: int) -> int:
    """CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK for a register count (64 Ki registers per block,
    allocated per warp in units of 256)."""
    if registers <= 0:
        return 1024
    per_warp = -(-registers * 32 // 256) * 256
    return min(1024, 65536 // per_warp * 32)


#: compute capability -> the opt-in shared memory per block (bytes) of the real GPUs (CUDA
#: programming guide, "Technical Specifications per Compute Capability")
SHARED_OPTIN = {(7, 5): 65536, (8, 0): 166912, (8, 6): 101376, (8, 7): 166912, (8, 9): 101376,
                (9, 0): 232448, (10, 0): 232448, (10, 3): 232448, (12, 0): 101376}


class FakeDriver(StreamsAndEvents, TensorMapEncoder, ExecutorBridge):
    CUresult = _real.CUresult
    CUjit_option = _real.CUjit_option
    CUdevice_attribute = _real.CUdevice_attribute
    CUfunction_attribute = _real.CUfunction_attribute
    CUpointer_attribute = _real.CUpointer_attribute

    #: the handle of device d's primary context is CONTEXT_BASE + d
    CONTEXT_BASE = 0xC7000

    def __init__(self, cc=(8, 0), version=12080, devices=1, name="Fake GPU",
                 shared_optin=None, library=True, bindings_version=None, record=True,
                 run_ptxas=True, total_memory=80 << 30):
        """`cc` and `name` may be lists, one per device (`devices=2, cc=[(8, 0), (9, 0)]`).
        `shared_optin`: the per-block opt-in shared memory limit; default: the real GPUs' value
        for the (first) compute capability (SHARED_OPTIN)."""
        per_device = isinstance(cc, list)
        #: compute capability per device, or None when every device has `cc`
        self.ccs = [tuple(c) for c in cc] if per_device else None
        self._cc = tuple(cc[0]) if per_device else cc
        self.version, self.devices, self.name = version, devices, name
        self.total_memory = total_memory
        #: emulate cuda-bindings releases whose CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL says 0
        self.pointer_ordinal_always_zero = False
        cc = self._cc
        if shared_optin is None:
            shared_optin = SHARED_OPTIN.get(tuple(cc), 101376)
        self.library = library
        #: what cuda.bindings.__version__ would say (default: the driver's own major version)
        self.bindings_version = bindings_version or f"{version // 1000}.0.0"
        self.record = record          # False: no call log (benchmarks)
        self.run_ptxas = run_ptxas
        self.attrs = {
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": cc[0],
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": cc[1],
            "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 108,
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": 49152,
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": shared_optin,
            "CU_DEVICE_ATTRIBUTE_WARP_SIZE": 32,
            "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024,
        }
        self.calls: list = []
        self.fail: dict = {}          # name -> CUresult it returns instead (a list: once each)
        self.jit_log = None           # set: cuModuleLoadDataEx fails with this error log
        self.memory: dict = {}        # base address -> np.uint8 buffer
        self.memory_ctx: dict = {}    # base address -> the context current at its cuMemAlloc
        self.freed_in: list = []      # (base address, the context current at its cuMemFree)
        self.foreign: dict = {}       # base address -> (device ordinal, nbytes): other GPUs' memory
        self._next = 0x7F00_0000_0000
        self.modules: dict = {}       # handle -> {entry: [(ptx_type, name), ...]}
        self.module_resources: dict = {}   # handle -> ptxas resources of its PTX
        self.module_ptx: dict = {}    # handle -> its PTX text (what a launch without a body runs)
        self.function_ptx: dict = {}  # function handle -> the PTX of its module
        self.module_ctx: dict = {}    # handle -> the context it was loaded in
        self.function_ctx: dict = {}  # handle -> the context of its module
        self.functions: dict = {}     # handle -> (entry, params, max threads, static shared)
        self.func_attrs: dict = {}
        self.max_threads: dict = {}   # entry -> CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK override
        self.bodies: dict = {}        # entry -> callable(fake, launch); else the PTX runs
        self.launches: list = []
        self.pending: list = []       # queued work, in submission order: (stream, thunk, tag)
        self.sticky = None            # a fault inside a kernel poisons the context, as on a GPU
        self.fault = None             # ... and the exception that said why (FakeFault/MemoryFault)
        self.streams: set = {0}
        self.events: dict = {}        # handle -> the pending tag recorded, or None when reached
        self.contexts = {self.CONTEXT_BASE + d for d in range(devices)}
        self.primary_refs: dict = {}
        self._tls = threading.local()
        self.initialised = False

    @property
    def cc(self):
        """The compute capability of the current context's device (what its JIT targets)."""
        if self.ccs is None:
            return self._cc
        dev = self.device_of_context(self.current())
        return self.ccs[dev if dev is not None else 0]

    @cc.setter
    def cc(self, value):
        self._cc, self.ccs = value, None

    def device_of_context(self, handle):
        """The ordinal whose primary context `handle` is (None: not one of ours)."""
        h = int(handle or 0)
        return h - self.CONTEXT_BASE if h in self.contexts else None

    def _name_of(self, dev):
        return self.name[dev] if isinstance(self.name, list) else self.name

    # -- bookkeeping ---------------------------------------------------------------------------
    def _call(self, name, *args):
        if self.record:
            self.calls.append((name, args))
        if not self.library:
            raise LibraryNotFound('"cuda" is an NVIDIA driver library and can only be found '
                                  'via system search')
        if name in NEEDS_CONTEXT:
            if not self.initialised:
                return R.CUDA_ERROR_NOT_INITIALIZED
            if not self.current():
                return R.CUDA_ERROR_INVALID_CONTEXT
        e = self.fail.get(name)
        if isinstance(e, list):               # one result per call, then success
            return e.pop(0) if e else None
        return e

    def count(self, name) -> int:
        return sum(1 for c in self.calls if c[0] == name)

    def current(self) -> int:
        """This thread's current context handle (0: none)."""
        stack = getattr(self._tls, "stack", None)
        return stack[-1] if stack else 0

    def _locate(self, addr, n):
        for base, buf in self.memory.items():
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        raise FakeFault(f"fake device: access [{addr:#x}, +{n}) outside any allocation")

    def view(self, addr, dtype, count):
        """A numpy view of emulated device memory (for kernel bodies and asserts)."""
        dt = np.dtype(dtype)
        buf, off = self._locate(addr, dt.itemsize * count)
        return buf[off:off + dt.itemsize * count].view(dt)

    # -- the queue: work becomes visible only when something waits for it --------------------------
    def _enqueue(self, stream, thunk, tag=None):
        self.pending.append((int(stream or 0), thunk, tag))

    def _flush(self, upto=None) -> "R":
        """Run queued work in submission order (a legal order for every stream and the legacy
        default stream), up to and including item `upto` (all when None)."""
        if upto is None:
            upto = len(self.pending) - 1
        todo, self.pending = self.pending[:upto + 1], self.pending[upto + 1:]
        for _stream, thunk, tag in todo:
            if tag is not None and tag in self.events:
                self.events[tag] = None
            if thunk is not None and self.sticky is None:
                try:
                    thunk()
                except FakeFault as f:
                    self.sticky, self.fault = f.error, f.__cause__ or f
        return self.sticky or R.CUDA_SUCCESS

    def _last_on(self, stream) -> int:
        s = int(stream or 0)
        s = 0 if s == 1 else s                     # CU_STREAM_LEGACY names the NULL stream
        last = -1
        for i, (st, _t, _g) in enumerate(self.pending):
            if st == s or st in (0, 1) or s == 0:  # the legacy stream orders with every stream
                last = i
        return last

    def run_pending(self):
        """What a GPU does on its own eventually: finish all queued work."""
        return self._flush()

    # -- errors, init, device --------------------------------------------------------------------
    def cuGetErrorName(self, err):
        return (R.CUDA_SUCCESS, R(err).name.encode())

    def cuGetErrorString(self, err):
        text = f"fake: {R(err).name.lower()}"
        if self.fault is not None and err == self.sticky:      # what the kernel did wrong
            text += f"; the kernel fault: {self.fault}"
        return (R.CUDA_SUCCESS, text.encode())

    def cuInit(self, flags):
        e = self._call("cuInit", flags)
        if e is not None:
            return (e,)
        self.initialised = True
        return (R.CUDA_SUCCESS,)

    def cuDriverGetVersion(self):
        e = self._call("cuDriverGetVersion")
        return (e, None) if e is not None else (R.CUDA_SUCCESS, self.version)

    def cuDeviceGetCount(self):
        e = self._call("cuDeviceGetCount")
        return (e, None) if e is not None else (R.CUDA_SUCCESS, self.devices)

    def cuDeviceGet(self, ordinal):
        e = self._call("cuDeviceGet", ordinal)
        if e is None and not 0 <= ordinal < self.devices:
            e = R.CUDA_ERROR_INVALID_DEVICE
        return (e, None) if e is not None else (R.CUDA_SUCCESS, ordinal)

    def cuDeviceGetName(self, length, dev):
        e = self._call("cuDeviceGetName", length, dev)
        return (e, None) if e is not None else (
            R.CUDA_SUCCESS, self._name_of(int(dev)).encode().ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attr, dev):
        e = self._call("cuDeviceGetAttribute", attr, dev)
        if e is not None:
            return (e, None)
        if self.ccs is not None and attr.name.startswith("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY"):
            return (R.CUDA_SUCCESS, self.ccs[int(dev)][0 if attr.name.endswith("MAJOR") else 1])
        return (R.CUDA_SUCCESS, self.attrs[attr.name])

    def cuDeviceTotalMem(self, dev):
        e = self._call("cuDeviceTotalMem", dev)
        if e is None and not 0 <= int(dev) < self.devices:
            e = R.CUDA_ERROR_INVALID_DEVICE
        if e is not None:
            return (e, None)
        mem = self.total_memory
        return (R.CUDA_SUCCESS, mem[int(dev)] if isinstance(mem, list) else mem)

    def cuDevicePrimaryCtxRetain(self, dev):
        e = self._call("cuDevicePrimaryCtxRetain", dev)
        if e is not None:
            return (e, None)
        self.primary_refs[dev] = self.primary_refs.get(dev, 0) + 1
        return (R.CUDA_SUCCESS, _real.CUcontext(self.CONTEXT_BASE + dev))

    def cuDevicePrimaryCtxRelease(self, dev):
        e = self._call("cuDevicePrimaryCtxRelease", dev)
        if e is None:
            self.primary_refs[dev] = self.primary_refs.get(dev, 0) - 1
        return (e or R.CUDA_SUCCESS,)

    def _stack(self):
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def cuCtxGetCurrent(self):
        if not self.record and self.library:        # benchmarks: the lean path
            stack = getattr(self._tls, "stack", None)
            return (R.CUDA_SUCCESS, _real.CUcontext(stack[-1] if stack else 0))
        e = self._call("cuCtxGetCurrent")
        return (e, None) if e is not None else (R.CUDA_SUCCESS, _real.CUcontext(self.current()))

    def cuCtxSetCurrent(self, ctx):
        e = self._call("cuCtxSetCurrent", ctx)
        if e is None:
            stack = self._stack()
            if int(ctx or 0) == 0:
                if stack:
                    stack.pop()
            elif stack:
                stack[-1] = int(ctx)
            else:
                stack.append(int(ctx))
        return (e or R.CUDA_SUCCESS,)

    def cuCtxPushCurrent(self, ctx):
        e = self._call("cuCtxPushCurrent", ctx)
        if e is None:
            if int(ctx) not in self.contexts:
                return (R.CUDA_ERROR_INVALID_CONTEXT,)
            self._stack().append(int(ctx))
        return (e or R.CUDA_SUCCESS,)

    def cuCtxPopCurrent(self):
        e = self._call("cuCtxPopCurrent")
        if e is not None:
            return (e, None)
        stack = self._stack()
        if not stack:
            return (R.CUDA_ERROR_INVALID_CONTEXT, None)
        return (R.CUDA_SUCCESS, _real.CUcontext(stack.pop()))

    def cuCtxGetDevice(self):
        e = self._call("cuCtxGetDevice")
        if e is None and not self.current():
            e = R.CUDA_ERROR_INVALID_CONTEXT
        return (e, None) if e is not None else (
            R.CUDA_SUCCESS, self.device_of_context(self.current()))

    def cuCtxSynchronize(self):
        e = self._call("cuCtxSynchronize")
        return (e or self._flush(),)

    # -- modules -----------------------------------------------------------------------------------
    def cuModuleLoadDataEx(self, image, n, options, values):
        e = self._call("cuModuleLoadDataEx", image, n, options, values)
        assert isinstance(image, bytes) and image.endswith(b"\0"), "PTX must be NUL-terminated"
        assert n == len(options) == len(values)
        opts = dict(zip(options, values))
        log = None
        if e is None and self.jit_log is not None:
            e, log = R.CUDA_ERROR_INVALID_PTX, self.jit_log
        ptx = image[:-1].decode()
        m = _VERSION.search(ptx)
        max_ptx = max_ptx_isa(self.version) or (0, 0)
        if e is None and m and (int(m.group(1)), int(m.group(2))) > max_ptx:
            e = R.CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        resources = {}
        if e is None and self.run_ptxas:
            log, resources = _jit(ptx, _jit_arch(ptx, self.cc))
            if log is not None:
                e = R.CUDA_ERROR_INVALID_PTX
        if e is not None:
            log = (log or "ptxas fatal: fake error").encode()
            buf = opts.get(self.CUjit_option.CU_JIT_ERROR_LOG_BUFFER)
            size = opts.get(self.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 0)
            if buf is not None:
                k = min(len(log), size - 1)
                buf[:k] = log[:k]
                buf[k] = 0
            return (e, None)
        handle = _real.CUmodule(0x3000 + len(self.modules))
        self.modules[handle] = {name: _params(body) for name, body in _ENTRY.findall(ptx)}
        self.module_resources[handle] = resources
        self.module_ptx[handle] = ptx
        self.module_ctx[handle] = self.current()
        return (R.CUDA_SUCCESS, handle)

    def cuModuleGetFunction(self, module, name):
        e = self._call("cuModuleGetFunction", module, name)
        if e is not None:
            return (e, None)
        if module not in self.modules:
            return (R.CUDA_ERROR_INVALID_HANDLE, None)
        entry = name.decode()
        if entry not in self.modules[module]:
            return (R.CUDA_ERROR_NOT_FOUND, None)
        res = self.module_resources.get(module, {})
        handle = _real.CUfunction(0x4000 + len(self.functions))
        threads = self.max_threads.get(entry, _max_threads_for(res.get("registers", 0)))
        self.functions[handle] = (entry, self.modules[module][entry], threads,
                                  res.get("shared_bytes", 0))
        self.function_ctx[handle] = self.module_ctx.get(module)
        self.function_ptx[handle] = self.module_ptx.get(module)
        return (R.CUDA_SUCCESS, handle)

    def cuFuncSetAttribute(self, func, attr, value):
        e = self._call("cuFuncSetAttribute", func, attr, value)
        if e is None and func not in self.functions:
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None and attr == self.CUfunction_attribute.\
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            static = self.functions[func][3]
            if value + static > self.attrs["CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]:
                e = R.CUDA_ERROR_INVALID_VALUE
        if e is None:
            self.func_attrs[(func, attr)] = value
        return (e or R.CUDA_SUCCESS,)

    def cuFuncGetAttribute(self, attr, func):
        e = self._call("cuFuncGetAttribute", attr, func)
        if e is None and func not in self.functions:
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is not None:
            return (e, None)
        fa = self.CUfunction_attribute
        _entry, _params, threads, static = self.functions[func]
        if attr == fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
            return (R.CUDA_SUCCESS, threads)
        if attr == fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
            return (R.CUDA_SUCCESS, static)
        return (R.CUDA_SUCCESS, self.func_attrs.get((func, attr), 0))

    # -- memory --------------------------------------------------------------------------------------
    def cuMemAlloc(self, n):
        e = self._call("cuMemAlloc", n)
        if e is not None:
            return (e, None)
        if n == 0:
            return (R.CUDA_ERROR_INVALID_VALUE, None)
        base = self._next
        self._next += (n + 255) // 256 * 256 + 256
        self.memory[base] = np.full(n, 0xAB, np.uint8)      # garbage, like real memory
        self.memory_ctx[base] = self.current()
        return (R.CUDA_SUCCESS, _real.CUdeviceptr(base))

    def cuMemFree(self, ptr):
        e = self._call("cuMemFree", ptr)
        if e is None:
            # the driver documents only that cuMemFree "may synchronise": the fake frees at
            # once, so queued work that still uses the memory faults when it runs
            if int(ptr) not in self.memory:
                return (R.CUDA_ERROR_INVALID_VALUE,)
            del self.memory[int(ptr)]
            self.freed_in.append((int(ptr), self.current()))
        return (e or R.CUDA_SUCCESS,)

    def _htod(self, dst, data):
        buf, off = self._locate(int(dst), len(data))
        buf[off:off + len(data)] = np.frombuffer(data, np.uint8)

    def _dtoh(self, dst, src, n):
        buf, off = self._locate(int(src), n)
        ctypes.memmove(dst, buf[off:off + n].tobytes(), n)

    def _check_range(self, addr, n):
        try:
            self._locate(int(addr), n)
            return None
        except FakeFault:
            return R.CUDA_ERROR_INVALID_VALUE

    def cuMemcpyHtoD(self, dst, src, n):
        e = self._call("cuMemcpyHtoD", dst, src, n) or self._check_range(dst, n)
        if e is None:
            e = self._flush()
            if e == R.CUDA_SUCCESS:
                self._htod(dst, ctypes.string_at(src, n))
        return (e,)

    def cuMemcpyDtoH(self, dst, src, n):
        e = self._call("cuMemcpyDtoH", dst, src, n) or self._check_range(src, n)
        if e is None:
            e = self._flush()
            if e == R.CUDA_SUCCESS:
                self._dtoh(dst, src, n)
        return (e,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        e = self._call("cuMemcpyHtoDAsync", dst, src, n, stream) or self._check_range(dst, n)
        if e is None:
            data = ctypes.string_at(src, n)     # pageable memory is staged before the call returns
            self._enqueue(stream, lambda: self._htod(dst, data))
        return (e or R.CUDA_SUCCESS,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        e = self._call("cuMemcpyDtoHAsync", dst, src, n, stream) or self._check_range(src, n)
        if e is None:
            self._enqueue(stream, lambda: self._dtoh(dst, src, n))
        return (e or R.CUDA_SUCCESS,)

    def cuPointerGetAttribute(self, attr, ptr):
        e = self._call("cuPointerGetAttribute", attr, ptr)
        if e is not None:
            return (e, None)
        p = int(ptr)
        pa = self.CUpointer_attribute
        if attr not in (pa.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pa.CU_POINTER_ATTRIBUTE_CONTEXT):
            return (R.CUDA_ERROR_INVALID_VALUE, None)
        owner = None                                        # the allocating context
        for base, (dev, n) in self.foreign.items():
            if base <= p < base + n:
                owner = self.CONTEXT_BASE + dev             # another library's, same primary
        for base, buf in self.memory.items():
            if base <= p < base + len(buf):
                owner = self.memory_ctx.get(base, self.CONTEXT_BASE)
        if owner is None:
            return (R.CUDA_ERROR_INVALID_VALUE, None)       # not memory the driver knows
        if attr == pa.CU_POINTER_ATTRIBUTE_CONTEXT:
            return (R.CUDA_SUCCESS, _real.CUcontext(owner))
        dev = owner - self.CONTEXT_BASE
        return (R.CUDA_SUCCESS, 0 if self.pointer_ordinal_always_zero else dev)

    # -- launch ----------------------------------------------------------------------------------------
    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params, extra):
        e = self._call("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream,
                       kernel_params, extra)
        if e is not None:
            return (e,)
        if self.sticky is not None:
            return (self.sticky,)
        if f not in self.functions or not self._stream_ok(stream) or \
                self.function_ctx[f] != self.current():      # a function of another context
            return (R.CUDA_ERROR_INVALID_HANDLE,)
        entry, params, max_threads, static = self.functions[f]
        optin = self.func_attrs.get(
            (f, self.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), 0)
        if (min(gx, gy, gz, bx, by, bz) < 1 or bx > 1024 or by > 1024 or bz > 64
                or bx * by * bz > 1024 or gx > 2**31 - 1 or gy > 65535 or gz > 65535
                or shared > max(optin, 49152 - static)):
            return (R.CUDA_ERROR_INVALID_VALUE,)
        if bx * by * bz > max_threads:
            return (R.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,)
        if sum(_PARAM_SIZE[t] for t, _n in params) > (
                PARAM_BUFFER_LIMIT_12_1 if self.version >= 12010 else PARAM_BUFFER_LIMIT):
            return (R.CUDA_ERROR_INVALID_VALUE,)
        if not isinstance(kernel_params, int) or (params and not kernel_params):
            return (R.CUDA_ERROR_INVALID_VALUE,)
        body = self.bodies.get(entry)
        if not self.record and body is None:
            return (R.CUDA_SUCCESS,)          # benchmarks: nothing to decode or run
        decoded, raw, pointers = {}, {}, {}
        for i, (ptype, name) in enumerate(params):
            p = ctypes.c_void_p.from_address(kernel_params + 8 * i).value
            data = ctypes.string_at(p, _PARAM_SIZE[ptype])   # the driver copies the values now
            pointers[name], raw[name] = p, data
            decoded[name] = struct.unpack(_PARAM_FMT[ptype], data)[0]
        launch = Launch(entry, (gx, gy, gz), (bx, by, bz), shared, stream, decoded, raw,
                        pointers)
        if self.record:
            self.launches.append(launch)
        ptx = self.function_ptx.get(f)

        def run():
            if body is not None:
                body(self, launch)
            elif ptx is not None:
                self.execute(ptx, params, launch)
            launch.done = True
        self._enqueue(stream, run)
        return (R.CUDA_SUCCESS,)


# ---- hand-built compiled kernels (the launcher's input, independent of the compiler) ------------

def _param_ptx_type(t) -> str:
    """The PTX .param type architecture.md gives each scalar type."""
    return {"bool_": "u8", "f16": "b16"}.get(t.name, t.ptx)


def hand_compiled(name, specs, body="", version="8.0", arch="sm_80"):
    """A CompiledKernel whose PTX declares the parameters `specs` describe.

    specs: (param, 'array' | 'scalar', ScalarType, ndim, writable) per user parameter."""
    from pyptx.compiler import ArgSpec, CompiledKernel, KernelParam
    params, sig = [], []
    for pname, kind, t, nd, w in specs:
        sig.append(ArgSpec(pname, kind, t, nd, w))
        if kind == "array":
            params.append(KernelParam(pname, "u64"))
            params += [KernelParam(f"{pname}_shape{d}", "s32") for d in range(nd)]
        else:
            params.append(KernelParam(pname, _param_ptx_type(t)))
    decl = ",\n".join(f"    .param .{p.ptx_type} {p.name}" for p in params)
    ptx = (f".version {version}\n.target {arch}\n.address_size 64\n\n"
           f".visible .entry {name}(\n{decl}\n)\n{{\n{body}    ret;\n}}\n")
    return CompiledKernel(ptx=ptx, name=name, arch=arch, params=params, signature=sig,
                          version=version)


class FakeCompiler:
    """Replaces pyptx.compiler.compile_kernel in launch tests: records each request and answers
    with `make(kernel, constexprs, arg_types)` (a hand-built CompiledKernel), cached like the
    real one."""

    def __init__(self, make):
        self.make = make
        self.requests: list = []
        self._cache: dict = {}

    def __call__(self, k, *, arch=None, constexprs=None, signature=None, opt_level=None,
                 fma=None, arg_types=None):
        self.requests.append(dict(kernel=k.name, arch=arch, constexprs=dict(constexprs or {}),
                                  arg_types=dict(arg_types or {})))
        key = (id(k), arch, repr(sorted((constexprs or {}).items())),
               repr(sorted((arg_types or {}).items())))
        if key not in self._cache:
            self._cache[key] = self.make(k, dict(constexprs or {}), dict(arg_types or {}))
        return self._cache[key]


def on_fake_gpu(monkeypatch, fd):
    """The body of a `fake` fixture: `fd` installed as the driver with PYPTX_DEVICE=gpu, the
    previous driver restored afterwards (`yield from on_fake_gpu(monkeypatch, FakeDriver())`)."""
    import gc

    from pyptx.runtime import driver
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    try:
        yield fd
    finally:
        gc.collect()        # DeviceArrays in cycles are freed while `fd` is still the driver
        # What survives is live: freeze it, so the next collect scans only newer objects.  A
        # full collect of the suite's heap (torch, transformers, every compiled kernel) took
        # ~3-10 s, paid by each of a few hundred fake-GPU tests.
        gc.freeze()
        driver.set_driver(prev)


def on_cpu_or_fake_gpu(request, monkeypatch, fd_factory=None):
    """The body of a fixture with `params=["cpu", "fake"]`: the CPU executor (yields None), or
    the GPU path on a fake driver (yields it; `fd_factory()` makes it, FakeDriver by default)."""
    if request.param == "cpu":
        monkeypatch.setenv("PYPTX_DEVICE", "cpu")
        yield None
    else:
        yield from on_fake_gpu(monkeypatch, (fd_factory or FakeDriver)())


def idle_in_pool(ptr, ctx=None) -> bool:
    """pyptx gave `ptr` back: it is an idle buffer of a context's memory pool (a DeviceArray's
    memory returns there, for stream-ordered reuse, not to cuMemFree: pyptx/runtime/devmem.py).
    `ctx`: that context's pool only (default: any)."""
    from pyptx.runtime import driver
    pools = [ctx.pool] if ctx is not None else [c.pool for c in driver.contexts()]
    return any(ptr in ptrs for pool in pools for ptrs in pool.idle.values())


def in_forked_child(child) -> str:
    """Run `child()` in a forked process and return what it returned (a str), or the text of
    the exception it raised; the child always ends with os._exit(0)."""
    import os
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            try:
                msg = str(child())
            except Exception as e:  # noqa: BLE001 - the message is the result
                msg = str(e)
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return msg
