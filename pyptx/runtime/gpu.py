"""Run a checked, flattened launch on the GPU: resolve array arguments to device addresses,
pack the parameters, cuLaunchKernel, copy back what the kernel may have written.

`pyptx.runtime.launch` has already checked every argument; this module only moves bytes.
"""
from __future__ import annotations

import re
import threading

import numpy as np

from . import driver, readonly
from ..errors import DeviceError, LaunchError
from .device_array import DeviceArray
from .dlpack import ImportedTensor


class ArrayArg:
    """A pointer parameter's argument: numpy array, DeviceArray, `__cuda_array_interface__`
    object or consumed DLPack tensor (`dlpack.ImportedTensor`), and whether the kernel may
    write it."""

    __slots__ = ("array", "writable")

    def __init__(self, array, writable: bool):
        self.array = array
        self.writable = writable


_SHARED_DECL = re.compile(r"^\s*\.shared\s+(?:\.align\s+(\d+)\s+)?\.([busf])(\d+)\s+[\w$%]+\s*"
                          r"\[(\d+)\]", re.M)


def static_shared_bytes(ptx: str) -> int:
    """Bytes of static `.shared` memory the PTX declares (each rounded to its alignment)."""
    total = 0
    for align, _kind, bits, count in _SHARED_DECL.findall(ptx):
        a = int(align or 1)
        total = -(-total // a) * a + int(bits) // 8 * int(count)
    return total


class _GpuPlan:
    """Per CompiledKernel: parameter packer, pointer slots, static shared size, loaded function."""

    def __init__(self, ck):
        half = {a.name for a in ck.signature
                if a.kind == "scalar" and a.dtype.name == "f16"}
        self.packer = driver.ParamPacker(ck.params, half_params=half)
        self.pointer_slots = [i for i, p in enumerate(ck.params) if p.ptx_type == "u64"
                              and _is_array_param(ck, p.name)]
        self.static_shared = static_shared_bytes(ck.ptx)
        self.ptx = ck.ptx
        self.uses_nc = readonly.uses_nc(ck.ptx)
        self.entry = ck.name
        self.function = None
        self.ctx = None
        self.lock = threading.Lock()     # the packer's buffer is shared by every launch

    def loaded(self, ctx):
        if self.ctx is not ctx:
            check_ptx_version(self.ptx)
            self.function = ctx.function(self.ptx, self.entry)
            self.ctx = ctx
        return self.function


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


def _is_array_param(ck, pname: str) -> bool:
    return any(a.kind == "array" and a.name == pname for a in ck.signature)


def plan_for(ck) -> _GpuPlan:
    plan = ck.__dict__.get("_pyptx_gpu_plan")
    if plan is None:
        plan = ck.__dict__["_pyptx_gpu_plan"] = _GpuPlan(ck)
    return plan


def launch(compiled, grid, block, flat_args, shared_mem: int = 0, stream=None) -> None:
    """Launch on the current GPU.  numpy arrays are copied in (all) and out (writable ones);
    DeviceArrays, `__cuda_array_interface__` objects and DLPack tensors are used in place."""
    plan = plan_for(compiled)
    ctx = driver.context()
    ctx.make_current()
    fn = plan.loaded(ctx)
    hstream = driver.stream_handle(stream)
    values = list(flat_args)
    staged = {}        # host data address -> [device ptr, host array, nbytes, writable]
    imported = []      # consumed DLPack tensors: their deleters run once the kernel is queued
    try:
        for i in plan.pointer_slots:
            arg = values[i]
            if isinstance(arg.array, ImportedTensor):
                imported.append(arg.array)
                values[i] = arg.array.data
                continue
            values[i] = _device_address(arg, staged, hstream)
        if plan.uses_nc and readonly.readonly_aliases_written(
                [(values[i], _nbytes(flat_args[i].array), flat_args[i].writable)
                 for i in plan.pointer_slots]):
            fn = ctx.function(readonly.coherent_ptx(plan.ptx), plan.entry)
        fn.allow_dynamic_shared(plan.static_shared, shared_mem)
        with plan.lock:
            fn.launch(grid, block, shared_mem, hstream, plan.packer.pack(values))
        if staged:
            for dptr, host, nbytes, writable in staged.values():
                if writable:
                    driver.memcpy_dtoh(host.ctypes.data, dptr, nbytes, hstream)
            driver.synchronize(hstream)
    finally:
        for entry in staged.values():
            driver.mem_free(entry[0], ctx)
        for t in imported:
            t.release()


def _nbytes(obj) -> int:
    """Bytes of an array argument (numpy, DeviceArray, DLPack or CUDA-array-interface object)."""
    nbytes = getattr(obj, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    cai = obj.__cuda_array_interface__
    return int(np.prod(cai["shape"], dtype=np.int64)) * np.dtype(cai["typestr"]).itemsize


def _device_address(arg: ArrayArg, staged: dict, hstream) -> int:
    obj = arg.array
    if isinstance(obj, np.ndarray):
        nbytes = obj.nbytes
        if nbytes == 0:
            return 0
        host_ptr = obj.ctypes.data
        hit = staged.get((host_ptr, nbytes))
        if hit is not None:                  # the same array passed twice: one buffer
            hit[3] = hit[3] or arg.writable
            return hit[0]
        dptr = driver.mem_alloc(nbytes)
        staged[(host_ptr, nbytes)] = [dptr, obj, nbytes, arg.writable]
        driver.memcpy_htod(dptr, host_ptr, nbytes, hstream)
        return dptr
    if isinstance(obj, DeviceArray):
        if not obj.on_gpu:
            raise LaunchError("a DeviceArray made for the CPU executor was passed to a GPU "
                              "launch; make it again with pyptx.to_device")
        return obj.device_pointer
    return int(obj.__cuda_array_interface__["data"][0])
