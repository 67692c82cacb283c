"""Host side of `pyptx.cuda` (Numba-CUDA's spellings): streams, events and host arrays.

On the GPU a `cuda.stream()` owns a driver stream (`pyptx.runtime.streams.Stream`) and a
`cuda.event()` a driver event; on the CPU executor, where every launch and copy is synchronous,
a stream is a no-op handle (handle 0) and an event records the host clock
(`time.perf_counter`), so `event_elapsed_time` gives the host milliseconds between two records
(the CPU executor's run time, a real measurement rather than Numba's simulator's -1.0).
"""
from __future__ import annotations

import contextlib
import time

import numpy as np


def _on_gpu() -> bool:
    from .runtime.launch import device
    return device() == "gpu"


class Stream:
    """Numba's `cuda.stream()`: pass it as `k[grid, block, stream]`, to `cuda.to_device(a,
    stream=s)`, `d.copy_to_host(stream=s)`, `event.record(s)`; `s.synchronize()` waits for it.
    The copies given a stream are synchronous in pyptx (the stream's queued work first)."""

    def __init__(self, drv=None, handle: int = 0, name: str = "stream"):
        self._drv = drv           # a runtime.streams.Stream on the GPU (a user stream), else None
        self._handle = handle     # default streams: 0 (legacy behaviour), 1 legacy, 2 per thread
        self._name = name

    @property
    def handle(self) -> int:
        """The CUstream handle as an int (0 on the CPU executor)."""
        if self._drv is not None:
            from .runtime.streams import stream_handle
            return stream_handle(self._drv)
        return self._handle

    def __int__(self) -> int:
        return self.handle

    def __cuda_stream__(self):
        return (0, self.handle)

    def _launch_stream(self):
        """What pyptx's launcher takes as `stream=` for this stream."""
        if self._drv is not None:
            return self._drv
        return self._handle if (self._handle and _on_gpu()) else None

    def synchronize(self) -> None:
        """Wait until the work queued on this stream has finished (no-op on the CPU executor)."""
        if self._drv is not None:
            self._drv.synchronize()
        elif _on_gpu():
            from .runtime import streams
            streams.synchronize(api="Stream.synchronize()")

    @contextlib.contextmanager
    def auto_synchronize(self):
        """`with stream.auto_synchronize():` synchronises the stream when the block ends."""
        yield self
        self.synchronize()

    def __repr__(self) -> str:
        where = "GPU" if self._drv is not None else ("default" if self._handle else "CPU executor")
        return f"<pyptx.cuda {self._name} {self.handle:#x} ({where})>"


def stream() -> Stream:
    """A new stream (a driver stream on the GPU; on the CPU executor a no-op handle)."""
    if _on_gpu():
        from .runtime.streams import Stream as DriverStream
        return Stream(DriverStream())
    return Stream()


def default_stream() -> Stream:
    return Stream(handle=0, name="default_stream")


def legacy_default_stream() -> Stream:
    return Stream(handle=1, name="legacy_default_stream")


def per_thread_default_stream() -> Stream:
    return Stream(handle=2, name="per_thread_default_stream")


def launch_stream(s):
    """`k[g, b, s]`'s `s` (a cuda Stream, 0/None, a pyptx Stream, a handle, a foreign stream) ->
    the `stream=` pyptx's launcher takes (None for the default stream and on the CPU executor)."""
    if s is None or (type(s) is int and s == 0):
        return None
    if isinstance(s, Stream):
        return s._launch_stream()
    return s


def sync_stream(s) -> None:
    """Before a synchronous copy given `stream=s`: wait for the work queued on `s`."""
    if s is None or (type(s) is int and s == 0):
        return
    if isinstance(s, Stream):
        s.synchronize()
    elif hasattr(s, "synchronize"):
        s.synchronize()


class Event:
    """Numba's `cuda.event()`: `e.record(stream=0)`, `e.synchronize()`, `e.wait(stream=0)`,
    `e.query()`, `e0.elapsed_time(e1)` (milliseconds, as `cuda.event_elapsed_time(e0, e1)`)."""

    def __init__(self, timing: bool = True):
        self.timing = timing
        self._drv = None
        self._t = None            # CPU executor: the host clock at record()
        if _on_gpu():
            from .runtime.streams import Event as DriverEvent
            self._drv = DriverEvent()

    def record(self, stream=0) -> None:
        if self._drv is not None:
            self._drv.record(launch_stream(stream))
        else:
            self._t = time.perf_counter()

    def synchronize(self) -> None:
        if self._drv is not None:
            self._drv.synchronize()

    def wait(self, stream=0) -> None:
        """Make `stream` wait for this event (no-op on the CPU executor)."""
        if self._drv is None:
            return
        from .runtime.streams import stream_handle
        ctx = self._drv._ctx
        h = stream_handle(launch_stream(stream)) or ctx.home
        ctx.call("cuStreamWaitEvent", ctx.drv.cuStreamWaitEvent, h, self._drv.handle, 0)

    def query(self) -> bool:
        """True when the work before the record has finished (always on the CPU executor)."""
        if self._drv is None:
            return True
        ctx = self._drv._ctx
        err = ctx.drv.cuEventQuery(self._drv.handle)
        err = err[0] if isinstance(err, tuple) else err
        return int(err) == 0

    def elapsed_time(self, evtend: "Event") -> float:
        """Milliseconds from this event's record to `evtend`'s."""
        if not (self.timing and evtend.timing):
            raise ValueError("elapsed_time needs two events created with timing=True")
        if self._drv is not None and evtend._drv is not None:
            return evtend._drv.elapsed_ms(self._drv)
        if self._t is None or evtend._t is None:
            raise ValueError("elapsed_time: both events must be recorded first (event.record())")
        return (evtend._t - self._t) * 1000.0

    def __repr__(self) -> str:
        return f"<pyptx.cuda event ({'GPU' if self._drv is not None else 'CPU executor'})>"


def event(timing: bool = True) -> Event:
    return Event(timing)


def event_elapsed_time(evtstart: Event, evtend: Event) -> float:
    """Milliseconds between two recorded events (CPU executor: host time between the records)."""
    return evtstart.elapsed_time(evtend)


# ---- host arrays ----------------------------------------------------------------------------

def np_dtype(dtype) -> np.dtype:
    """A numpy dtype from a numpy dtype/type, a pyptx type (`float32` from `pyptx` or
    `pyptx.cuda`) or a Numba type object."""
    from . import types as T
    if isinstance(dtype, T.ScalarType):
        return dtype.dtype
    if type(dtype).__module__.startswith("numba."):
        t = T.from_numba_type(dtype)
        if isinstance(t, T.ScalarType):
            return t.dtype
    return np.dtype(dtype)


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A host array (numpy; pageable memory: pyptx's copies are synchronous, so pinning would
    only speed them up)."""
    if strides is not None:
        raise ValueError("pinned_array: strides are not supported (use order='C' or 'F')")
    return np.empty(shape, np_dtype(dtype), order=order)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """A host array kernels may take directly: pyptx copies a numpy argument in and out around
    each launch, so a kernel's writes are visible on the host when the launch returns (on the
    GPU after `cuda.synchronize()` at the latest), as with Numba's mapped memory."""
    return pinned_array(shape, dtype, strides, order)


def pinned_array_like(ary):
    return pinned_array(np.shape(ary), ary.dtype, order="F" if _is_f(ary) else "C")


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return pinned_array_like(ary)


def _is_f(ary) -> bool:
    flags = getattr(ary, "flags", None)
    return bool(flags is not None and flags.f_contiguous and not flags.c_contiguous)


@contextlib.contextmanager
def pinned(*arylist):
    """`with cuda.pinned(a, b):` (nothing to do: pyptx's copies work on pageable memory)."""
    yield


@contextlib.contextmanager
def mapped(*arylist, stream=0):
    """`with cuda.mapped(a) as d:` yields the host arrays themselves (kernels take them)."""
    yield arylist[0] if len(arylist) == 1 else list(arylist)
