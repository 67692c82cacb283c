"""Stream capture and CUDA graphs for the fake driver (a mixin over `fake_driver.FakeDriver`).

Like the real driver: a launch on a capturing stream is recorded, not run (its parameter bytes
are copied at the call, as `FakeDriver.cuLaunchKernel` always does); `cuStreamEndCapture`
returns the graph, `cuGraphInstantiate` an executable graph, and `cuGraphLaunch` queues the
recorded work, in order, on the launch's stream (kernel bodies run when the stream is drained).
"""
from __future__ import annotations

from fake_driver import R, FakeDriver, _real


class GraphCapture:
    CUstreamCaptureMode = _real.CUstreamCaptureMode

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.capturing: dict = {}     # stream handle -> (mode, [recorded launch])
        self.graphs: dict = {}        # CUgraph handle -> [recorded launch]
        self.execs: dict = {}         # CUgraphExec handle -> [recorded launch]

    def _handle(self):
        return 0x9000 + len(self.calls)

    def cuStreamBeginCapture(self, stream, mode):
        e = self._call("cuStreamBeginCapture", stream, mode)
        if e is not None:
            return (e,)
        if not stream or int(stream) in self.capturing:
            return (R.CUDA_ERROR_ILLEGAL_STATE,)      # legacy stream / already capturing
        self.capturing[int(stream)] = (mode, [])
        return (R.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream):
        e = self._call("cuStreamEndCapture", stream)
        if e is not None:
            return (e, None)
        if int(stream) not in self.capturing:
            return (R.CUDA_ERROR_ILLEGAL_STATE, None)
        h = self._handle()
        self.graphs[h] = self.capturing.pop(int(stream))[1]
        return (R.CUDA_SUCCESS, h)

    def cuGraphInstantiate(self, graph, flags):
        e = self._call("cuGraphInstantiate", graph, flags)
        if e is not None:
            return (e, None)
        h = self._handle()
        self.execs[h] = list(self.graphs[graph])
        return (R.CUDA_SUCCESS, h)

    def cuGraphLaunch(self, exec_, stream):
        e = self._call("cuGraphLaunch", exec_, stream)
        if e is not None:
            return (e,)
        for thunk in self.execs[exec_]:
            self._enqueue(stream, thunk)
        return (R.CUDA_SUCCESS,)

    def cuGraphExecDestroy(self, exec_):
        self.execs.pop(exec_, None)
        return (self._call("cuGraphExecDestroy", exec_) or R.CUDA_SUCCESS,)

    def cuGraphDestroy(self, graph):
        self.graphs.pop(graph, None)
        return (self._call("cuGraphDestroy", graph) or R.CUDA_SUCCESS,)

    def cuStreamSynchronize(self, stream):
        if stream and int(stream) in self.capturing:
            self._call("cuStreamSynchronize", stream)
            return (R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        return super().cuStreamSynchronize(stream)

    def _enqueue(self, stream, thunk, tag=None):
        """Work issued to a capturing stream (a launch, its parameters already copied) goes
        into the capture instead of the queue."""
        if stream and int(stream) in self.capturing:
            self.capturing[int(stream)][1].append(thunk)
            return
        super()._enqueue(stream, thunk, tag)


class GraphFakeDriver(GraphCapture, FakeDriver):
    """FakeDriver with stream capture and graphs."""
