"""Which GPU architecture to compile for: the arch table and the default target.

Why a module of its own: the compiler needs a default arch ("the current GPU's, else sm_80")
and the runtime needs the same compute-capability → arch rule, but the compiler must never
import the runtime (stages depend one way: frontend → ir → passes → ptx → compiler → runtime).
Both use this module.  Nothing here runs at import time.
"""
from __future__ import annotations

import os
import sys

#: Architectures pyptx targets, as compute capability (major*10 + minor).  A GPU whose capability
#: is not listed gets the highest listed one below it (PTX JITs forward to newer GPUs).
#: `sm_90a`/`sm_100a` (arch-specific features) are never chosen automatically: their PTX does not
#: run on any other GPU.
KNOWN_ARCHS = (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121)
MIN_CC = 75
DEFAULT_ARCH = "sm_80"
#: the archs an error message suggests (pyptx.compile, the command line)
SUGGESTED_ARCHS = "sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a (or newer)"

#: arch -> lowest `.version` (x10) that knows it.  sm_75/sm_80 are pinned to 7.0 (the floor this
#: backend's instruction set needs); the rest are the PTX ISA's introduction versions.
ARCH_MIN_ISA: dict[str, int] = {
    "sm_75": 70, "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_88": 90, "sm_89": 78, "sm_90": 78,
    "sm_90a": 80,
    "sm_100": 86, "sm_100a": 86, "sm_100f": 88, "sm_101": 86, "sm_101a": 86, "sm_101f": 88,
    "sm_103": 88, "sm_103a": 88, "sm_103f": 88, "sm_110": 90, "sm_110a": 90, "sm_110f": 90,
    "sm_120": 87, "sm_120a": 87, "sm_120f": 88, "sm_121": 88, "sm_121a": 88, "sm_121f": 88,
}


def arch_for_cc(major: int, minor: int) -> str:
    """Compute capability → the `sm_XY` pyptx compiles for.  ValueError below 7.5."""
    cc = major * 10 + minor
    if cc < MIN_CC:
        raise ValueError(f"compute capability {major}.{minor} is too old: pyptx needs 7.5 "
                         f"(Turing) or newer")
    best = max(a for a in KNOWN_ARCHS if a <= cc)
    return f"sm_{best}"


def runs_on(kernel_arch: str, device_arch: str) -> bool:
    """Can PTX compiled for `kernel_arch` run on a GPU pyptx targets as `device_arch` (both
    'sm_XY' with an optional suffix)?  Plain archs run on themselves and newer GPUs (the driver
    JITs forward); an arch-specific one (`sm_90a`) runs only on exactly that compute capability;
    a family one (`sm_100f`) on that major version at or above its minor."""
    def split(a):
        body = a[3:]
        suffix = body[-1] if body[-1:].isalpha() else ""
        return int(body[:len(body) - len(suffix)]), suffix
    k, ks = split(kernel_arch)
    d, _ = split(device_arch)
    if ks == "a":
        return k == d
    if ks == "f":
        return k // 10 == d // 10 and d >= k
    return d >= k


_default: dict = {}     # PYPTX_DEVICE value -> arch


def default_arch() -> str:
    """The arch of CUDA device 0 when a GPU may be used (`PYPTX_DEVICE` is not `cpu`), else
    sm_80.  Looked up once per value of `PYPTX_DEVICE`.  Never raises."""
    mode = os.environ.get("PYPTX_DEVICE", "auto")
    hit = _default.get(mode)
    if hit is None:
        arch = None
        if mode.strip().lower() != "cpu" and _gpu_may_exist():
            arch = _device0_arch()
        hit = _default[mode] = arch or DEFAULT_ARCH
    return hit


#: the pid of the process that called cuInit (here or in the runtime), or None: CUDA cannot be
#: used in a child forked after that, whether or not a context was ever created
CUDA_INITIALISED_IN: list = [None]


def _gpu_may_exist() -> bool:
    """Cheap pre-check before importing the driver bindings (~30 ms): on Linux an NVIDIA driver
    always creates /dev/nvidiactl (WSL: /dev/dxg)."""
    if not sys.platform.startswith("linux"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")


def _device0_arch() -> str | None:
    """Device 0's compute capability straight from the driver (no context is created)."""
    try:
        import cuda.bindings.driver as drv
        ok = drv.CUresult.CUDA_SUCCESS
        if drv.cuInit(0)[0] != ok:
            return None
        CUDA_INITIALISED_IN[0] = os.getpid()      # a forked child must not use CUDA now
        err, dev = drv.cuDeviceGet(0)
        if err != ok:
            return None
        a = drv.CUdevice_attribute
        e1, major = drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        e2, minor = drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        if e1 != ok or e2 != ok:
            return None
        return arch_for_cc(int(major), int(minor))
    except Exception:  # noqa: BLE001 - no bindings, no libcuda, too old: no GPU to target
        return None
