"""Device memory through the driver: `cuMemAlloc`/`cuMemFree` (and the finalizers' quiet
free), host <-> device copies on pyptx's home stream or a given one, and
`free_cached_memory()`, which gives the staging pools' idle buffers back.

Separate from `driver.py` (the driver object, errors, contexts, modules and functions) because
these are the calls DeviceArray and the staging of launch arguments make, not how the driver
is set up; each works in a `driver.Context` (default: the calling thread's device's).
"""
from __future__ import annotations

import os

from .driver import Context, _contexts, check, context, contexts, current_ordinal, handle_int, \
    run_all

def mem_alloc(nbytes: int, ctx: "Context | None" = None) -> int:
    """cuMemAlloc in `ctx` (default: the calling thread's device's context); DeviceError on
    failure."""
    ctx = ctx or context()
    return handle_int(ctx.call(f"cuMemAlloc({nbytes})", ctx.drv.cuMemAlloc,
                               max(int(nbytes), 1)))


def mem_free(ptr: int, ctx: "Context | None" = None) -> None:
    """Free device memory in `ctx`, the allocating context (None: the calling thread's
    device's); a no-op when that context is gone (reset, or this is a forked child).  Raises
    DeviceError when the driver refuses."""
    if not ptr:
        return
    if ctx is None:
        ctx = _contexts.get(current_ordinal())
        if ctx is None:
            return
    if not ctx.alive or ctx.pid != os.getpid() or _contexts.get(ctx.ordinal) is not ctx:
        return
    ctx.call("cuMemFree", ctx.drv.cuMemFree, ptr)


def release_quietly(ptr: int, ctx: "Context | None") -> None:
    """`mem_free` for finalizers (garbage collection in any thread, interpreter exit): never
    raises; a failure only means the memory goes back when the context does.  While this
    thread captures a graph the free waits for the capture's end (CUDA forbids it inside)."""
    try:
        from .graph import defer_while_capturing
        if defer_while_capturing(lambda: release_quietly(ptr, ctx)):
            return
    except BaseException:  # noqa: BLE001 - interpreter shutdown: modules may be gone
        pass
    try:
        mem_free(ptr, ctx)
    except BaseException:  # noqa: BLE001 - a finalizer must not raise
        pass


def memcpy_htod(dst: int, src_host: int, nbytes: int, stream=None,
                ctx: "Context | None" = None) -> None:
    """Host → device in `ctx` (default: the calling thread's device).  Without a stream: on the
    legacy default stream, finished on return."""
    ctx = ctx or context()
    drv = ctx.drv
    pushed = ctx.enter()
    try:
        if stream is None and ctx.home:         # per-thread mode: pyptx's home is the legacy stream
            check(drv.cuMemcpyHtoDAsync(dst, src_host, nbytes, ctx.home), "cuMemcpyHtoDAsync",
                  drv)
            check(drv.cuStreamSynchronize(ctx.home), "cuStreamSynchronize", drv)
        elif stream is None:
            check(drv.cuMemcpyHtoD(dst, src_host, nbytes), "cuMemcpyHtoD", drv)
        else:
            check(drv.cuMemcpyHtoDAsync(dst, src_host, nbytes, stream), "cuMemcpyHtoDAsync",
                  drv)
    finally:
        ctx.leave(pushed)


def memcpy_dtoh(dst_host: int, src: int, nbytes: int, stream=None,
                ctx: "Context | None" = None) -> None:
    """Device → host in `ctx` (default: the calling thread's device).  Without a stream: waits
    for the legacy default stream, then copies."""
    ctx = ctx or context()
    drv = ctx.drv
    pushed = ctx.enter()
    try:
        if stream is None:
            if ctx.home:                        # per-thread mode: from the legacy stream
                check(drv.cuMemcpyDtoHAsync(dst_host, src, nbytes, ctx.home),
                      "cuMemcpyDtoHAsync", drv)
                check(drv.cuStreamSynchronize(ctx.home), "cuStreamSynchronize", drv)
            else:
                check(drv.cuMemcpyDtoH(dst_host, src, nbytes), "cuMemcpyDtoH", drv)
            if ctx.deferred:
                ctx.reap()
        else:
            check(drv.cuMemcpyDtoHAsync(dst_host, src, nbytes, stream), "cuMemcpyDtoHAsync",
                  drv)
    finally:
        ctx.leave(pushed)


def free_cached_memory() -> None:
    """Give the staging buffers the pools keep (for numpy launch arguments) back to the driver,
    on every device."""
    run_all([lambda c=c: _free_cached(c) for c in contexts() if c.alive])


def _free_cached(ctx: Context) -> None:
    pushed = ctx.enter()
    try:
        ctx.reap(wait=True)
        ctx.pool.free_cached()
    finally:
        ctx.leave(pushed)
