"""A caching pool of device buffers: the copies of numpy launch arguments, and the memory of
every `DeviceArray` (`pyptx.to_device`, `device_empty`, the stdlib's results).

Why: cuMemAlloc/cuMemFree cost far more than a launch, and cuMemFree "may synchronise" (the
driver documents no more): a decode step that allocated its 79 results and freed the last
step's spent 8 ms of host time per token on an H100, and correctness must not rest on that
"may".  Like CuPy's and PyTorch's allocators, sizes are rounded up to 512 bytes and a buffer
given back is kept for the next request of its size.

Stream order makes reuse safe without waiting: a buffer given back after work on stream S is
reused only by later work on S (which the GPU runs after the earlier work), so free lists are
kept per stream.  A DeviceArray's home stream is the legacy default stream (`HOME`); a launch
that uses it on another stream makes that stream wait for the home stream's work first, and its
release makes the home stream wait for that stream's work (`order_after`), so the buffer's next
user on the home stream runs after every launch that used it.  `free_cached()` synchronises the
context, then returns every idle buffer to the driver (also tried once when an allocation runs
out of memory).  The caller holds the context current.
"""
from __future__ import annotations

import os
import threading

ROUND = 512
HOME = 0          # the stream key of DeviceArray memory: the legacy default stream


class MemoryPool:
    """Idle device buffers of one context, by (stream handle, rounded size)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.idle: dict = {}         # (stream key, size) -> [device pointers]
        self.cached_bytes = 0
        self.in_use_bytes = 0
        self.lock = threading.Lock()  # launches from several threads share the free lists

    def alloc(self, nbytes: int, stream) -> tuple:
        """(device pointer, rounded size) of a buffer usable by work queued on `stream`."""
        size = -(-max(int(nbytes), 1) // ROUND) * ROUND
        with self.lock:
            free = self.idle.get((stream or 0, size))
            ptr = free.pop() if free else None
            if ptr is not None:
                self.cached_bytes -= size
                self.in_use_bytes += size
        if ptr is None:
            ptr = self._fresh(size)
            with self.lock:
                self.in_use_bytes += size
        return ptr, size

    def give_back(self, ptr: int, size: int, stream) -> None:
        """Keep `ptr` for later work on `stream` (the work queued so far may still use it)."""
        with self.lock:
            self.idle.setdefault((stream or 0, size), []).append(ptr)
            self.cached_bytes += size
            self.in_use_bytes -= size

    def _fresh(self, size: int) -> int:
        from .driver import check, handle_int
        from ..errors import DeviceError
        drv = self.ctx.drv
        try:
            return handle_int(check(drv.cuMemAlloc(size), f"cuMemAlloc({size})", drv))
        except DeviceError as e:
            if e.error_name != "CUDA_ERROR_OUT_OF_MEMORY" or not self.cached_bytes:
                raise
        self.free_cached()
        return handle_int(check(drv.cuMemAlloc(size), f"cuMemAlloc({size})", drv))

    def free_cached(self) -> None:
        """Synchronise the context (work queued before a buffer came back may still use it:
        idle means idle in stream order), then cuMemFree every idle buffer.  Every buffer is
        tried even when one fails (the first failure is raised after); a failed one is
        forgotten, not retried."""
        from .driver import check, run_all
        drv = self.ctx.drv
        with self.lock:
            idle, self.idle, self.cached_bytes = self.idle, {}, 0
        if not idle:
            return
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize (before freeing cached memory)", drv)
        run_all([lambda p=p: check(drv.cuMemFree(p), "cuMemFree", drv)
                 for ptrs in idle.values() for p in ptrs])


# ---- DeviceArray memory -----------------------------------------------------------------------

def usable(ctx) -> bool:
    """The context still exists in this process (not reset, not inherited over fork)."""
    from . import driver
    return (ctx is not None and ctx.alive and ctx.pid == os.getpid()
            and driver._contexts.get(ctx.ordinal) is ctx)


def alloc_array(ctx, nbytes: int) -> tuple:
    """(device pointer, pool size) for a DeviceArray of `nbytes` in `ctx`, home stream HOME."""
    pushed = ctx.enter()
    try:
        return ctx.pool.alloc(nbytes, HOME)
    finally:
        ctx.leave(pushed)


def order_after(ctx, waiter: int, stream: int) -> None:
    """Make `waiter` wait for the work queued on `stream` so far (an event, no host wait).
    Caller holds the context current."""
    from .driver import check
    drv = ctx.drv
    ev = ctx.event()
    try:
        check(drv.cuEventRecord(ev, stream or ctx.home), "cuEventRecord", drv)
        check(drv.cuStreamWaitEvent(waiter or ctx.home, ev, 0), "cuStreamWaitEvent", drv)
    finally:
        ctx.idle_event(ev)          # re-recording later does not change the wait queued now


def wait_for_producer(ctx, producer, stream) -> None:
    """CAI v3 `stream` of a foreign array: `stream` (the launch's, None/0 = pyptx's home)
    waits for the producer's queued work, unless it is that very stream (1 = legacy default,
    which is the home stream outside per-thread mode).  Caller holds the context current."""
    if producer is None:
        return
    mine = int(stream or ctx.home)
    producer = int(producer)
    if producer == mine or (producer == 1 and mine == 0):
        return
    order_after(ctx, mine, producer)


def _owner(array):
    """The DeviceArray that owns `array`'s memory (a view's base, followed to the end)."""
    while getattr(array, "_base", None) is not None:
        array = array._base
    return array


def used_on(array, stream: int) -> None:
    """A launch is about to use `array`'s memory on `stream` (not its home stream): the first
    time, `stream` waits for the home stream's work (the buffer's previous owner may still be
    using it there), and the stream is remembered for the release."""
    owner = _owner(array)
    streams = owner._streams
    if streams is None or stream in streams:
        return
    ctx = owner._ctx
    pushed = ctx.enter()
    try:
        order_after(ctx, stream, HOME)
    finally:
        ctx.leave(pushed)
    streams.append(stream)


def publish(array) -> None:
    """Before `array` is handed to another framework on the legacy default stream (the
    `stream` its `__cuda_array_interface__` names): the legacy stream waits for the work queued
    so far on every other stream pyptx used the array on, non-blocking ones included (which the
    legacy stream does not wait for by itself)."""
    owner = _owner(array)
    if not owner._streams:
        return
    ctx = owner._ctx
    pushed = ctx.enter()
    try:
        for s in owner._streams:
            order_after(ctx, HOME, s)
    finally:
        ctx.leave(pushed)


def release_array(ptr: int, size: int, ctx, streams: list) -> None:
    """A DeviceArray's finalizer: its buffer goes back to the pool, for later work on the home
    stream, once that stream waits for every other stream it was used on.  Never raises (it
    runs in whatever thread collects the array, or at exit); while this thread captures a
    graph it waits for the capture's end (CUDA forbids the event calls inside)."""
    try:
        from .graph import defer_while_capturing
        if defer_while_capturing(lambda: release_array(ptr, size, ctx, streams)):
            return
    except BaseException:  # noqa: BLE001 - interpreter shutdown: modules may be gone
        pass
    try:
        if not usable(ctx):
            return                  # the context (and its memory) is gone already
        if streams:
            pushed = ctx.enter()
            try:
                for s in streams:
                    order_after(ctx, HOME, s)
            finally:
                ctx.leave(pushed)
        ctx.pool.give_back(ptr, size, HOME)
    except BaseException:  # noqa: BLE001 - a finalizer must not raise; the memory goes back
        pass                # with the context
