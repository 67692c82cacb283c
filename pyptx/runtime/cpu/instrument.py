"""Decode-time instrumentation of a checked launch (`pyptx.sanitize`, `pyptx.profile`).

The plain path never pays for checks: `program(text)` decodes ops without any hook.  A checked
launch decodes the same text again, as `program(text, Mode(...))`, and two hooks are woven in
while its ops are built:

* `track_access` — the choke point of the memory layer.  `memops.locate()` (the one function
  turning an address into bytes of global, shared or local memory, used by ld/st/atom/red and by
  any later memory instruction that asks it for bytes) wraps its per-space functions with it,
  so every access reaches `Monitor.access` with its lanes, byte indices, size and kind.
* `instrument_op` — counts each executed op (profile) under the class its builder registered
  with (opkinds.builds) and marks warp-synchronising ops (shfl/vote/match/bar.warp.sync, and
  the warpgroup ops wgmma.*) for the sanitizer; ops the scheduler runs itself (branch, exit, barrier) get an `Op.probe` the
  executor calls when they execute or release.

`Monitor` is the per-launch object (`st.monitor`) that fans these events out to the sanitizer
(`sanitizer.py`) and the profiler counters (`counters.py`).
"""
from __future__ import annotations

from typing import NamedTuple

from .opkinds import BARRIER, BRANCH, EXIT, WARPSYNC, WGSYNC


class Mode(NamedTuple):
    race: bool
    init: bool
    profile: bool


def track_access(ctx, space: str, access: str, locate_fn):
    """Wrap one state space's locate function so the monitor sees every access it checks."""
    site = len(ctx.sites)
    ctx.sites.append(ctx.instr)

    def tracked(st, sel, a, nbytes):
        views, idx = locate_fn(st, sel, a, nbytes)
        st.monitor.access(st, space, sel, idx, nbytes, access, site)
        return views, idx
    return tracked


def instrument_op(ctx, op, cls: str, flops: int) -> None:
    """Hook one decoded op, counted under its profiler class `cls` with `flops` per active
    thread (from its builder's registration, opkinds.Builder.classify).  Ops the scheduler
    releases itself (branch, exit, barrier) get a probe, keyed on their kind: `bar.red`
    (syncthreads_count/and/or) is a barrier that also has a `run` (its reduction), and wrapping
    that run instead would hide the barrier from the sanitizer, which would then report
    correct code ordered by it as a race."""
    if op.kind not in (BRANCH, EXIT, BARRIER):
        inner, sync = op.run, op.kind in (WARPSYNC, WGSYNC)

        def run(st, sel):
            r = inner(st, sel)         # MBARWAIT: which lanes saw their phase complete
            st.monitor.executed(st, sel, cls, flops, sync)
            return r
        op.run = run
    else:
        kind = op.kind
        op.probe = lambda st, lanes, taken: st.monitor.control(st, kind, cls, lanes, taken)


class Monitor:
    """Per checked launch: routes executor events to the sanitizer and/or the counters."""

    def __init__(self, code, heap, checks, ptx_text: str, grid, block):
        from .counters import Counters
        from .sanitizer import Sanitizer
        self.sanitizer = (Sanitizer(code, heap, checks.race, checks.init, ptx_text, grid, block)
                          if checks.race or checks.init else None)
        self.counters = Counters() if checks.profilers else None

    def start_batch(self, st) -> None:
        st.monitor = self
        if self.sanitizer is not None:
            self.sanitizer.start_batch(st)

    def executed(self, st, sel, cls, flops, sync) -> None:
        if self.counters is not None:
            self.counters.executed(st, sel, cls, flops)
        if sync and self.sanitizer is not None:
            self.sanitizer.warp_sync(st, sel)

    def control(self, st, kind, cls, lanes, taken) -> None:
        if self.counters is not None:
            self.counters.control(st, kind, cls, lanes, taken)
        if kind == BARRIER and self.sanitizer is not None:
            self.sanitizer.barrier(st, lanes)

    def access(self, st, space, sel, idx, nbytes, access, site) -> None:
        if self.counters is not None:
            self.counters.memory(st, space, sel, idx, nbytes)
        if self.sanitizer is not None:
            self.sanitizer.access(st, space, sel, idx, nbytes, access, site)
