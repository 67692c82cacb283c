"""Optimisation passes over the IR, and the pipeline the compiler runs.

Every pass is `run(fn) -> bool` (changed?), rewrites in place and preserves the exact semantics
of the op records, ir/ops/ (fma contraction changes rounding on purpose, and only when asked).

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
from .report import report
from . import (addressing, constfold, cse, dce, fma as fma_pass, licm, simplifycfg, strength,
               unroll, widen)

MAX_ROUNDS = 4


class _Tracker:
    """Skips a pass run that provably does nothing: the pass's previous run reported no change
    and no pass has edited the IR since (passes are deterministic functions of the IR), or the
    only edits since were ones that cannot give it work (below).  This keeps the rounds, their
    order and the result exactly as without it; it only saves re-checks whose answer is known.
    (tests/test_passes_skips.py re-runs every skipped call on a copy and checks it.)

    Edits by dce that keep a pass's "nothing to do" (dce deletes instructions no live value
    uses, unreachable blocks, and block arguments no live value uses together with their
    incoming branch operands; every remaining instruction keeps its operands, the reachable
    CFG is unchanged, and no remaining value's users or facts come from what was deleted):
      * dce itself: its result is a fixpoint (the same roots give the same live set);
      * cse: the dominator tree and every remaining key are unchanged, and the table at each
        point holds a subset of what it held before, so no new match appears;
      * addressing, widen, strength: they read memory ops, their address chains, mul/gep and
        int div/rem with their operand trees and the sign facts of live values only;
      * constfold, when no block argument was removed: each remaining instruction and cbr is
        exactly as before (removing arguments could make a cbr's two edges equal).
    Not fma (a deleted user can leave a mul with one use), simplifycfg (a deleted use can free
    a forwarding block), unroll (smaller bodies fit the budget).

    Edits by simplifycfg that fold no branch keep dce's "nothing to do": trivial arguments and
    the arguments of merged blocks are replaced by the (live) values they received, forwarded
    edges pass the same values on, and the blocks made unreachable (bypassed forwarders) are
    removed by simplifycfg itself; nothing becomes dead.  (A folded cbr can leave a block
    unreachable for dce to remove.)

    Passes whose own edits leave nothing for a second run:
      * dce (above), cse: on SSA form every instruction is keyed after its operands reached
        their final values, and the table holds exactly the instructions kept, so a second walk
        makes the same lookups and finds no match;
      * simplifycfg, when its last round edited nothing (PassReport.fixpoint): a second run starts with
        that same round;
      * addressing, when no index expression was cut at its depth limit (PassReport.depth_limited): each
        address was folded until `_fold_once` found nothing, and that answer depends only on
        the structure of the address's index expression, which the run does not edit.
    Addressing's "nothing to do" also survives cse (it replaces a value by one with the same
    op, type, attributes and operands: the same structure), fma (float ops only; index
    expressions are integer) and, when the run that found nothing explored every index
    expression completely, widen (`gep(p, cvt(j))` -> `gep(p, j)` and `mul(cvt a, K)` ->
    `mulwide(a, K)` give `_split_deep` the same constant parts, one level shallower).
    """

    def __init__(self):
        self.version = 0
        self.clean: dict = {}
        self.addressing_complete = False   # the run that left addressing clean saw everything

    def __call__(self, pass_run, fn: Function) -> bool:
        if self.clean.get(pass_run) == self.version:
            return False
        r = report(fn)
        silent = r.silent_edits
        folds = r.branch_folds
        changed = pass_run(fn)
        if changed or r.silent_edits != silent:
            old = self.version
            self.version += 1
            clean = self.clean
            if pass_run is cse.run or (pass_run is simplifycfg.run and r.fixpoint):
                clean[pass_run] = self.version
            if pass_run is addressing.run:
                if not r.depth_limited:
                    clean[pass_run] = self.version
                    self.addressing_complete = True
            elif clean.get(addressing.run) == old and (
                    pass_run is cse.run or pass_run is fma_pass.run or
                    (pass_run is widen.run and self.addressing_complete)):
                clean[addressing.run] = self.version
            if pass_run is simplifycfg.run:
                if r.branch_folds == folds and self.clean.get(dce.run) == old:
                    self.clean[dce.run] = self.version
            elif pass_run is dce.run:
                clean = self.clean
                clean[dce.run] = self.version
                for q in _SURVIVE_DCE:
                    if clean.get(q) == old:
                        clean[q] = self.version
                if not r.args_removed and clean.get(constfold.run) == old:
                    clean[constfold.run] = self.version
        else:
            self.clean[pass_run] = self.version
            if pass_run is addressing.run:
                self.addressing_complete = not r.depth_limited
        return changed


_SURVIVE_DCE = (cse.run, addressing.run, widen.run, strength.run)


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
    try:
        return _run(fn, opt_level, fma)
    finally:
        fn.__dict__.pop("_cfg_cache", None)     # analyses the passes shared (analysis.cfg)


def _run(fn: Function, opt_level: int, fma: bool) -> Function:
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
