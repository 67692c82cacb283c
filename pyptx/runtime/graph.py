"""Launch graphs: `with pyptx.graph() as g:` records launches, `g.launch()` replays them.

A decode step is hundreds of small launches, and at batch 1 the cost of issuing them (Python
argument checks, then the driver) is comparable to the kernels' own time.  A graph pays the
checks once, at capture, and replays the whole sequence with one call.

* GPU: stream capture.  The `with` block opens a non-blocking pyptx stream (so work other code
  puts on the legacy default stream never meets the capture) and calls `cuStreamBeginCapture`
  in THREAD_LOCAL mode; every launch in the block goes to that stream and is recorded by the
  driver, not run; `cuStreamEndCapture` + `cuGraphInstantiate` at the end of the block;
  `g.launch(stream)` is one `cuGraphLaunch`, asynchronous like a launch of DeviceArrays.
* CPU executor: the checked, flattened launches are kept and re-run in order by `g.launch()`.

CUDA's capture rules hold on both devices (capture_rules.py, docs/launching.md): inside the
block nothing may allocate, free, copy synchronously or synchronise; such a call is a
LaunchError naming it, raised before anything reaches the driver.  The library's own setup work
(loading a kernel's module on first use, allocating a stdlib function's result, uploading a
constant table once) runs in `outside_capture()`.  Arrays a stdlib function allocates while
capturing belong to the graph.

Either way a replay re-reads the same `DeviceArray`s (their addresses / host buffers are what
was recorded), so data the host changed with `copy_from_host` between replays is seen.  numpy
arguments inside a capture are a LaunchError: they would need copies in and out, which a graph
cannot express.  The graph keeps every argument object alive until it is closed (and, on a GPU,
until its last replay has finished); `g.launch()` after a recorded array was freed with
`DeviceArray.free()` is a LaunchError.
"""
from __future__ import annotations

import threading

import numpy as np

import contextlib

from ..errors import DeviceError, LaunchError
from . import capture_rules

_current = threading.local()         # .graph: the Graph capturing on this thread, if any;
                                     # .outside: depth of outside_capture() blocks


def capturing():
    """The Graph recording on this thread, or None (the launcher's hook)."""
    return getattr(_current, "graph", None)


def check(call: str, api: str) -> None:
    """Raise the LaunchError naming `api` (the pyptx call) and `call` (the driver call it
    needs) when this thread is inside `with pyptx.graph()` and `call` is one CUDA forbids
    there.  The same on the GPU and on the CPU executor."""
    if getattr(_current, "graph", None) is not None and not getattr(_current, "outside", 0) \
            and call in capture_rules.FORBIDDEN_IN_GRAPH:
        raise LaunchError(capture_rules.message(call, api))


@contextlib.contextmanager
def outside_capture():
    """Run library setup work (module loading, a stdlib result's allocation, a constant table's
    upload) while this thread captures: the checks above are lifted and, on a GPU, the thread's
    capture interaction mode is RELAXED (cuThreadExchangeStreamCaptureMode, push-pop).  A no-op
    when nothing captures."""
    g = getattr(_current, "graph", None)
    if g is None:
        yield
        return
    _current.outside = getattr(_current, "outside", 0) + 1
    prev = None
    try:
        if g._device == "gpu":
            from . import streams
            prev = streams.exchange_capture_mode("CU_STREAM_CAPTURE_MODE_RELAXED")
        yield
    finally:
        if prev is not None:
            from . import streams
            streams.exchange_capture_mode(prev)
        _current.outside -= 1


def defer_while_capturing(action) -> bool:
    """A device free that garbage collection wants to run while this thread captures is kept
    until the capture ends (a free is not allowed inside it).  True when deferred."""
    g = getattr(_current, "graph", None)
    if g is None:
        return False
    g._after_capture.append(action)
    return True


class Graph:
    """A recorded launch sequence; build it with `with pyptx.graph() as g:`."""

    def __init__(self):
        self._device = None
        self._ctx = None              # GPU: the context (device) the graph was captured in
        self._records = []            # CPU: (plan, grid, block, flat, shared_mem)
        self._keep = []               # argument objects the recorded launches refer to
        self._arrays = []             # (kernel, parameter, DeviceArray) checked at launch
        self._watch = None            # ... as the distinct arrays and bases to look at (built once)
        self._owned = []              # arrays allocated for stdlib results while capturing
        self._after_capture = []      # frees garbage collection asked for during the capture
        self._state = "new"           # new -> capturing -> ready | discarded; closed
        self._stream = None           # GPU: the capture stream (a streams.Stream)
        self._graph = None            # GPU: CUgraph
        self._exec = None             # GPU: CUgraphExec
        self._streams = {}            # GPU: streams g.launch() used -> True
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
            from . import driver, streams
            ctx = self._ctx = driver.context()     # the device this thread launches on
            self._stream = streams.Stream(non_blocking=True)
            try:
                ctx.call("cuStreamBeginCapture", ctx.drv.cuStreamBeginCapture,
                         self._stream.handle,
                         ctx.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            except BaseException:
                self._stream.close()
                self._stream = None
                raise
        self._state = "capturing"
        _current.graph = self
        _current.outside = 0
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _current.graph = None
        try:
            if self._device == "gpu":
                self._end_capture(quiet=exc_type is not None)
        except BaseException:
            self._discard()
            raise
        finally:
            after, self._after_capture = self._after_capture, []
            from .driver import run_all
            try:
                run_all(after)
            except Exception:  # noqa: BLE001 - frees from garbage collection never raise
                pass
        if exc_type is not None:
            self._discard()
            return False          # the user's own exception propagates unchanged
        self._state = "ready"
        return False

    def _end_capture(self, quiet: bool) -> None:
        """cuStreamEndCapture (+ cuGraphInstantiate).  After an exception in the block the
        capture may be invalidated: end it without raising, so the user's error propagates."""
        ctx = self._ctx
        drv = ctx.drv
        if quiet:
            pushed = ctx.enter()
            try:
                res = drv.cuStreamEndCapture(self._stream.handle)
                if res[0] == ctx.success and len(res) > 1:
                    self._graph = res[1]
            except Exception:  # noqa: BLE001 - the block's own exception matters, not this
                pass
            finally:
                ctx.leave(pushed)
            return
        try:
            self._graph = ctx.call("cuStreamEndCapture", drv.cuStreamEndCapture,
                                   self._stream.handle)
        except DeviceError as e:
            if e.error_name == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED":
                raise DeviceError(f"{e}: a call the capture does not allow was made inside "
                                  f"the `with pyptx.graph()` block outside pyptx (another "
                                  f"library allocating, copying or synchronising?); do that "
                                  f"work before the block", error_name=e.error_name) from None
            raise
        self._exec = ctx.call("cuGraphInstantiate", drv.cuGraphInstantiate, self._graph, 0)

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
            if isinstance(a, DeviceArray):
                self._arrays.append((plan.ck.name, name, a))
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

    def own(self, array):
        """Keep an array allocated for a stdlib result during the capture (the graph owns it)."""
        self._owned.append(array)
        return array

    # -- replay ---------------------------------------------------------------------------
    def _fail_freed(self):
        for kernel, name, a in self._arrays:
            if _freed(a):
                raise LaunchError(f"cannot launch this graph: argument '{name}' of its "
                                  f"{kernel} launch is a DeviceArray that was freed "
                                  f"(DeviceArray.free()) after the capture; capture again "
                                  f"with live arrays")

    def launch(self, stream=None) -> None:
        """Replay the recorded launches in order (GPU: one cuGraphLaunch on `stream`)."""
        from .streams import stream_handle
        hstream = stream_handle(stream)    # LaunchError for a malformed stream=
        if self._state != "ready":
            why = {"new": "nothing was recorded yet (use it as `with pyptx.graph() as g:`)",
                   "capturing": "it is still recording (launch it after the `with` block)",
                   "discarded": "its `with` block raised, so the recording was discarded",
                   "closed": "it was closed"}[self._state]
            raise LaunchError(f"cannot launch this graph: {why}")
        if capturing() is not None:
            raise LaunchError("g.launch() inside a pyptx.graph() capture is not supported")
        watch = self._watch
        if watch is None:             # every replay looks at each array once, no recursion
            seen = {}
            for _kernel, _name, a in self._arrays:
                while a is not None and id(a) not in seen:
                    seen[id(a)] = a
                    a = getattr(a, "_base", None)
            watch = self._watch = tuple(seen.values())
        for a in watch:
            if a._freed:
                self._fail_freed()
        if hstream and hstream != 1 and self._device == "gpu":   # off the arrays' home stream
            from .devmem import used_on
            for a in watch:
                if a._host is None and a._ptr:
                    used_on(a, hstream)
        from . import checking
        chk = checking.current()          # a replay inside pyptx.sanitize/profile is checked
        if self._device == "gpu":
            ctx = self._ctx
            run = lambda: ctx.call("cuGraphLaunch", ctx.drv.cuGraphLaunch,  # noqa: E731
                                   self._exec, hstream or ctx.home)
            if chk is None:
                run()
            else:
                checking.gpu_timed(chk, f"graph of {self.launches} launches", (1, 1, 1),
                                   (1, 1, 1), run, hstream)
            self._streams[hstream or 0] = True
            return
        from .launch import run_checked
        for plan, grid, block, flat, shared_mem in self._records:
            run_checked(plan, grid, block, flat, shared_mem, "cpu", None, chk)

    # -- lifetime -------------------------------------------------------------------------
    def _discard(self) -> None:
        self._release()
        self._state = "discarded"

    def close(self) -> None:
        """Free the driver's graph objects now; the recorded arrays are let go once every
        replay queued so far has finished."""
        self._release()
        self._state = "closed"

    def _release(self) -> None:
        self._records.clear()
        keep = (self._keep, self._owned, self._arrays)
        self._keep, self._owned, self._arrays, self._watch = [], [], [], None
        if self._device != "gpu":
            return
        ctx = self._ctx
        if not ctx.alive:                 # driver reset or forked child: nothing to destroy
            self._stream = None
            return
        pushed = ctx.enter()
        try:
            # an executable graph still running is freed by the driver when it completes;
            # the arrays it reads are released only after the work queued on each stream a
            # replay used (stream-ordered: no reliance on cuMemFree synchronising)
            if self._exec is not None:
                ctx.call("cuGraphExecDestroy", ctx.drv.cuGraphExecDestroy, self._exec)
                self._exec = None
            if self._graph is not None:
                ctx.call("cuGraphDestroy", ctx.drv.cuGraphDestroy, self._graph)
                self._graph = None
            for s in self._streams:
                ctx.after(s, [lambda k=keep: k])
            self._streams = {}
        finally:
            ctx.leave(pushed)
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __repr__(self) -> str:
        return f"<pyptx.Graph {self._state}, {self.launches} launches on {self._device}>"


def _freed(a) -> bool:
    base = getattr(a, "_base", None)
    return bool(a._freed or (base is not None and _freed(base)))


def graph() -> Graph:
    """`with pyptx.graph() as g:` records the launches in the block; `g.launch()` replays."""
    return Graph()
