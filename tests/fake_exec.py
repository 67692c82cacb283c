"""The fake driver's bridge to pyptx's CPU executor (a mixin of `fake_driver.FakeDriver`): a
launch without a registered Python body runs its module's PTX on the executor, over the fake's
device memory, and a fault in it becomes the context's sticky error (`FakeFault`).

Separate from fake_driver.py because it is the one place the fake reaches into the CPU executor
(pyptx.runtime.cpu); the driver calls themselves (cuLaunchKernel queues the work) stay there.
"""
from __future__ import annotations

import numpy as np
from cuda.bindings import driver as _real

R = _real.CUresult


class FakeFault(Exception):
    """A kernel body touched memory outside every allocation (the real GPU's illegal address).

    `error`: the CUresult the context is then stuck with (a PTX kernel that the CPU executor
    stops with a LaunchError, e.g. a barrier only part of a block reaches, is a launch failure)."""

    def __init__(self, message="", error=None):
        super().__init__(message)
        self.error = error if error is not None else _real.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


class _TensorMapArg:
    """A launch's tensor-map parameter (128 bytes this fake encoded) as the CPU executor's
    launcher takes one: the array it describes, a strided view of the fake's device memory,
    and its encoding at the executor's heap address."""

    def __init__(self, fake, raw):
        from pyptx.runtime.cpu.tma import decode
        m = decode(raw)
        if m is None:
            raise FakeFault("fake device: a tensor-map parameter that cuTensorMapEncodeTiled "
                            "did not make", R.CUDA_ERROR_INVALID_VALUE)
        self.m = m
        self.writable = True             # a view of device memory: stores land there
        hit = fake._allocation_at(m["address"])
        if hit is None:
            raise FakeFault("fake device: a tensor map of freed memory")
        buf, off = hit
        self.array = np.ndarray(tuple(m["dims"][::-1]), np.dtype(f"u{m['elem_bytes']}"),
                                buffer=buf, offset=off, strides=tuple(m["strides"][::-1]))

    def host_array(self):
        return self.array

    def encode_at(self, address):
        from pyptx.runtime.cpu.tma import SWIZZLE_BYTES, encode
        m = self.m
        code = {v: k for k, v in SWIZZLE_BYTES.items()}[m["swizzle"]]
        return encode(m["dtype"], address, m["dims"], m["strides"][1:], m["box"],
                      m["element_strides"], code, m["interleave"], m["l2"], m["oob_fill"])


class ExecutorBridge:
    """Device memory lookup and running a launch's PTX on the CPU executor."""

    def _allocation_at(self, addr):
        """(buffer, offset) of the allocation holding byte `addr`, or None."""
        for base, buf in self.memory.items():
            if base <= addr < base + len(buf):
                return buf, addr - base
        return None

    def execute(self, ptx, params, launch):
        """Run the launch's PTX on pyptx's CPU executor, on the fake's device memory: a pointer
        parameter (.u64/.b64/.s64 whose value lies in an allocation) becomes a writable view of
        that allocation from the address to its end (the executor merges views of one
        allocation into one region, so two pointers into it alias as on a GPU); every other
        parameter passes its value (an f16 .b16 its raw bits).  Memory is updated only when the
        kernel completes; a fault raises FakeFault (the context's sticky error)."""
        from pyptx.errors import LaunchError, MemoryFault
        from pyptx.runtime.cpu.launch import ArrayArg, launch as cpu_launch
        args = []
        for ptype, name in params:
            value = launch.params[name]
            if ptype == "b8[128]":          # a tensor map this fake encoded: see _TensorMapArg
                args.append(_TensorMapArg(self, value))
                continue
            hit = self._allocation_at(value) if ptype in ("u64", "b64", "s64") else None
            args.append(ArrayArg(hit[0][hit[1]:], True) if hit is not None else value)
        try:
            cpu_launch(ptx, launch.entry, launch.grid, launch.block, args, launch.shared)
        except MemoryFault as e:
            raise FakeFault(str(e)) from e
        except LaunchError as e:           # e.g. a barrier only part of a block reaches
            raise FakeFault(str(e), R.CUDA_ERROR_LAUNCH_FAILED) from e
