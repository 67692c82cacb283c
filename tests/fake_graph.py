"""Stream capture and CUDA graphs for the fake driver (a mixin over `fake_driver.FakeDriver`).

Like the real driver: a launch on a capturing stream is recorded, not run, with its parameter
bytes copied at the call (the caller may reuse its `kernelParams` buffer at once);
`cuStreamEndCapture` returns the graph, `cuGraphInstantiate` an executable graph, and
`cuGraphLaunch` re-issues each recorded launch, in order, through `cuLaunchKernel` on the
launch's stream (so they appear in `calls` / `launches` and run their kernel bodies).
"""
from __future__ import annotations

import ctypes

from fake_driver import _PARAM_SIZE, R, FakeDriver, _real


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
        for f, geometry, shared, params, extra, _keep in self.execs[exec_]:
            r = FakeDriver.cuLaunchKernel(self, f, *geometry, shared, stream,
                                          ctypes.addressof(params), extra)
            if r[0] != R.CUDA_SUCCESS:
                return r
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

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, kernel_params, extra):
        if not stream or int(stream) not in self.capturing:
            return super().cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream,
                                          kernel_params, extra)
        e = self._call("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream,
                       kernel_params, extra)
        if e is not None:
            return (e,)
        _entry, params = self.functions[f]
        keep = []                                     # the driver copies the values now
        array = (ctypes.c_void_p * max(1, len(params)))()
        for i, (ptype, _name) in enumerate(params):
            p = ctypes.c_void_p.from_address(kernel_params + 8 * i).value
            buf = ctypes.create_string_buffer(ctypes.string_at(p, _PARAM_SIZE[ptype]))
            keep.append(buf)
            array[i] = ctypes.addressof(buf)
        self.capturing[int(stream)][1].append(
            (f, (gx, gy, gz, bx, by, bz), shared, array, extra, keep))
        return (R.CUDA_SUCCESS,)


class GraphFakeDriver(GraphCapture, FakeDriver):
    """FakeDriver with stream capture and graphs."""
