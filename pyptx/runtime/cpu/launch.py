"""`launch()`: argument marshalling, the global heap, batching of blocks, write-back."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import LaunchError
from .executor import STATE_CACHE_BYTES, State, batch_blocks, run
from .instrument import Mode, Monitor
from .memory import GlobalHeap
from .operands import DTYPES
from .progress import Progress
from .program import program
from .tma import finish_stores


@dataclass
class ArrayArg:
    """A `.u64` pointer parameter: the host array, and whether the kernel may write it."""
    array: np.ndarray
    writable: bool = False


def _dim3(v, what):
    t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    t = t + (1,) * (3 - len(t))
    if len(t) != 3 or min(t) < 1:
        raise LaunchError(f"{what} must be 1 to 3 positive ints, got {v!r}")
    return t


def _scalar(value, ptx_type: str, name: str):
    """A scalar argument as a numpy scalar of the parameter's PTX type (raw bits for .bN)."""
    dt = DTYPES[ptx_type]
    if isinstance(value, ArrayArg):
        raise LaunchError(f"parameter '{name}' (.{ptx_type}) is a scalar, got an array")
    if dt.kind == "f":
        return dt.type(value)
    if ptx_type.startswith("b") and isinstance(value, (float, np.floating)):
        fdt = {2: np.float16, 4: np.float32, 8: np.float64}[dt.itemsize]
        return np.array(fdt(value)).view(dt)[()]
    if dt.kind == "b":
        return np.bool_(bool(value))
    iv = int(value)
    return np.array(iv & ((1 << (8 * dt.itemsize)) - 1), f"u{dt.itemsize}").view(dt)[()]


def launch(ptx_text: str, entry: str, grid, block, args, shared_mem: int = 0, checks=None):
    """Run `entry` of `ptx_text` over grid x block threads; writable ArrayArgs are updated in
    place after a successful run (never on a fault or an interrupt).

    `checks` (runtime.checking.Checks, or None for a plain launch): run an instrumented copy of
    the program with the sanitizer and/or profiler counters (instrument.py)."""
    mode = None
    if checks is not None:
        mode = Mode(checks.race, checks.init, bool(checks.profilers))
    code = program(ptx_text, mode).entry(entry)
    grid, block = _dim3(grid, "grid"), _dim3(block, "block")
    if len(args) != len(code.params):
        raise LaunchError(f"kernel '{entry}' takes {len(code.params)} parameters, "
                          f"got {len(args)} arguments")
    arrays, params = [], {}
    arg_index, tmaps = {}, {}
    for (name, typ), a in zip(code.params, args):
        if typ.endswith("]"):        # a by-value tensor map (tma.py): its array joins the heap
            if not hasattr(a, "encode_at"):
                raise LaunchError(f"parameter '{name}' (.{typ}) is a tensor map; pass a "
                                  f"pyptx.TensorMap, got {type(a).__name__}")
            arg_index[name] = len(arrays)
            arrays.append((name, np.asarray(a.host_array())))
            tmaps[name] = a
        elif isinstance(a, ArrayArg):
            if typ not in ("u64", "b64", "s64"):
                raise LaunchError(f"parameter '{name}' is .{typ}, not a pointer")
            arg_index[name] = len(arrays)
            arrays.append((name, np.asarray(a.array)))
        else:
            params[name] = _scalar(a, typ, name)
    heap = GlobalHeap(arrays, code.global_vars)
    for name, k in arg_index.items():
        if name in tmaps:
            addr = heap.arg_addr[k]
            if addr % 16:
                raise LaunchError(f"parameter '{name}': the tensor map's array starts at a "
                                  f"global address that is not 16-byte aligned (it shares "
                                  f"memory with another argument at an odd offset); pass a "
                                  f"copy of the array")
            params[name] = np.frombuffer(tmaps[name].encode_at(addr), np.uint8)
        else:
            params[name] = np.uint64(heap.arg_addr[k])
    tpb = block[0] * block[1] * block[2]
    n_blocks = grid[0] * grid[1] * grid[2]
    bpb = batch_blocks(code, tpb, n_blocks, shared_mem)
    cache = code.__dict__.setdefault("states", {})
    monitor = None if mode is None else Monitor(code, heap, checks, ptx_text, grid, block)
    bar = Progress(entry, n_blocks)
    try:
        with np.errstate(all="ignore"):
            for b0 in range(0, n_blocks, bpb):
                nb = min(bpb, n_blocks - b0)
                key = (grid, block, b0, nb, int(shared_mem))
                st = cache.pop(key, None)   # popped while in use: safe for concurrent launches
                st = st.reuse(heap, params) if st is not None else \
                    State(code, heap, params, grid, block, b0, nb, int(shared_mem))
                if monitor is not None:
                    monitor.start_batch(st)
                bar.start(b0, nb)
                st.beat = bar.work
                run(st)
                finish_stores(st)
                st.beat = None
                st.monitor = None           # a cached state must not keep the shadow memory
                if st.nbytes <= STATE_CACHE_BYTES and len(cache) < 4:
                    cache[key] = st
                bar.update(b0 + nb, st.retired)
    except KeyboardInterrupt:
        bar.close(interrupted=True)
        raise
    bar.close()
    if monitor is not None and monitor.counters is not None:
        checks.record(monitor.counters.record(entry, grid, block))
    for (name, typ), a in zip(code.params, args):
        if isinstance(a, ArrayArg) and a.writable:
            heap.read_back(arg_index[name], a.array)
        elif name in tmaps and getattr(a, "writable", False):      # tma_store wrote it
            heap.read_back(arg_index[name], a.host_array())
