"""What the current GPU and driver can do: compute capability → arch, limits, PTX ISA ceiling.

The launch path asks `current_arch()` for the target and `max_ptx_version()` for the highest
`.version` the driver's JIT accepts; `python -m pyptx info` prints `describe()`.  None of these
ever raise for a missing driver or GPU: that is a normal situation (CPU executor).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..target import KNOWN_ARCHS, MIN_CC, arch_for_cc  # noqa: F401  (shared with the compiler)

#: First CUDA release (driver version, as cuDriverGetVersion reports it) that loads each PTX ISA
#: version — NVIDIA's PTX release history.  12.6 is still 8.5; 8.6 came with 12.7.
_PTX_BY_DRIVER = (
    (13010, "9.1"), (13000, "9.0"),
    (12090, "8.8"), (12080, "8.7"), (12070, "8.6"), (12050, "8.5"), (12040, "8.4"),
    (12030, "8.3"), (12020, "8.2"), (12010, "8.1"), (12000, "8.0"),
    (11080, "7.8"), (11070, "7.7"), (11060, "7.6"), (11050, "7.5"), (11040, "7.4"),
    (11030, "7.3"), (11020, "7.2"), (11010, "7.1"), (11000, "7.0"),
)

#: limits used when there is no GPU (the CPU executor emulates a generic sm_80-class device)
CPU_MAX_SHARED = 48 * 1024
DEFAULT_MAX_SHARED = 48 * 1024


def ptx_version_for_driver(driver_version: int) -> str:
    """The newest PTX ISA a driver of this CUDA version can JIT (e.g. 12080 → '8.7').

    Releases newer than the table follow the 13.x → 9.x pattern (13.2 → 9.2)."""
    major, minor = driver_version // 1000, (driver_version % 1000) // 10
    if major >= 13 and driver_version > _PTX_BY_DRIVER[0][0]:
        return f"{major - 4}.{minor}"
    for first, ptx in _PTX_BY_DRIVER:
        if driver_version >= first:
            return ptx
    return "6.5"   # older than CUDA 11: such a driver cannot run any arch pyptx targets anyway


@dataclass(frozen=True)
class GpuProfile:
    """One GPU as pyptx sees it; built once per device from the driver's attributes."""
    name: str
    cc: tuple
    arch: str
    sm_count: int
    max_shared_per_block: int          # without opt-in (48 KiB on every supported GPU)
    max_shared_per_block_optin: int    # with cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
    warp_size: int
    driver_version: int                # e.g. 12080 for CUDA 12.8
    max_ptx_version: str               # e.g. '8.7'
    max_threads_per_block: int = 1024

    @property
    def driver_version_str(self) -> str:
        return f"{self.driver_version // 1000}.{(self.driver_version % 1000) // 10}"


_profile_cache: dict = {}           # id(Context) -> GpuProfile (cleared by driver.reset)


def gpu_profile(ctx=None) -> GpuProfile:
    """The profile of `ctx`'s GPU (default: the calling thread's current device).  Raises
    DeviceError (with the reason) when there is none."""
    from . import driver
    if ctx is None:
        ctx = driver.context()      # raises DeviceError: no driver / no device / init failure
    hit = _profile_cache.get(id(ctx))
    if hit is not None:
        return hit
    a = ctx.attributes()
    major, minor = a["cc_major"], a["cc_minor"]
    try:
        arch = arch_for_cc(major, minor)
    except ValueError as e:
        from ..errors import DeviceError
        raise DeviceError(str(e), error_name="GPU_TOO_OLD") from None
    version = driver.driver_version()
    prof = GpuProfile(name=ctx.name(), cc=(major, minor), arch=arch, sm_count=a["sm_count"],
                      max_shared_per_block=a["max_shared"],
                      max_shared_per_block_optin=max(a["max_shared_optin"], a["max_shared"]),
                      warp_size=a["warp_size"], driver_version=version,
                      max_ptx_version=ptx_version_for_driver(version),
                      max_threads_per_block=a["max_threads"])
    _profile_cache[id(ctx)] = prof
    return prof


def current_arch() -> str | None:
    """The arch of the calling thread's current GPU, or None when there is no usable GPU.
    Never raises."""
    try:
        return gpu_profile().arch
    except Exception:  # noqa: BLE001 - any driver trouble means "no GPU" here
        return None


def max_ptx_version() -> str | None:
    """The newest PTX ISA the installed driver JITs ('8.7'), or None without a driver.

    The compiler caps `.version` at this (an older driver rejects a newer `.version` with
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION).  Never raises."""
    try:
        from . import driver
        return ptx_version_for_driver(driver.driver_version())
    except Exception:  # noqa: BLE001
        return None


def describe() -> str:
    """The text `python -m pyptx info` prints: the GPU and chosen arch, or why the CPU runs."""
    from .launch import device_reason
    try:
        p = gpu_profile()
    except Exception as e:  # noqa: BLE001
        from .driver import with_fix
        reason = device_reason() or with_fix(e)
        return f"no GPU: CPU executor (reason: {reason})"
    lines = [
        f"GPU: {p.name}",
        f"compute capability: {p.cc[0]}.{p.cc[1]}",
        f"arch: {p.arch}",
        f"SMs: {p.sm_count}, warp size: {p.warp_size}",
        f"shared memory per block: {p.max_shared_per_block} bytes "
        f"(opt-in {p.max_shared_per_block_optin})",
        f"driver: CUDA {p.driver_version_str} (PTX ISA up to {p.max_ptx_version})",
    ]
    from .launch import device
    try:
        lines.append(f"device used by launches: {device()}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"device used by launches: none ({e})")
    return "\n".join(lines)
