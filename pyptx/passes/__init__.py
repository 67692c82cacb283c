"""Optimisation passes over the IR, and the pipeline the compiler runs.

Every pass is `run(fn) -> bool` (changed?), rewrites in place and preserves the exact semantics
of ops.py (fma contraction changes rounding on purpose, and only when asked).

    opt_level 0: unreachable blocks removed, floor `//`/`%` expanded (strength, no sign facts)
    opt_level 1: constfold, dce, simplifycfg, strength
    opt_level 2: the above plus cse, licm, addressing, widen (32-bit index products widened
                 once, passes/widen.py) (and fma when fma=True), repeated until
                 nothing changes (at most a few rounds: each pass is one linear sweep);
                 strength runs after licm so that a whole `a // b` is hoisted as one op;
                 unroll (full unrolling of short constant-trip loops) after them
"""
from __future__ import annotations

from ..ir.core import Function
from . import (addressing, constfold, cse, dce, fma as fma_pass, licm, simplifycfg, strength,
               unroll, widen)

MAX_ROUNDS = 4


class _Tracker:
    """Skips a pass run that provably does nothing: the pass's previous run reported no change
    and no pass has edited the IR since (passes are deterministic functions of the IR).  This
    keeps the rounds, their order and the result exactly as without it; it only saves the
    last round's re-checks of passes whose input did not change."""

    def __init__(self):
        self.version = 0
        self.clean: dict = {}

    def __call__(self, pass_run, fn: Function) -> bool:
        if self.clean.get(pass_run) == self.version:
            return False
        silent = simplifycfg.SILENT_EDITS[0]
        changed = pass_run(fn)
        if changed or simplifycfg.SILENT_EDITS[0] != silent:
            self.version += 1
        else:
            self.clean[pass_run] = self.version
        return changed


def _cleanup(step, fn: Function) -> None:
    """constfold, dce, simplifycfg until nothing changes (what opt_level 1 does)."""
    for _ in range(MAX_ROUNDS):
        changed = step(constfold.run, fn)
        changed |= step(dce.run, fn)
        changed |= step(simplifycfg.run, fn)
        if not changed:
            break


def run_pipeline(fn: Function, opt_level: int = 2, fma: bool = True) -> Function:
    """Optimise `fn` in place and return it."""
    if opt_level <= 0:
        dce.remove_unreachable(fn)
        strength.run(fn, use_ranges=False)
        return fn
    step = _Tracker()
    if opt_level == 1:
        for _ in range(MAX_ROUNDS):
            changed = step(constfold.run, fn)
            changed |= step(dce.run, fn)
            changed |= step(simplifycfg.run, fn)
            changed |= step(strength.run, fn)
            if not changed:
                break
        return fn
    did_licm = False
    for _ in range(MAX_ROUNDS):
        changed = step(constfold.run, fn)
        changed |= step(dce.run, fn)
        changed |= step(simplifycfg.run, fn)
        changed |= step(cse.run, fn)
        if not did_licm:
            changed |= step(licm.run, fn)
            did_licm = True
        changed |= step(strength.run, fn)
        for _ in range(MAX_ROUNDS):             # fold the copies before fma/addressing see
            if not step(unroll.run, fn):        # them; folding may reveal more constant trips
                break
            changed = True
            _cleanup(step, fn)
        changed |= step(addressing.run, fn)
        changed |= step(widen.run, fn)
        if changed:
            step(cse.run, fn)
        if fma:
            changed |= step(fma_pass.run, fn)
        changed |= step(dce.run, fn)
        if not changed:
            break
    return fn


__all__ = ["run_pipeline", "addressing", "constfold", "cse", "dce", "fma_pass", "licm",
           "simplifycfg", "strength", "unroll", "widen"]
