"""What may happen while a stream captures a graph: the one table both the runtime's own checks
(on the GPU and on the CPU executor alike) and the test-suite's fake driver read.

CUDA's rules (driver API reference: cuStreamBeginCapture, cuThreadExchangeStreamCaptureMode,
cuStreamWaitEvent, the CUresult descriptions; programming guide, "Prohibited and unhandled
operations"), by kind of call:

* `UNSAFE` — "potentially unsafe" calls that are not stream work and so cannot be recorded
  (allocation, free, module loading, synchronous copies, context synchronisation).  A thread
  whose interaction mode is GLOBAL or THREAD_LOCAL and that has a capture of its own not begun
  RELAXED (GLOBAL mode: or any thread has a GLOBAL capture) gets
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and its capture is invalidated.
* `LEGACY` — work on the legacy default stream (the synchronous copies, stream 0): it waits for
  every *blocking* stream, so while a blocking stream captures it would create an implicit
  dependency on the capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, capture invalidated.  A
  non-blocking capture stream (CU_STREAM_NON_BLOCKING) is not affected.
* `SYNC_STREAM` — synchronising or querying a stream that is capturing (in every mode):
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture invalidated.  Context synchronisation while any
  stream of the context captures: the same.
* `CAPTURED_EVENT` — querying, synchronising or timing an event last recorded in a capturing
  stream (in every mode): CUDA_ERROR_CAPTURED_EVENT.
* `WAIT_OUTSIDE` — a capturing stream waiting on an event recorded outside its capture without
  CU_EVENT_WAIT_EXTERNAL: CUDA_ERROR_STREAM_CAPTURE_ISOLATION, capture invalidated.

pyptx's own rule (docs/launching.md) is stricter than RELAXED mode and the same on both devices:
inside `with pyptx.graph()` nothing the user calls may allocate, free, copy synchronously or
synchronise; `check(call, api)` raises the LaunchError naming the call.  What the library itself
must do while a capture is open (load a module, allocate a stdlib result, upload a constant
table once) runs inside `graph.outside_capture()`, which on a GPU switches the thread to RELAXED
with cuThreadExchangeStreamCaptureMode, the documented way, and on both devices lifts the check.
"""
from __future__ import annotations

from dataclasses import dataclass

UNSAFE = "unsafe"
LEGACY = "legacy"
SYNC_STREAM = "sync-stream"
CAPTURED_EVENT = "captured-event"
WAIT_OUTSIDE = "wait-outside"


@dataclass(frozen=True)
class Rule:
    """How one driver call interacts with an open capture."""
    kinds: frozenset          # of the kinds above
    what: str                 # the call in words, for messages
    instead: str              # what to write instead (pyptx's advice)


_ALLOC = ("allocate every array before the `with pyptx.graph()` block (stdlib functions "
          "allocate their results themselves; pass out= to reuse one)")
_COPY = ("copy before the capture or after g.launch(); inside the block only launches on "
         "device-resident arrays are recorded")
_SYNC = "synchronise after g.launch(), outside the `with pyptx.graph()` block"

#: driver entry point -> Rule.  Calls not listed are stream work or pure queries: legal.
RULES: dict[str, Rule] = {
    "cuMemAlloc": Rule(frozenset({UNSAFE}), "an allocation", _ALLOC),
    "cuMemFree": Rule(frozenset({UNSAFE}), "a free", "free arrays after the capture ends "
                      "(a graph keeps the arrays it recorded alive until g.close())"),
    "cuModuleLoadDataEx": Rule(frozenset({UNSAFE}), "loading a module", "launch the kernel "
                               "once before capturing"),
    "cuMemcpyHtoD": Rule(frozenset({UNSAFE, LEGACY}), "a synchronous host-to-device copy", _COPY),
    "cuMemcpyDtoH": Rule(frozenset({UNSAFE, LEGACY}), "a synchronous device-to-host copy", _COPY),
    "cuCtxSynchronize": Rule(frozenset({UNSAFE, SYNC_STREAM}), "a context synchronisation",
                             _SYNC),
    "cuStreamSynchronize": Rule(frozenset({SYNC_STREAM, LEGACY}), "a stream synchronisation",
                                _SYNC),
    "cuStreamQuery": Rule(frozenset({SYNC_STREAM, LEGACY}), "a stream query", _SYNC),
    "cuEventSynchronize": Rule(frozenset({CAPTURED_EVENT}), "an event synchronisation", _SYNC),
    "cuEventQuery": Rule(frozenset({CAPTURED_EVENT}), "an event query", _SYNC),
    "cuEventElapsedTime": Rule(frozenset({CAPTURED_EVENT}), "reading an event's time",
                               "time g.launch() from outside the capture"),
    "cuEventRecord": Rule(frozenset({LEGACY}), "recording an event", "record events outside "
                          "the capture"),
    "cuStreamWaitEvent": Rule(frozenset({WAIT_OUTSIDE}), "waiting on an event",
                              "order the graph's launch stream after the producer instead"),
    "cuLaunchKernel": Rule(frozenset({LEGACY}), "a launch on the legacy stream",
                           "launch inside the capture without stream="),
}

#: the CUresult name each kind of violation returns
RESULT = {
    UNSAFE: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
    LEGACY: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
    SYNC_STREAM: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
    CAPTURED_EVENT: "CUDA_ERROR_CAPTURED_EVENT",
    WAIT_OUTSIDE: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
}

#: kinds after which the driver invalidates the capture (cuStreamEndCapture then fails with
#: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
INVALIDATES = frozenset({UNSAFE, LEGACY, SYNC_STREAM, WAIT_OUTSIDE})

#: the calls pyptx forbids inside `with pyptx.graph()` on both devices (the user-facing rule)
FORBIDDEN_IN_GRAPH = frozenset(c for c, r in RULES.items()
                               if r.kinds & {UNSAFE} or c in ("cuStreamSynchronize",
                                                              "cuEventSynchronize",
                                                              "cuEventElapsedTime"))


def message(call: str, api: str) -> str:
    """The LaunchError text for `api` (the pyptx function the user called) issuing `call`."""
    rule = RULES[call]
    return (f"{api} inside a pyptx.graph() capture: it needs {call} ({rule.what}), which CUDA "
            f"does not allow while a stream captures (the graph records launches only); "
            f"{rule.instead}")
