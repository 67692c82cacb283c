"""Which GPUs there are and which one the calling thread launches on (docs/launching.md,
"Devices").

`pyptx.devices()` lists the GPUs (an empty list on the CPU executor); `pyptx.use_device(i)`
selects the calling thread's device, and used as `with pyptx.use_device(i):` selects it for the
block only.  A new thread starts on device 0, as with the CUDA runtime.  Arrays, modules,
launch plans and limits belong to one device: `DeviceArray.device` says which.  The selection
itself lives in `driver` (`current_ordinal`/`select`); this module validates it and describes
devices.
"""
from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

from ..errors import DeviceError
from . import driver

#: what the CPU executor calls itself where a device object is asked for
CPU_EXECUTOR_NAME = "pyptx CPU executor"


@dataclass(frozen=True)
class Device:
    """One CUDA device: `id` (its ordinal), `name`, `compute_capability` ((major, minor)) and
    `total_memory` (bytes).  `with device:` launches on it inside the block (like
    `with pyptx.use_device(device.id):`)."""
    id: int
    name: str
    compute_capability: tuple
    total_memory: int

    @property
    def arch(self) -> str | None:
        """The `sm_XY` pyptx compiles for on this device (None: too old for pyptx)."""
        from ..target import arch_for_cc
        try:
            return arch_for_cc(*self.compute_capability)
        except ValueError:
            return None

    def __enter__(self) -> "Device":
        _entered_stack().append(use_device(self.id))
        return self

    def __exit__(self, *exc) -> bool:
        _entered_stack().pop().__exit__(*exc)
        return False

    def __repr__(self) -> str:
        cc = ".".join(str(c) for c in self.compute_capability)
        mem = f", {self.total_memory / (1 << 30):.1f} GiB" if self.total_memory else ""
        return f"<pyptx.Device {self.id}: {self.name} (compute capability {cc}{mem})>"


_entered = threading.local()          # .stack: selections made by `with device:`, per thread
_cache: dict = {}                     # (driver epoch, ordinal) -> Device


def _entered_stack() -> list:
    stack = getattr(_entered, "stack", None)
    if stack is None:
        stack = _entered.stack = []
    return stack


def _on_cpu() -> bool:
    from .launch import device
    return device() == "cpu"


def devices() -> list:
    """The CUDA devices launches can use, by ordinal: `Device` objects (name, compute
    capability, total memory).  An empty list when launches run on the CPU executor
    (`PYPTX_DEVICE=cpu`, or no usable GPU); DeviceError with `PYPTX_DEVICE=gpu` and no GPU."""
    if _on_cpu():
        return []
    return [get_device(i) for i in range(driver.device_count())]


def get_device(ordinal: int) -> Device:
    """The `Device` with this ordinal (queried from the driver once; no context is made)."""
    key = (driver._epoch[0], ordinal)
    dev = _cache.get(key)
    if dev is None:
        p = driver.device_properties(ordinal)
        dev = _cache[key] = Device(ordinal, p["name"], p["cc"], p["total_memory"])
    return dev


def cpu_device() -> Device:
    """What the CPU executor says where a device object is asked for (Numba's simulator does
    the same): id 0, the compute capability of the arch it runs, no GPU memory."""
    from ..target import default_arch
    digits = default_arch()[3:].rstrip("abf")
    return Device(0, CPU_EXECUTOR_NAME, (int(digits[:-1]), int(digits[-1])), 0)


def current_device() -> Device:
    """The calling thread's device (the CPU executor's pseudo-device on the CPU)."""
    if _on_cpu():
        return cpu_device()
    return get_device(driver.current_ordinal())


def _ordinal_of(dev) -> int:
    if isinstance(dev, Device):
        return dev.id
    if isinstance(dev, bool):
        raise TypeError(f"a device is an int ordinal or a pyptx.Device, got bool {dev!r}")
    try:
        return operator.index(dev)
    except TypeError:
        raise TypeError(f"a device is an int ordinal or a pyptx.Device, got "
                        f"{type(dev).__name__} {dev!r}") from None


class DeviceSelection:
    """What `use_device` returns: the switch has happened already; as a context manager it
    gives the `Device` and switches back to the previous device on exit."""

    __slots__ = ("ordinal", "previous")

    def __init__(self, ordinal: int, previous: int):
        self.ordinal, self.previous = ordinal, previous

    def __enter__(self) -> Device:
        return cpu_device() if _on_cpu() else get_device(self.ordinal)

    def __exit__(self, *exc) -> bool:
        driver.select(self.previous)
        return False

    def __repr__(self) -> str:
        return f"<pyptx.use_device({self.ordinal})>"


def use_device(dev) -> DeviceSelection:
    """Launch (and allocate) on CUDA device `dev` (an ordinal or a `Device`) from the calling
    thread on; `with pyptx.use_device(i) as d:` does so for the block only, then goes back.

    The device's context is made now, so a device that does not exist or cannot be used is a
    DeviceError here (error_name CUDA_ERROR_INVALID_DEVICE for an ordinal the driver does not
    have), not at the next launch; a non-integer is a TypeError.  On the CPU executor only
    device 0 exists (selecting it does nothing)."""
    ordinal = _ordinal_of(dev)
    if _on_cpu():
        if ordinal != 0:
            from .launch import device_reason
            raise DeviceError(f"there is no CUDA device {ordinal}: launches run on the CPU "
                              f"executor ({device_reason()}), which is device 0 only",
                              error_name="CUDA_ERROR_INVALID_DEVICE")
        return DeviceSelection(0, driver.select(0))
    count = driver.device_count()
    if not 0 <= ordinal < count:
        raise DeviceError(f"there is no CUDA device {ordinal}: the driver reports {count} "
                          f"device{'s' if count != 1 else ''} (ordinals 0 to {count - 1})",
                          error_name="CUDA_ERROR_INVALID_DEVICE")
    from . import profile
    ctx = driver.context(ordinal)       # retained now: an unusable device fails here
    profile.gpu_profile(ctx)            # ... and so does one too old for pyptx
    return DeviceSelection(ordinal, driver.select(ordinal))
