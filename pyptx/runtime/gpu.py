"""Run a checked, flattened launch on the GPU: resolve array arguments to device addresses,
pack the parameters, cuLaunchKernel, copy back what the kernel may have written.

`pyptx.runtime.launch` has already checked every argument; this module only moves bytes.
Everything that depends only on the compiled kernel (which parameter slots are pointers or
halves, the `struct` layout, the loaded CUfunction and its limits) is prepared once in a
`GpuLauncher`; a launch of device-resident arguments then costs one `pack_into` and one
cuLaunchKernel.  Parameters are matched by position: the PTX namer may rename them.
"""
from __future__ import annotations

import re
import threading

import numpy as np

from . import devmem, driver, readonly
from .param_packer import ParamPacker
from .streams import stream_handle
from ..errors import DeviceError, LaunchError
from .dlpack import ImportedTensor
from .gpu_faults import last_kernel


class ArrayArg:
    """A pointer parameter's argument as other callers may still pass it: numpy array,
    DeviceArray, `__cuda_array_interface__` object or consumed DLPack tensor, and whether the
    kernel may write it.  (The launcher itself passes plain values, see `bind_array`.)"""

    __slots__ = ("array", "writable")

    def __init__(self, array, writable: bool):
        self.array = array
        self.writable = writable


class StagedCopy:
    """A non-contiguous numpy argument of a strided parameter: staged through a contiguous
    copy (the launcher passes the copy's strides); when the kernel may write it, the copy's
    contents go back into the caller's view after the launch."""

    __slots__ = ("target", "copy", "writable")

    def __init__(self, target: np.ndarray, writable: bool):
        self.target = target
        self.copy = np.ascontiguousarray(target)
        self.writable = writable


class ForeignArray:
    """A `__cuda_array_interface__` argument: its address and the producer's stream (CAI v3:
    None = nothing to wait for, 1/2 = legacy/per-thread default stream, else a handle)."""

    __slots__ = ("ptr", "stream")

    def __init__(self, ptr: int, stream):
        self.ptr = ptr
        self.stream = stream


_SHARED_DECL = re.compile(r"^\s*\.shared\s+(?:\.align\s+(\d+)\s+)?\.([busf])(\d+)\s+[\w$%]+\s*"
                          r"\[(\d+)\]", re.M)


def static_shared_bytes(ptx: str) -> int:
    """Bytes of static `.shared` memory the PTX declares (each rounded to its alignment).  A
    first estimate for checks before loading; the GPU path re-checks with the driver's number
    (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)."""
    total = 0
    for align, _kind, bits, count in _SHARED_DECL.findall(ptx):
        a = int(align or 1)
        total = -(-total // a) * a + int(bits) // 8 * int(count)
    return total


_VERSION_RE = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)", re.M)


def check_ptx_version(ptx: str) -> None:
    """A clear DeviceError when the PTX's `.version` is newer than the driver can JIT (the
    driver itself would only say CUDA_ERROR_UNSUPPORTED_PTX_VERSION)."""
    from .profile import max_ptx_version
    m = _VERSION_RE.search(ptx)
    cap = max_ptx_version()
    if m is None or cap is None:
        return
    need = (int(m.group(1)), int(m.group(2)))
    if need > tuple(int(x) for x in cap.split(".")):
        raise DeviceError(f"this kernel's PTX needs ISA {need[0]}.{need[1]}, but the installed "
                          f"CUDA driver JIT-compiles at most PTX ISA {cap}; update the NVIDIA "
                          f"driver (or compile for an older arch)",
                          error_name="CUDA_ERROR_UNSUPPORTED_PTX_VERSION")


def param_slots(ck):
    """(pointer slots with their writability, f16 scalar slots) of the PTX parameter list,
    by position: each array argument is one `.u64` then one `.s32` per dimension (then, when
    strided, one `.s64` element stride per dimension)."""
    pointers, halves, i = [], set(), 0
    for a in ck.signature:
        if a.kind == "array":
            pointers.append((i, a.writable))
            i += 1 + a.ndim * (2 if a.strided else 1)
        else:
            if a.dtype.name == "f16":
                halves.add(i)
            i += 1
    if i != len(ck.params):
        raise DeviceError(f"internal: kernel '{ck.name}' has {len(ck.params)} PTX parameters "
                          f"but its signature flattens to {i}")
    return pointers, halves


class GpuLauncher:
    """Per CompiledKernel and context: packer, pointer slots, the loaded function."""

    def __init__(self, ck, ctx):
        self.ck = ck
        self.ctx = ctx
        self.pointers, halves = param_slots(ck)
        self.pointer_slots = [i for i, _w in self.pointers]
        self.cu_launch = ctx.drv.cuLaunchKernel
        self.packer = ParamPacker(ck.params, half_slots=halves)
        self.function = None
        self.tight = True
        self.shared_limit = None
        self.lock = threading.Lock()     # the packer's buffer is shared by every launch
        # read-only arrays load through ld.global.nc; a launch where one overlaps a written
        # array runs the coherent variant of the PTX instead (readonly.py)
        sizes = [(i, a.ndim, a.dtype.dtype.itemsize, a.strided, a.writable)
                 for (i, _w), a in zip(self.pointers, [a for a in ck.signature
                                                       if a.kind == "array"])]
        mixed = any(w for *_x, w in sizes) and not all(w for *_x, w in sizes)
        self.spans = sizes if mixed and readonly.uses_nc(ck.ptx) else None
        #: (read-only slot, written slot) pairs: DeviceArrays own whole allocations, so two of
        #: them overlap only when their addresses are equal
        self.nc_pairs = [(r, w) for r, *_a, rw in sizes if not rw
                         for w, *_b, ww in sizes if ww] if self.spans else []
        self.coherent = None

    def _aliased(self, values) -> bool:
        """Does a read-only array overlap a written one (addresses resolved in `values`)?"""
        spans = []
        for slot, nd, itemsize, strided, w in self.spans:
            if strided:            # the bytes from the lowest to the highest element
                lo = hi = 0
                for k in range(nd):
                    n, s = values[slot + 1 + k], values[slot + 1 + nd + k]
                    if n == 0:
                        lo = hi = None
                        break
                    if s < 0:
                        lo += (n - 1) * s * itemsize
                    else:
                        hi += (n - 1) * s * itemsize
                spans.append((0, 0, w) if lo is None else
                             (values[slot] + lo, hi - lo + itemsize, w))
                continue
            n = itemsize
            for k in range(nd):
                n *= values[slot + 1 + k]
            spans.append((values[slot], n, w))
        return readonly.readonly_aliases_written(spans)

    def _coherent(self):
        if self.coherent is None:
            self.coherent = self.ctx.function(readonly.coherent_ptx(self.ck.ptx), self.ck.name)
        return self.coherent

    def _load(self):
        check_ptx_version(self.ck.ptx)
        from .profile import gpu_profile
        self.shared_limit = gpu_profile(self.ctx).max_shared_per_block_optin
        fn = self.ctx.function(self.ck.ptx, self.ck.name)
        #: limits that a launch without dynamic shared memory must still check
        self.tight = fn.max_threads < 1024 or fn.static_shared > driver.STATIC_SHARED_LIMIT
        self.function = fn
        return fn

    def _check_limits(self, fn, block, shared_mem) -> None:
        threads = block[0] * block[1] * block[2]
        if threads > fn.max_threads:
            raise LaunchError(f"{self.ck.name}: block {block} has {threads} threads, but this "
                              f"kernel can run at most {fn.max_threads} threads per block on "
                              f"this GPU (its register use limits it: "
                              f"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); use smaller blocks")
        if fn.static_shared + shared_mem > self.shared_limit:
            raise LaunchError(f"{self.ck.name} needs {fn.static_shared} bytes of static shared "
                              f"memory (as the driver counts it) + {shared_mem} dynamic "
                              f"(shared_mem=) = {fn.static_shared + shared_mem} bytes, over the "
                              f"{self.shared_limit}-byte limit per block of this GPU")
        fn.allow_dynamic_shared(fn.static_shared, shared_mem)

    def __call__(self, grid, block, values, shared_mem, hstream) -> None:
        ctx = self.ctx
        pushed = ctx.enter()
        try:
            if ctx.deferred:
                ctx.reap()
            fn = self.function or self._load()
            if shared_mem:
                shared_mem = int(shared_mem)     # checked by the launcher: an int >= 0
            for i in self.pointer_slots:
                if type(values[i]) is not int:
                    break
            else:                                # every array is a device address: no staging
                for r, w in self.nc_pairs:
                    if values[r] == values[w] and values[r]:
                        fn = self._coherent()
                        break
                if shared_mem or self.tight or fn is self.coherent:
                    self._check_limits(fn, block, shared_mem)
                with self.lock:
                    res = self.cu_launch(fn.handle, grid[0], grid[1], grid[2], block[0],
                                         block[1], block[2], shared_mem, hstream or ctx.home,
                                         self.packer.pack(values), 0)
                if res[0] != ctx.success:
                    driver.check(res, f"cuLaunchKernel({fn.entry})", ctx.drv)
                last_kernel[0] = fn.entry
                return
            staged = _Staging(ctx, hstream)
            try:
                for i, writable in self.pointers:
                    if type(values[i]) is not int:
                        values[i] = staged.resolve(values[i], writable)
                if self.spans and self._aliased(values):
                    fn = self._coherent()
                if shared_mem or self.tight or fn is self.coherent:
                    self._check_limits(fn, block, shared_mem)
                with self.lock:
                    fn.launch(grid, block, shared_mem, hstream or ctx.home,
                              self.packer.pack(values))
                staged.copy_back()
            finally:
                staged.finish()
        finally:
            ctx.leave(pushed)


class _Staging:
    """The per-launch work for arguments that are not plain device addresses: numpy copies
    through the pool, waits on a CAI producer's stream, DLPack tensors to release later."""

    __slots__ = ("ctx", "stream", "buffers", "by_host", "imported", "launched", "copies")

    def __init__(self, ctx, stream):
        self.ctx, self.stream = ctx, stream
        self.buffers = []        # [device ptr, size, (host address, nbytes), writable]
        self.by_host = {}        # (host address, nbytes) -> entry of buffers
        self.imported = []
        self.launched = False
        self.copies = []         # written StagedCopy arguments: copied into the caller's view

    def resolve(self, v, writable) -> int:
        if isinstance(v, ArrayArg):
            writable = writable or v.writable
            v = v.array
        if isinstance(v, np.ndarray):
            return self._stage(v, writable)
        if isinstance(v, StagedCopy):
            writable = writable or v.writable
            if writable:
                self.copies.append(v)
            return self._stage(v.copy, writable)
        if isinstance(v, ForeignArray):
            from .graph import capturing
            if capturing() is None:    # a capture cannot wait on an event recorded outside
                self._wait_for(v.stream)   # it: g.launch(stream=...) orders the replay instead
            return v.ptr
        if isinstance(v, ImportedTensor):
            self.imported.append(v)
            return v.data
        ptr = getattr(v, "_ptr", None)            # a DeviceArray given through ArrayArg
        if ptr is not None:
            return ptr
        return int(v.__cuda_array_interface__["data"][0])

    def _stage(self, host: np.ndarray, writable: bool) -> int:
        nbytes = host.nbytes
        if nbytes == 0:
            return 0
        key = (host.ctypes.data, nbytes)
        hit = self.by_host.get(key)
        if hit is not None:                      # the same array passed twice: one buffer
            hit[3] = hit[3] or writable
            return hit[0]
        ptr, size = self.ctx.pool.alloc(nbytes, self.stream)
        entry = [ptr, size, key, writable]
        self.buffers.append(entry)
        self.by_host[key] = entry
        drv = self.ctx.drv
        driver.check(drv.cuMemcpyHtoDAsync(ptr, key[0], nbytes, self.stream or self.ctx.home),
                     "cuMemcpyHtoDAsync", drv)
        return ptr

    def _wait_for(self, producer) -> None:
        """CAI v3 `stream`: make the launch stream wait for the producer's pending work."""
        devmem.wait_for_producer(self.ctx, producer, self.stream)

    def copy_back(self) -> None:
        self.launched = True
        drv = self.ctx.drv
        back = [e for e in self.buffers if e[3]]
        for ptr, _size, (addr, nbytes), _w in back:
            driver.check(drv.cuMemcpyDtoHAsync(addr, ptr, nbytes, self.stream or self.ctx.home),
                         "cuMemcpyDtoHAsync", drv)
        if back:
            driver.check(drv.cuStreamSynchronize(self.stream or self.ctx.home),
                         "cuStreamSynchronize", drv)
        for c in self.copies:        # the staged copy of a strided view, back into the view
            c.target[...] = c.copy

    def finish(self) -> None:
        """Buffers back to the pool (stream-ordered, so no wait), DLPack tensors released once
        the stream has finished the kernel (or now, if nothing was queued).  Every step runs
        even if one fails."""
        pool, stream = self.ctx.pool, self.stream
        acts = [lambda e=e: pool.give_back(e[0], e[1], stream) for e in self.buffers]
        if self.imported:
            releases = [t.release for t in self.imported]
            if self.launched:
                acts.append(lambda: self.ctx.after(stream, releases))
            else:
                acts.extend(releases)
        driver.run_all(acts)


def launcher_for(ck, ctx=None) -> GpuLauncher:
    """The prepared launcher of `ck` in `ctx` (default: the calling thread's device's context):
    one per device, each with its own loaded function and limits (rebuilt after a driver
    reset)."""
    if ctx is None:
        ctx = driver.context()
    per_device = ck.__dict__.get("_pyptx_gpu_launchers")
    if per_device is None:
        per_device = ck.__dict__["_pyptx_gpu_launchers"] = {}
    lau = per_device.get(ctx.ordinal)
    if lau is None or lau.ctx is not ctx:
        lau = per_device[ctx.ordinal] = GpuLauncher(ck, ctx)
    return lau


def bind_array(obj, writable: bool):
    """What a checked array argument becomes in the flat argument list for the GPU: a device
    address (int) when no work is needed, else the object the launcher stages or waits on."""
    from .device_array import DeviceArray
    t = type(obj)
    if t is np.ndarray:
        return obj
    if t is DeviceArray:
        return obj._ptr
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None and not isinstance(obj, np.ndarray):
        return ForeignArray(int(cai["data"][0]), cai.get("stream"))
    return obj


def launch(compiled, grid, block, flat_args, shared_mem: int = 0, stream=None) -> None:
    """Launch on the calling thread's current GPU.  numpy arrays are copied in (all) and out
    (writable ones, then the stream is synchronised); DeviceArrays, `__cuda_array_interface__`
    objects and DLPack tensors are used in place.  `flat_args` may hold `ArrayArg`s or the values
    `bind_array` makes; it is not modified."""
    values = list(flat_args)
    launcher_for(compiled)(grid, block, values, int(shared_mem or 0),
                           stream_handle(stream))
