"""A caching pool of device buffers for the copies of numpy launch arguments.

Why: a numpy argument needs a device buffer for every launch; cuMemAlloc/cuMemFree cost far more
than the launch itself (and cuMemFree synchronises the device).  Like CuPy's allocator, sizes
are rounded up to 512 bytes and a buffer given back is kept for the next request of its size.

Stream order makes reuse safe without waiting: a buffer given back after work on stream S is
reused only by later work on S (which the GPU runs after the earlier work), so free lists are
kept per stream.  `free_cached()` returns every idle buffer to the driver (also tried once when
an allocation runs out of memory).  The caller holds the context current.
"""
from __future__ import annotations

import threading

ROUND = 512


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
        """cuMemFree every idle buffer.  Every buffer is tried even when one fails (the first
        failure is raised after); a failed one is forgotten, not retried."""
        from .driver import check, run_all
        drv = self.ctx.drv
        with self.lock:
            idle, self.idle, self.cached_bytes = self.idle, {}, 0
        run_all([lambda p=p: check(drv.cuMemFree(p), "cuMemFree", drv)
                 for ptrs in idle.values() for p in ptrs])
