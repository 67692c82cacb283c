"""A stand-in for `cuda.bindings.driver`, for testing the GPU path without a GPU.

It implements the subset pyptx uses with the same calling convention (every call returns
`(CUresult, *outputs)`, enums are the real ones from cuda.bindings), records every call, keeps
"device memory" in numpy byte buffers, reads `kernelParams` through the real `void**` the code
under test built, and decodes each parameter with the sizes the loaded PTX's `.param` list gives.
A test can register a Python "kernel body" per entry name to act on device memory.
"""
from __future__ import annotations

import ctypes
import re
import struct

import numpy as np
from cuda.bindings import driver as _real

R = _real.CUresult
_PARAM_SIZE = {"u64": 8, "s64": 8, "b64": 8, "f64": 8, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
               "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u8": 1, "s8": 1, "b8": 1}
_PARAM_FMT = {"u64": "<Q", "s64": "<q", "b64": "<Q", "f64": "<d", "u32": "<I", "s32": "<i",
              "b32": "<I", "f32": "<f", "u16": "<H", "s16": "<h", "b16": "<H", "f16": "<e",
              "u8": "<B", "s8": "<b", "b8": "<B"}
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)\s+([\w$]+)")
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


class FakeDriver:
    CUresult = _real.CUresult
    CUjit_option = _real.CUjit_option
    CUdevice_attribute = _real.CUdevice_attribute
    CUfunction_attribute = _real.CUfunction_attribute

    def __init__(self, cc=(8, 0), version=12080, devices=1, name="Fake GPU",
                 shared_optin=101376, library=True):
        self.cc, self.version, self.devices, self.name = cc, version, devices, name
        self.library = library
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
        self.fail: dict = {}          # function name -> CUresult it returns instead
        self.jit_log = None           # set: cuModuleLoadDataEx fails with this error log
        self.memory: dict = {}        # base address -> np.uint8 buffer
        self._next = 0x7F00_0000_0000
        self.modules: dict = {}       # handle -> {entry: [(ptx_type, name), ...]}
        self.functions: dict = {}     # handle -> (entry, params)
        self.func_attrs: dict = {}
        self.bodies: dict = {}        # entry -> callable(fake, launch)
        self.launches: list = []
        self.initialised = False

    # -- bookkeeping ---------------------------------------------------------------------------
    def _call(self, name, *args):
        self.calls.append((name, args))
        if not self.library:
            raise LibraryNotFound('"cuda" is an NVIDIA driver library and can only be found '
                                  'via system search')
        return self.fail.get(name)

    def count(self, name) -> int:
        return sum(1 for c in self.calls if c[0] == name)

    def _locate(self, addr, n):
        for base, buf in self.memory.items():
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        raise AssertionError(f"fake device: access [{addr:#x}, +{n}) outside any allocation")

    def view(self, addr, dtype, count):
        """A numpy view of emulated device memory (for kernel bodies and asserts)."""
        dt = np.dtype(dtype)
        buf, off = self._locate(addr, dt.itemsize * count)
        return buf[off:off + dt.itemsize * count].view(dt)

    # -- errors, init, device --------------------------------------------------------------------
    def cuGetErrorName(self, err):
        return (R.CUDA_SUCCESS, R(err).name.encode())

    def cuGetErrorString(self, err):
        return (R.CUDA_SUCCESS, f"fake: {R(err).name.lower()}".encode())

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
        return (e, None) if e is not None else (R.CUDA_SUCCESS, ordinal)

    def cuDeviceGetName(self, length, dev):
        e = self._call("cuDeviceGetName", length, dev)
        return (e, None) if e is not None else (
            R.CUDA_SUCCESS, self.name.encode().ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attr, dev):
        e = self._call("cuDeviceGetAttribute", attr, dev)
        return (e, None) if e is not None else (R.CUDA_SUCCESS, self.attrs[attr.name])

    def cuDevicePrimaryCtxRetain(self, dev):
        e = self._call("cuDevicePrimaryCtxRetain", dev)
        return (e, None) if e is not None else (R.CUDA_SUCCESS, "ctx0")

    def cuCtxSetCurrent(self, ctx):
        e = self._call("cuCtxSetCurrent", ctx)
        return (e or R.CUDA_SUCCESS,)

    def cuCtxSynchronize(self):
        return (self._call("cuCtxSynchronize") or R.CUDA_SUCCESS,)

    # -- modules -----------------------------------------------------------------------------------
    def cuModuleLoadDataEx(self, image, n, options, values):
        e = self._call("cuModuleLoadDataEx", image, n, options, values)
        assert isinstance(image, bytes) and image.endswith(b"\0"), "PTX must be NUL-terminated"
        assert n == len(options) == len(values)
        opts = dict(zip(options, values))
        if e is None and self.jit_log is not None:
            e = R.CUDA_ERROR_INVALID_PTX
        ptx = image[:-1].decode()
        m = _VERSION.search(ptx)
        max_ptx = (self.version // 1000 - 4, (self.version % 1000) // 10)
        if e is None and m and (int(m.group(1)), int(m.group(2))) > max_ptx:
            e = R.CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        if e is not None:
            log = (self.jit_log or "ptxas fatal: fake error").encode()
            buf = opts.get(self.CUjit_option.CU_JIT_ERROR_LOG_BUFFER)
            size = opts.get(self.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 0)
            if buf is not None:
                k = min(len(log), size - 1)
                buf[:k] = log[:k]
                buf[k] = 0
            return (e, None)
        handle = f"module{len(self.modules)}"
        self.modules[handle] = {name: _PARAM.findall(body)
                                for name, body in _ENTRY.findall(ptx)}
        return (R.CUDA_SUCCESS, handle)

    def cuModuleGetFunction(self, module, name):
        e = self._call("cuModuleGetFunction", module, name)
        if e is not None:
            return (e, None)
        entry = name.decode()
        if entry not in self.modules[module]:
            return (R.CUDA_ERROR_NOT_FOUND, None)
        handle = f"func{len(self.functions)}"
        self.functions[handle] = (entry, self.modules[module][entry])
        return (R.CUDA_SUCCESS, handle)

    def cuFuncSetAttribute(self, func, attr, value):
        e = self._call("cuFuncSetAttribute", func, attr, value)
        if e is None:
            self.func_attrs[(func, attr)] = value
        return (e or R.CUDA_SUCCESS,)

    # -- memory --------------------------------------------------------------------------------------
    def cuMemAlloc(self, n):
        e = self._call("cuMemAlloc", n)
        if e is not None:
            return (e, None)
        base = self._next
        self._next += (n + 255) // 256 * 256 + 256
        self.memory[base] = np.full(n, 0xAB, np.uint8)      # garbage, like real memory
        return (R.CUDA_SUCCESS, base)

    def cuMemFree(self, ptr):
        e = self._call("cuMemFree", ptr)
        if e is None:
            del self.memory[int(ptr)]
        return (e or R.CUDA_SUCCESS,)

    def cuMemcpyHtoD(self, dst, src, n):
        e = self._call("cuMemcpyHtoD", dst, src, n)
        if e is None:
            buf, off = self._locate(int(dst), n)
            buf[off:off + n] = np.frombuffer(ctypes.string_at(src, n), np.uint8)
        return (e or R.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, dst, src, n):
        e = self._call("cuMemcpyDtoH", dst, src, n)
        if e is None:
            buf, off = self._locate(int(src), n)
            ctypes.memmove(dst, buf[off:off + n].tobytes(), n)
        return (e or R.CUDA_SUCCESS,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        r = self.cuMemcpyHtoD(dst, src, n)
        self.calls[-1] = ("cuMemcpyHtoDAsync", (dst, src, n, stream))
        return r

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        r = self.cuMemcpyDtoH(dst, src, n)
        self.calls[-1] = ("cuMemcpyDtoHAsync", (dst, src, n, stream))
        return r

    # -- streams and events --------------------------------------------------------------------------
    def cuStreamCreate(self, flags):
        e = self._call("cuStreamCreate", flags)
        return (e, None) if e is not None else (R.CUDA_SUCCESS, 0x5000 + len(self.calls))

    def cuStreamSynchronize(self, stream):
        return (self._call("cuStreamSynchronize", stream) or R.CUDA_SUCCESS,)

    def cuStreamDestroy(self, stream):
        return (self._call("cuStreamDestroy", stream) or R.CUDA_SUCCESS,)

    def cuEventCreate(self, flags):
        e = self._call("cuEventCreate", flags)
        return (e, None) if e is not None else (R.CUDA_SUCCESS, len(self.calls))

    def cuEventRecord(self, event, stream):
        return (self._call("cuEventRecord", event, stream) or R.CUDA_SUCCESS,)

    def cuEventSynchronize(self, event):
        return (self._call("cuEventSynchronize", event) or R.CUDA_SUCCESS,)

    def cuEventElapsedTime(self, start, end):
        e = self._call("cuEventElapsedTime", start, end)
        return (e, None) if e is not None else (R.CUDA_SUCCESS, 0.25 * (end - start))

    # -- launch ----------------------------------------------------------------------------------------
    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params, extra):
        e = self._call("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream,
                       kernel_params, extra)
        if e is not None:
            return (e,)
        entry, params = self.functions[f]
        assert isinstance(kernel_params, int) and (kernel_params or not params)
        decoded, raw, pointers = {}, {}, {}
        for i, (ptype, name) in enumerate(params):
            p = ctypes.c_void_p.from_address(kernel_params + 8 * i).value
            data = ctypes.string_at(p, _PARAM_SIZE[ptype])
            pointers[name], raw[name] = p, data
            decoded[name] = struct.unpack(_PARAM_FMT[ptype], data)[0]
        launch = Launch(entry, (gx, gy, gz), (bx, by, bz), shared, stream, decoded, raw,
                        pointers)
        self.launches.append(launch)
        body = self.bodies.get(entry)
        if body is not None:
            body(self, launch)
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
