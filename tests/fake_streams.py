"""Streams and events of the fake driver (a mixin of `fake_driver.FakeDriver`).

As on the real driver: streams are handles the fake hands out (0, CU_STREAM_LEGACY and
CU_STREAM_PER_THREAD always exist), an event record is queued like any work on its stream and is
reached only when the queue runs past it, so `cuEventQuery`/`cuEventElapsedTime` say
CUDA_ERROR_NOT_READY until something waits.  Separate from fake_driver.py, which holds the
fake's state, contexts, modules, memory and launches; these methods work on that state (the
queue `self.pending`, `self.streams`, `self.events`).
"""
from __future__ import annotations

from cuda.bindings import driver as _real

R = _real.CUresult


class StreamsAndEvents:
    """cuStream* and cuEvent* over the fake's work queue."""

    def cuStreamCreate(self, flags):
        e = self._call("cuStreamCreate", flags)
        if e is not None:
            return (e, None)
        h = 0x5000 + len(self.streams)
        while h in self.streams:
            h += 1
        self.streams.add(h)
        return (R.CUDA_SUCCESS, _real.CUstream(h))

    def _stream_ok(self, stream):
        return int(stream or 0) in self.streams or int(stream or 0) in (1, 2)

    def cuStreamSynchronize(self, stream):
        e = self._call("cuStreamSynchronize", stream)
        if e is None and not self._stream_ok(stream):
            e = R.CUDA_ERROR_INVALID_HANDLE
        return (e or self._flush(self._last_on(stream)),)

    def cuStreamQuery(self, stream):
        e = self._call("cuStreamQuery", stream)
        if e is None and self._last_on(stream) >= 0:
            e = R.CUDA_ERROR_NOT_READY
        return (e or self.sticky or R.CUDA_SUCCESS,)

    def cuStreamDestroy(self, stream):
        e = self._call("cuStreamDestroy", stream)
        if e is None and int(stream or 0) not in self.streams - {0}:
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None:
            self.streams.discard(int(stream))
        return (e or R.CUDA_SUCCESS,)

    def cuStreamWaitEvent(self, stream, event, flags):
        e = self._call("cuStreamWaitEvent", stream, event, flags)
        if e is None and (event not in self.events or not self._stream_ok(stream)):
            e = R.CUDA_ERROR_INVALID_HANDLE
        return (e or R.CUDA_SUCCESS,)      # the queue runs in submission order: already ordered

    def cuEventCreate(self, flags):
        e = self._call("cuEventCreate", flags)
        if e is not None:
            return (e, None)
        h = _real.CUevent(0xE000 + len(self.calls) + len(self.events))
        while h in self.events:
            h = _real.CUevent(int(h) + 1)
        self.events[h] = None
        return (R.CUDA_SUCCESS, h)

    def cuEventDestroy(self, event):
        e = self._call("cuEventDestroy", event)
        if e is None and event not in self.events:
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None:
            del self.events[event]
        return (e or R.CUDA_SUCCESS,)

    def cuEventRecord(self, event, stream):
        e = self._call("cuEventRecord", event, stream)
        if e is None and (event not in self.events or not self._stream_ok(stream)):
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None:
            tag = object()
            self._enqueue(stream, None, tag=event)
            self.events[event] = tag
        return (e or R.CUDA_SUCCESS,)

    def _event_index(self, event) -> int:
        return max((i for i, (_s, _t, tag) in enumerate(self.pending) if tag == event),
                   default=-1)

    def cuEventSynchronize(self, event):
        e = self._call("cuEventSynchronize", event)
        if e is None and event not in self.events:
            e = R.CUDA_ERROR_INVALID_HANDLE
        return (e or self._flush(self._event_index(event)),)

    def cuEventQuery(self, event):
        e = self._call("cuEventQuery", event)
        if e is None and event not in self.events:
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None and self._event_index(event) >= 0:
            e = R.CUDA_ERROR_NOT_READY
        return (e or R.CUDA_SUCCESS,)

    def cuEventElapsedTime(self, start, end):
        e = self._call("cuEventElapsedTime", start, end)
        if e is None and (start not in self.events or end not in self.events):
            e = R.CUDA_ERROR_INVALID_HANDLE
        if e is None and (self._event_index(start) >= 0 or self._event_index(end) >= 0):
            e = R.CUDA_ERROR_NOT_READY
        return (e, None) if e is not None else (R.CUDA_SUCCESS, 0.25 * (int(end) - int(start)))
