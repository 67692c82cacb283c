"""Launch graphs: `with pyptx.graph() as g:` records launches, `g.launch()` replays them.

A decode step is hundreds of small launches, and at batch 1 the cost of issuing them (Python
argument checks, then the driver) is comparable to the kernels' own time.  A graph pays the
checks once, at capture, and replays the whole sequence with one call.

* GPU: stream capture.  The `with` block opens a pyptx stream and calls `cuStreamBeginCapture`
  (relaxed mode: stdlib functions may allocate scratch `DeviceArray`s inside a capture);
  every launch in the block goes to that stream and is recorded by the driver, not run;
  `cuStreamEndCapture` + `cuGraphInstantiate` at the end of the block; `g.launch(stream)` is one
  `cuGraphLaunch`, asynchronous like a launch of DeviceArrays.
* CPU executor: the checked, flattened launches are kept and re-run in order by `g.launch()`.

Either way a replay re-reads the same `DeviceArray`s (their addresses / host buffers are what
was recorded), so data the host changed with `copy_from_host` between replays is seen.  numpy
arguments inside a capture are a LaunchError: they would need copies in and out, which a graph
cannot express.  The graph keeps every argument object alive until it is closed.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import LaunchError

_current = threading.local()         # .graph: the Graph capturing on this thread, if any


def capturing():
    """The Graph recording on this thread, or None (the launcher's hook)."""
    return getattr(_current, "graph", None)


class Graph:
    """A recorded launch sequence; build it with `with pyptx.graph() as g:`."""

    def __init__(self):
        self._device = None
        self._records = []            # CPU: (plan, grid, block, flat, shared_mem)
        self._keep = []               # argument objects the recorded launches refer to
        self._state = "new"           # new -> capturing -> ready | discarded; closed
        self._stream = None           # GPU: the capture stream (a driver.Stream)
        self._graph = None            # GPU: CUgraph
        self._exec = None             # GPU: CUgraphExec
        self.launches = 0             # how many launches were recorded

    # -- capture --------------------------------------------------------------------------
    def __enter__(self) -> "Graph":
        if capturing() is not None:
            raise LaunchError("pyptx.graph() captures cannot be nested: finish the outer "
                              "`with pyptx.graph()` block first")
        if self._state != "new":
            raise LaunchError("a pyptx.graph() object records once; make a new one with "
                              "pyptx.graph()")
        from .launch import device
        self._device = device()
        if self._device == "gpu":
            from . import driver
            ctx = driver.context()
            self._stream = driver.Stream()
            ctx.call("cuStreamBeginCapture", ctx.drv.cuStreamBeginCapture, self._stream.handle,
                     ctx.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
        self._state = "capturing"
        _current.graph = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _current.graph = None
        try:
            if self._device == "gpu":
                from . import driver
                ctx = driver.context()
                self._graph = ctx.call("cuStreamEndCapture", ctx.drv.cuStreamEndCapture,
                                       self._stream.handle)
                if exc_type is None:
                    self._exec = ctx.call("cuGraphInstantiate", ctx.drv.cuGraphInstantiate,
                                          self._graph, 0)
        except BaseException:
            self._discard()
            raise
        if exc_type is not None:
            self._discard()
            return False
        self._state = "ready"
        return False

    def record(self, plan, grid, block, args, flat, shared_mem, stream, names):
        """Called by the launcher for a checked launch inside the `with` block.  Returns the
        stream the launch must go to (GPU) or None when the launch is recorded only (CPU)."""
        from .device_array import DeviceArray
        for name, a in zip(names, args):
            what = "a numpy array" if isinstance(a, np.ndarray) else (
                "a DLPack-only object" if hasattr(a, "__dlpack__") and not isinstance(
                    a, DeviceArray) and not hasattr(a, "__cuda_array_interface__") else None)
            if what:
                raise LaunchError(f"argument '{name}': {what} inside a pyptx.graph() "
                                  f"capture (launching {plan.ck.name}); a graph replays "
                                  f"launches without copies: pass pyptx.to_device(...) arrays")
        if stream is not None:
            raise LaunchError(f"stream= inside a pyptx.graph() capture (launching "
                              f"{plan.ck.name}): captured launches go to the graph's own "
                              f"stream; pass the stream to g.launch(stream=...)")
        self._keep.append(args)
        self.launches += 1
        if self._device == "gpu":
            return self._stream
        self._records.append((plan, grid, block, list(flat), shared_mem))
        return None

    # -- replay ---------------------------------------------------------------------------
    def launch(self, stream=None) -> None:
        """Replay the recorded launches in order (GPU: one cuGraphLaunch on `stream`)."""
        if self._state != "ready":
            why = {"new": "nothing was recorded yet (use it as `with pyptx.graph() as g:`)",
                   "capturing": "it is still recording (launch it after the `with` block)",
                   "discarded": "its `with` block raised, so the recording was discarded",
                   "closed": "it was closed"}[self._state]
            raise LaunchError(f"cannot launch this graph: {why}")
        if capturing() is not None:
            raise LaunchError("g.launch() inside a pyptx.graph() capture is not supported")
        if self._device == "gpu":
            from . import driver
            ctx = driver.context()
            ctx.call("cuGraphLaunch", ctx.drv.cuGraphLaunch, self._exec,
                     driver.stream_handle(stream))
            return
        from . import checking
        from .launch import run_checked
        chk = checking.current()          # a replay inside pyptx.sanitize/profile is checked
        for plan, grid, block, flat, shared_mem in self._records:
            run_checked(plan, grid, block, flat, shared_mem, "cpu", None, chk)

    # -- lifetime -------------------------------------------------------------------------
    def _discard(self) -> None:
        self._release()
        self._state = "discarded"

    def close(self) -> None:
        """Free the driver's graph objects and drop the recorded arguments now."""
        self._release()
        self._state = "closed"

    def _release(self) -> None:
        self._records.clear()
        self._keep.clear()
        if self._device != "gpu":
            return
        from . import driver
        ctx = driver.context()
        if self._exec is not None:
            ctx.call("cuGraphExecDestroy", ctx.drv.cuGraphExecDestroy, self._exec)
            self._exec = None
        if self._graph is not None:
            ctx.call("cuGraphDestroy", ctx.drv.cuGraphDestroy, self._graph)
            self._graph = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __repr__(self) -> str:
        return f"<pyptx.Graph {self._state}, {self.launches} launches on {self._device}>"


def graph() -> Graph:
    """`with pyptx.graph() as g:` records the launches in the block; `g.launch()` replays."""
    return Graph()
