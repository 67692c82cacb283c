"""`PassReport`: what a pass's last run did beyond its `changed` result, for the pipeline's
skip bookkeeping (passes/__init__.py: which passes can be skipped because a run would find
nothing).  One per function being optimised (`report(fn)`), so two threads compiling two
kernels at once never see each other's counts — the module-level counters it replaces were
shared by every compile in the process.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Function


@dataclass
class PassReport:
    #: simplifycfg: cbrs folded by `bypass_forwarders` while nothing else changed (an edit its
    #: reported `changed` leaves out, so the pipeline's rounds stay as they were)
    silent_edits: int = 0
    #: simplifycfg: cbrs folded by `bypass_forwarders` (a constant condition can leave a block
    #: unreachable for dce)
    branch_folds: int = 0
    #: simplifycfg: the last run ended on a round that edited nothing (a second run would too)
    fixpoint: bool = False
    #: addressing: the last run cut an index expression at `_split_deep`'s depth limit
    depth_limited: bool = False
    #: dce: the last run removed block arguments (and so edited branch operands)
    args_removed: bool = False


def report(fn: Function) -> PassReport:
    """The function's report (made on first use)."""
    r = fn.report
    if r is None:
        r = fn.report = PassReport()
    return r
