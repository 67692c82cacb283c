"""The three state spaces as flat numpy byte buffers, with memcheck on every access.

Global memory is one heap: argument arrays (aliasing arrays share one region) and `.global`
module variables sit at aligned addresses with guard gaps, so any address outside a region is a
fault.  Shared memory is one row per block of the batch, local memory one row per thread.
Accesses come in as address arrays for the active lanes; `index()` checks them and returns byte
offsets into the buffer, or raises `Fault` describing the first bad lane.
"""
from __future__ import annotations

import numpy as np

GLOBAL_BASE = 0x10_0000_0000     # above 4 GiB, so 32-bit address truncation faults
SHARED_WINDOW = 0x01_0000_0000   # generic addresses of shared memory (cvta.shared)
LOCAL_WINDOW = 0x02_0000_0000    # generic addresses of local memory (cvta.local)
PARAM_WINDOW = 0x0F_0000_0000    # addresses of by-value byte-array parameters (tensor maps)
PARAM_SLOT = 256                 # ... one slot per parameter: PARAM_WINDOW + PARAM_SLOT * index
_GAP = 512


class Fault(Exception):
    """Internal: lane `lane` (position within the active selection) made a bad access."""

    def __init__(self, lane: int, address: int, space: str, nearest: str):
        super().__init__(nearest)
        self.lane, self.address, self.space, self.nearest = lane, address, space, nearest


class Trap(Fault):
    """Internal: lane `lane` executed `trap` (a failed run-time check, `why` says which)."""

    def __init__(self, lane: int, why: str):
        super().__init__(lane, 0, "trap", why)


def _views(buf: np.ndarray) -> dict:
    return {1: buf, 2: buf.view(np.uint16), 4: buf.view(np.uint32), 8: buf.view(np.uint64)}


def _describe(addr: int, regions, what: str) -> str:
    """'12 bytes past the end of parameter 'x' (4000 bytes)' for the region nearest `addr`."""
    best = None
    for start, size, name in regions:
        if start <= addr < start + size:
            return f"inside {what} '{name}' ({size} bytes) at offset {addr - start}"
        dist = start - addr if addr < start else addr - (start + size)
        if best is None or dist < best[0]:
            where = "before the start" if addr < start else "past the end"
            best = (dist, f"{dist} bytes {where} of {what} '{name}' ({size} bytes)")
    return best[1] if best else f"no {what} memory exists"


def extent(arr: np.ndarray) -> tuple[int, int]:
    """(lo, hi): the bytes an array's elements span, relative to its data pointer (the element
    at index 0).  A strided view (negative strides included) spans from its lowest to its
    highest element; a C-contiguous array is [0, nbytes)."""
    if arr.flags.c_contiguous or arr.size == 0:
        return 0, arr.nbytes
    lo = hi = 0
    for n, s in zip(arr.shape, arr.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + arr.itemsize


def _in_heap(buf: np.ndarray, offset: int, arr: np.ndarray) -> np.ndarray:
    """The view of `buf` laid out as strided `arr` is, with its element 0 at `offset`."""
    return np.ndarray(arr.shape, arr.dtype, buffer=buf, offset=offset, strides=arr.strides)


class GlobalHeap:
    """Argument arrays + `.global` variables, laid out in one uint8 buffer.

    A non-contiguous argument (a strided parameter's numpy view) occupies the span of its
    elements, so its strides are the host array's; only its elements are copied in and out."""

    def __init__(self, arrays, module_vars):
        """arrays: [(name, ndarray)]; module_vars: [Var] with space 'global'/'const'."""
        items = []   # (host_start, host_end, key)
        for k, (name, arr) in enumerate(arrays):
            p = arr.__array_interface__["data"][0]
            lo, hi = extent(arr)
            items.append((p + lo, p + hi, k))
        # merge overlapping host ranges: arrays over the same memory alias one region
        items.sort()
        groups = []
        for s, e, k in items:
            if groups and s < groups[-1][1]:
                groups[-1][1] = max(groups[-1][1], e)
                groups[-1][2].append(k)
            else:
                groups.append([s, e, [k]])
        self.arg_addr = [0] * len(arrays)
        self.regions = []          # (device start, size, name)
        layout = []                # (offset, host_start, [keys]) or (offset, var)
        off = _GAP
        for s, e, keys in groups:
            layout.append((off, s, keys))
            size = max(e - s, 0)
            self.regions.append((GLOBAL_BASE + off, size, arrays[keys[0]][0]))
            for k in keys:
                p = arrays[k][1].__array_interface__["data"][0]
                self.arg_addr[k] = GLOBAL_BASE + off + (p - s)
            off += (size + _GAP + 255) // 256 * 256
        self.symbols = {}
        var_layout = []
        for v in module_vars:
            size = v.nbytes or 0
            self.symbols[v.name] = GLOBAL_BASE + off
            self.regions.append((GLOBAL_BASE + off, size, v.name))
            var_layout.append((off, v))
            off += (size + _GAP + 255) // 256 * 256
        self.buf = np.zeros(off, np.uint8)
        for (o, s, keys) in layout:
            for k in keys:
                arr = arrays[k][1]
                p = arr.__array_interface__["data"][0]
                start = o + (p - s)
                if arr.flags.c_contiguous or arr.size == 0:
                    self.buf[start:start + arr.nbytes] = \
                        np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
                else:
                    _in_heap(self.buf, start, arr)[...] = arr
        for o, v in var_layout:
            if v.init is not None:
                self.buf[o:o + len(v.init)] = np.frombuffer(v.init, np.uint8)
        self.views = _views(self.buf)
        self.starts = np.array([r[0] - GLOBAL_BASE for r in self.regions], np.int64)
        self.ends = np.array([r[0] - GLOBAL_BASE + r[1] for r in self.regions], np.int64)

    def index(self, addr: np.ndarray, nbytes: int, align: int) -> np.ndarray:
        """Device addresses (uint64/int64) -> checked byte offsets into `buf`."""
        idx = addr.astype(np.int64, copy=False) - GLOBAL_BASE
        if idx.ndim == 0:
            idx = idx.reshape(1)
        if idx.size == 0:
            return idx
        lo, hi = int(idx.min()), int(idx.max())
        k = int(np.searchsorted(self.starts, lo, "right")) - 1
        if k >= 0 and hi + nbytes <= self.ends[k] and lo >= self.starts[k]:
            if align > 1 and (idx & (align - 1)).any():
                self._misaligned(idx, align, addr)
            return idx
        r = np.searchsorted(self.starts, idx, "right") - 1
        ok = (r >= 0) & (idx + nbytes <= self.ends[np.maximum(r, 0)])
        bad = np.flatnonzero(~ok)
        if bad.size:
            a = int(idx[bad[0]]) + GLOBAL_BASE
            raise Fault(int(bad[0]), a, "global", _describe(a, self.regions, "parameter"))
        if align > 1 and (idx & (align - 1)).any():
            self._misaligned(idx, align, addr)
        return idx

    def _misaligned(self, idx, align, addr):
        lane = int(np.flatnonzero(idx & (align - 1))[0])
        a = int(idx[lane]) + GLOBAL_BASE
        raise Fault(lane, a, "global", f"misaligned {align}-byte access; "
                    + _describe(a, self.regions, "parameter"))

    def read_back(self, k: int, arr: np.ndarray):
        """Copy argument k's bytes from the heap into the caller's array."""
        o = self.arg_addr[k] - GLOBAL_BASE
        if not arr.flags.c_contiguous and arr.size:
            arr[...] = _in_heap(self.buf, o, arr)
            return
        data = self.buf[o:o + arr.nbytes].view(arr.dtype).reshape(arr.shape)
        arr[...] = data

    def cstring(self, addr: int) -> bytes:
        o = addr - GLOBAL_BASE
        if not 0 <= o < self.buf.size:
            return b"<bad format pointer>"
        end = o
        while end < self.buf.size and self.buf[end] != 0:
            end += 1
        return self.buf[o:end].tobytes()


class RowSpace:
    """Shared (one row per block) or local (one row per thread) memory of `row_bytes` each."""

    def __init__(self, space: str, rows: int, row_bytes: int, symbols: list, dynamic: int = 0):
        self.space = space
        self.row = max(row_bytes, 0)
        alloc = (self.row + 15) // 16 * 16
        self.stride = alloc
        self.buf = np.zeros(rows * alloc + 16, np.uint8)
        self.views = _views(self.buf)
        self.symbols = symbols       # [(offset, size, name)]
        self.dynamic = dynamic

    def index(self, row_of_lane: np.ndarray, addr: np.ndarray, nbytes: int, align: int):
        off = addr.astype(np.int64, copy=False)
        if off.ndim == 0:
            off = np.broadcast_to(off, row_of_lane.shape)
        if off.size == 0:
            return off
        lo, hi = int(off.min()), int(off.max())
        if lo < 0 or hi + nbytes > self.row:
            bad = np.flatnonzero((off < 0) | (off + nbytes > self.row))
            self._fault(int(bad[0]), int(off[bad[0]]), "")
        if align > 1 and (off & (align - 1)).any():
            lane = int(np.flatnonzero(off & (align - 1))[0])
            self._fault(lane, int(off[lane]), f"misaligned {align}-byte access; ")
        return row_of_lane * self.stride + off

    def _fault(self, lane, off, prefix):
        syms = list(self.symbols)
        if self.dynamic or not syms:
            dyn_start = max([o + s for o, s, _ in syms], default=0)
            syms.append((dyn_start, self.row - dyn_start, "dynamic shared memory"
                         if self.space == "shared" else "local memory"))
        best = _describe(off, syms, f"{self.space} array")
        if off < 0 or off >= self.row:
            best += f"; {self.space} memory is {self.row} bytes"
        raise Fault(lane, off, self.space, prefix + best)
