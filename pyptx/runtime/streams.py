"""Streams and events through the driver: `synchronize()`, pyptx's `Stream` and `Event`, what
a user's `stream=` is as a driver handle (`stream_handle`), and the thread's stream-capture
mode.  `pyptx.runtime.driver` re-exports `Stream`, `Event` and `synchronize` (public names).

Separate from `driver.py` (the driver object, errors, contexts, modules and functions) because
these are the user-facing ordering objects, built on a `driver.Context`; the default stream
pyptx itself uses (`home_stream_handle`) stays with the context in driver.py.
"""
from __future__ import annotations

import os
import weakref

from ..errors import LaunchError
from .driver import Context, _contexts, check, context, get_driver, handle_int

def synchronize(stream=None, ctx: "Context | None" = None,
                api: str = "pyptx.synchronize()") -> None:
    """Wait for `stream` (or, with None, the whole context: `ctx`, default the calling
    thread's device's); then run deferred releases.  Inside `with pyptx.graph()` a
    LaunchError (CUDA forbids synchronising there)."""
    from .graph import check as capture_check
    capture_check("cuCtxSynchronize" if stream is None else "cuStreamSynchronize", api)
    ctx = ctx or context()
    drv = ctx.drv
    pushed = ctx.enter()
    try:
        if stream is None:
            check(drv.cuCtxSynchronize(), "cuCtxSynchronize", drv)
        else:
            check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize", drv)
        ctx.reap()
    finally:
        ctx.leave(pushed)


def _destroy(ctx: Context, fn_name: str, handle) -> None:
    """Finalizer of a Stream/Event: destroy the handle if its context still lives.  Never
    raises (it may run in any thread, or at interpreter exit)."""
    try:
        if ctx.alive and _contexts.get(ctx.ordinal) is ctx and ctx.pid == os.getpid():
            ctx.call(fn_name, getattr(ctx.drv, fn_name), handle)
    except BaseException:  # noqa: BLE001
        pass


class Stream:
    """A CUDA stream owned by pyptx; pass it as `k[g, b](..., stream=s)`.  Destroyed by
    `close()` or when garbage-collected."""

    def __init__(self, non_blocking: bool = False):
        ctx = context()
        flags = 0
        if non_blocking:       # CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream
            flags = int(getattr(getattr(ctx.drv, "CUstream_flags", None),
                                "CU_STREAM_NON_BLOCKING", 1))
        self.handle = ctx.call("cuStreamCreate", ctx.drv.cuStreamCreate, flags)
        self._finalizer = weakref.finalize(self, _destroy, ctx, "cuStreamDestroy", self.handle)

    def synchronize(self) -> None:
        synchronize(stream_handle(self), api="Stream.synchronize()")

    def close(self) -> None:
        self._finalizer()
        self.handle = None

    def __cuda_stream__(self):
        return (0, stream_handle(self))


class Event:
    """A timing event: `e0.record(); ...; e1.record(); e1.elapsed_ms(e0)`.  Destroyed when
    garbage-collected."""

    def __init__(self):
        ctx = context()
        self._ctx = ctx
        self.handle = ctx.call("cuEventCreate", ctx.drv.cuEventCreate, 0)
        self._finalizer = weakref.finalize(self, _destroy, ctx, "cuEventDestroy", self.handle)

    def record(self, stream=None) -> None:
        self._ctx.call("cuEventRecord", self._ctx.drv.cuEventRecord, self.handle,
                       stream_handle(stream) or self._ctx.home)

    def synchronize(self) -> None:
        from .graph import check as capture_check
        capture_check("cuEventSynchronize", "Event.synchronize()")
        self._ctx.call("cuEventSynchronize", self._ctx.drv.cuEventSynchronize, self.handle)

    def elapsed_ms(self, start: "Event") -> float:
        """Milliseconds from `start` to this event (synchronises on this event)."""
        from .graph import check as capture_check
        capture_check("cuEventElapsedTime", "Event.elapsed_ms()")
        self.synchronize()
        return float(self._ctx.call("cuEventElapsedTime", self._ctx.drv.cuEventElapsedTime,
                                    start.handle, self.handle))


def stream_handle(stream):
    """Whatever the user passed as `stream=` → an int handle (None: the legacy default stream).
    Anything else is a LaunchError, raised before any work.

    Accepted: None, an int handle >= 0, a driver CUstream, a pyptx `Stream`, or any object
    with `__cuda_stream__` (cuda.core, CuPy >= 13), `.cuda_stream` (PyTorch) or `.ptr` (CuPy)."""
    if stream is None:
        return None
    t = type(stream)
    if t is int:
        if stream < 0:
            raise LaunchError(f"stream must be a stream handle >= 0, got {stream}")
        return stream
    if t is Stream:
        if stream.handle is None:
            raise LaunchError("stream= is a pyptx Stream that was closed")
        return handle_int(stream.handle)
    if isinstance(stream, bool) or isinstance(stream, (float, str, bytes)):
        raise LaunchError(f"stream must be None, a pyptx Stream, a CUstream, an int handle or "
                          f"an object with __cuda_stream__, got {t.__name__} {stream!r}")
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        try:
            return int(proto()[1])
        except Exception as e:  # noqa: BLE001
            raise LaunchError(f"stream=: {t.__name__}.__cuda_stream__() failed ({e})") from None
    for attr in ("cuda_stream", "ptr"):
        v = getattr(stream, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    if t.__name__ in ("CUstream", "cudaStream_t"):
        return handle_int(stream)        # a cuda.bindings handle
    if isinstance(stream, int):          # numpy / IntEnum-like ints
        return stream_handle(int(stream))
    raise LaunchError(f"stream must be None, a pyptx Stream, a CUstream, an int handle or an "
                      f"object with __cuda_stream__, got {t.__name__}")


def exchange_capture_mode(mode):
    """cuThreadExchangeStreamCaptureMode: set the calling thread's capture interaction mode
    (a CUstreamCaptureMode or its name) and return the previous one."""
    drv = get_driver()
    if isinstance(mode, str):
        mode = getattr(drv.CUstreamCaptureMode, mode)
    return check(drv.cuThreadExchangeStreamCaptureMode(mode), "cuThreadExchangeStreamCaptureMode",
                 drv)
