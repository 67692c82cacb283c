"""Stream capture and CUDA graphs for the fake driver (a mixin over `fake_driver.FakeDriver`).

Like the real driver: a launch on a capturing stream is recorded, not run (its parameter bytes
are copied at the call, as `FakeDriver.cuLaunchKernel` always does); `cuStreamEndCapture`
returns the graph, `cuGraphInstantiate` an executable graph, and `cuGraphLaunch` queues the
recorded work, in order, on the launch's stream (kernel bodies run when the stream is drained).

Capture rules come from `pyptx.runtime.capture_rules` (the table the runtime's own checks read
too), applied as the driver documents them: the capture mode given to cuStreamBeginCapture and
each thread's interaction mode (cuThreadExchangeStreamCaptureMode) decide whether "potentially
unsafe" calls fail; legacy-stream work meets only *blocking* capturing streams; synchronising a
capturing stream, querying a captured event and waiting on an event from outside the capture
fail in every mode.  A violation returns the documented CUresult and invalidates the capture, so
cuStreamEndCapture then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
"""
from __future__ import annotations

import threading

from fake_driver import R, FakeDriver, _real
from pyptx.runtime import capture_rules as CR

_MODE = _real.CUstreamCaptureMode
_NON_BLOCKING = 1                    # CU_STREAM_NON_BLOCKING
_WAIT_EXTERNAL = 1                   # CU_EVENT_WAIT_EXTERNAL
_LEGACY = (0, 1)                     # the NULL stream and CU_STREAM_LEGACY


class Capture:
    """One open capture sequence."""

    def __init__(self, mode, thread):
        self.mode, self.thread = mode, thread
        self.records: list = []
        self.invalid = None           # the CUresult that invalidated it
        self.events: set = set()      # events recorded inside this capture


#: how many outputs each guarded call returns besides its CUresult
_OUTPUTS = {"cuMemAlloc": 1, "cuModuleLoadDataEx": 1, "cuEventElapsedTime": 1}


class GraphCapture:
    CUstreamCaptureMode = _real.CUstreamCaptureMode
    CUstream_flags = _real.CUstream_flags

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.capturing: dict = {}     # stream handle -> Capture
        self.graphs: dict = {}        # CUgraph handle -> [recorded launch]
        self.execs: dict = {}         # CUgraphExec handle -> [recorded launch]
        self.non_blocking: set = set()
        self.captured_events: dict = {}   # event -> stream whose capture last recorded it
        self.violations: list = []    # (call, CUresult) the capture rules refused
        self._thread_modes = threading.local()

    def _handle(self):
        return 0x9000 + len(self.calls)

    # -- the rules -------------------------------------------------------------------------------
    def _thread_mode(self):
        return getattr(self._thread_modes, "mode", _MODE.CU_STREAM_CAPTURE_MODE_GLOBAL)

    def _unsafe_blocked(self):
        """The captures an unsafe call from this thread conflicts with (cuThreadExchange...)."""
        mode, me = self._thread_mode(), threading.get_ident()
        if mode == _MODE.CU_STREAM_CAPTURE_MODE_RELAXED:
            return []
        hit = [c for c in self.capturing.values()
               if c.thread == me and c.mode != _MODE.CU_STREAM_CAPTURE_MODE_RELAXED]
        if mode == _MODE.CU_STREAM_CAPTURE_MODE_GLOBAL:
            hit += [c for c in self.capturing.values()
                    if c.thread != me and c.mode == _MODE.CU_STREAM_CAPTURE_MODE_GLOBAL]
        return hit

    def _violation(self, name, args):
        """The CUresult CUDA returns for `name(*args)` under the open captures, or None."""
        rule = CR.RULES.get(name)
        if rule is None or not self.capturing:
            return None
        kinds = rule.kinds
        stream = _stream_arg(name, args)
        event = _event_arg(name, args)
        found = None
        if CR.UNSAFE in kinds:
            hit = self._unsafe_blocked()
            if hit:
                found = (CR.UNSAFE, hit)
        if found is None and CR.SYNC_STREAM in kinds:
            if name == "cuCtxSynchronize":
                hit = list(self.capturing.values())
            else:
                c = self.capturing.get(int(stream or 0))
                hit = [c] if c is not None else []
            if hit:
                found = (CR.SYNC_STREAM, hit)
        if found is None and CR.LEGACY in kinds and stream is not None \
                and int(stream or 0) in _LEGACY:
            hit = [c for s, c in self.capturing.items() if s not in self.non_blocking]
            if hit:
                found = (CR.LEGACY, hit)
        if found is None and CR.CAPTURED_EVENT in kinds:
            for ev in event:
                if ev in self.captured_events:
                    found = (CR.CAPTURED_EVENT, [])
        if found is None and CR.WAIT_OUTSIDE in kinds:
            c = self.capturing.get(int(stream or 0))
            if c is not None and event[0] not in c.events and not (args[2] & _WAIT_EXTERNAL):
                found = (CR.WAIT_OUTSIDE, [c])
        if found is None:
            return None
        kind, hit = found
        result = getattr(R, CR.RESULT[kind])
        if kind in CR.INVALIDATES:
            for c in hit:
                c.invalid = c.invalid or result
        self.violations.append((name, result))
        return result

    def _guard(self, name, *args):
        """Run `name` on the base fake unless a capture rule refuses it."""
        e = self._violation(name, args)
        if e is not None:
            self._call(name, *args)
            return (e,) + (None,) * _OUTPUTS.get(name, 0)
        return getattr(super(), name)(*args)

    # -- capture -----------------------------------------------------------------------------
    def cuThreadExchangeStreamCaptureMode(self, mode):
        e = self._call("cuThreadExchangeStreamCaptureMode", mode)
        if e is not None:
            return (e, None)
        prev = self._thread_mode()
        self._thread_modes.mode = _MODE(mode)
        return (R.CUDA_SUCCESS, prev)

    def cuStreamCreate(self, flags):
        res = super().cuStreamCreate(flags)
        if res[0] == R.CUDA_SUCCESS and int(flags) & _NON_BLOCKING:
            self.non_blocking.add(int(res[1]))
        return res

    def cuStreamBeginCapture(self, stream, mode):
        e = self._call("cuStreamBeginCapture", stream, mode)
        if e is not None:
            return (e,)
        if int(stream or 0) in _LEGACY or int(stream) not in self.streams:
            return (R.CUDA_ERROR_INVALID_VALUE,)
        if int(stream) in self.capturing:
            return (R.CUDA_ERROR_ILLEGAL_STATE,)
        self.capturing[int(stream)] = Capture(_MODE(mode), threading.get_ident())
        return (R.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream):
        e = self._call("cuStreamEndCapture", stream)
        if e is not None:
            return (e, None)
        c = self.capturing.get(int(stream))
        if c is None:
            return (R.CUDA_ERROR_ILLEGAL_STATE, None)
        if c.mode != _MODE.CU_STREAM_CAPTURE_MODE_RELAXED and c.thread != threading.get_ident():
            return (R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, None)
        del self.capturing[int(stream)]
        for ev in c.events:
            if self.captured_events.get(ev) == int(stream):
                del self.captured_events[ev]
        if c.invalid is not None:
            return (R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, None)
        h = self._handle()
        self.graphs[h] = c.records
        return (R.CUDA_SUCCESS, h)

    def cuStreamIsCapturing(self, stream):
        e = self._call("cuStreamIsCapturing", stream)
        if e is not None:
            return (e, None)
        st = _real.CUstreamCaptureStatus
        c = self.capturing.get(int(stream or 0))
        if c is None:
            return (R.CUDA_SUCCESS, st.CU_STREAM_CAPTURE_STATUS_NONE)
        return (R.CUDA_SUCCESS, st.CU_STREAM_CAPTURE_STATUS_INVALIDATED if c.invalid
                else st.CU_STREAM_CAPTURE_STATUS_ACTIVE)

    def cuGraphInstantiate(self, graph, flags):
        e = self._call("cuGraphInstantiate", graph, flags)
        if e is not None:
            return (e, None)
        if graph not in self.graphs:
            return (R.CUDA_ERROR_INVALID_VALUE, None)
        h = self._handle()
        self.execs[h] = list(self.graphs[graph])
        return (R.CUDA_SUCCESS, h)

    def cuGraphLaunch(self, exec_, stream):
        e = self._call("cuGraphLaunch", exec_, stream)
        if e is not None:
            return (e,)
        if exec_ not in self.execs or not self._stream_ok(stream):
            return (R.CUDA_ERROR_INVALID_HANDLE,)
        for thunk in self.execs[exec_]:
            self._enqueue(stream, thunk)
        return (R.CUDA_SUCCESS,)

    def cuGraphExecDestroy(self, exec_):
        e = self._call("cuGraphExecDestroy", exec_)
        if e is None and self.execs.pop(exec_, None) is None:
            e = R.CUDA_ERROR_INVALID_VALUE
        return (e or R.CUDA_SUCCESS,)

    def cuGraphDestroy(self, graph):
        e = self._call("cuGraphDestroy", graph)
        if e is None and self.graphs.pop(graph, None) is None:
            e = R.CUDA_ERROR_INVALID_VALUE
        return (e or R.CUDA_SUCCESS,)

    # -- calls the rules guard -----------------------------------------------------------------
    def cuMemAlloc(self, n):
        return self._guard("cuMemAlloc", n)

    def cuMemFree(self, ptr):
        return self._guard("cuMemFree", ptr)

    def cuModuleLoadDataEx(self, image, n, options, values):
        return self._guard("cuModuleLoadDataEx", image, n, options, values)

    def cuMemcpyHtoD(self, dst, src, n):
        return self._guard("cuMemcpyHtoD", dst, src, n)

    def cuMemcpyDtoH(self, dst, src, n):
        return self._guard("cuMemcpyDtoH", dst, src, n)

    def cuCtxSynchronize(self):
        return self._guard("cuCtxSynchronize")

    def cuStreamSynchronize(self, stream):
        return self._guard("cuStreamSynchronize", stream)

    def cuStreamQuery(self, stream):
        return self._guard("cuStreamQuery", stream)

    def cuEventSynchronize(self, event):
        return self._guard("cuEventSynchronize", event)

    def cuEventQuery(self, event):
        return self._guard("cuEventQuery", event)

    def cuEventElapsedTime(self, start, end):
        return self._guard("cuEventElapsedTime", start, end)

    def cuStreamWaitEvent(self, stream, event, flags):
        return self._guard("cuStreamWaitEvent", stream, event, flags)

    def cuEventRecord(self, event, stream):
        res = self._guard("cuEventRecord", event, stream)
        if res[0] == R.CUDA_SUCCESS:
            c = self.capturing.get(int(stream or 0))
            if c is not None:
                c.events.add(event)
                self.captured_events[event] = int(stream)
            else:
                self.captured_events.pop(event, None)
        return res

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params, extra):
        c = self.capturing.get(int(stream or 0))
        if c is not None and c.invalid is not None:
            self._call("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream,
                       kernel_params, extra)
            return (R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,)
        return self._guard("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream,
                           kernel_params, extra)

    def _enqueue(self, stream, thunk, tag=None):
        """Work issued to a capturing stream (a launch, its parameters already copied) goes
        into the capture instead of the queue."""
        c = self.capturing.get(int(stream or 0)) if stream else None
        if c is not None:
            if thunk is not None:
                c.records.append(thunk)
            return
        super()._enqueue(stream, thunk, tag)


def _stream_arg(name, args):
    """The stream a call works on (None: not a stream call; 0 for the synchronous copies,
    which run on the legacy stream)."""
    if name in ("cuMemcpyHtoD", "cuMemcpyDtoH"):
        return 0
    if name in ("cuStreamSynchronize", "cuStreamQuery"):
        return args[0]
    if name == "cuStreamWaitEvent":
        return args[0]
    if name == "cuEventRecord":
        return args[1]
    if name == "cuLaunchKernel":
        return args[8]
    return None


def _event_arg(name, args):
    if name in ("cuEventSynchronize", "cuEventQuery"):
        return [args[0]]
    if name == "cuEventElapsedTime":
        return [args[0], args[1]]
    if name == "cuStreamWaitEvent":
        return [args[1]]
    return []


class GraphFakeDriver(GraphCapture, FakeDriver):
    """FakeDriver with stream capture and graphs."""
