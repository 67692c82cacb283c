"""Optimisation passes over the IR, and the pipeline the compiler runs.

Every pass is `run(fn) -> bool` (changed?), rewrites in place and preserves the exact semantics
of ops.py (fma contraction changes rounding on purpose, and only when asked).

    opt_level 0: unreachable blocks removed (nothing else)
    opt_level 1: constfold, dce, simplifycfg
    opt_level 2: the above plus cse, licm, addressing (and fma when fma=True), repeated until
                 nothing changes (at most a few rounds: each pass is one linear sweep)
"""
from __future__ import annotations

from ..ir.core import Function
from . import addressing, constfold, cse, dce, fma as fma_pass, licm, simplifycfg

MAX_ROUNDS = 4


def run_pipeline(fn: Function, opt_level: int = 2, fma: bool = True) -> Function:
    """Optimise `fn` in place and return it."""
    if opt_level <= 0:
        dce.remove_unreachable(fn)
        return fn
    if opt_level == 1:
        for _ in range(MAX_ROUNDS):
            changed = constfold.run(fn)
            changed |= dce.run(fn)
            changed |= simplifycfg.run(fn)
            if not changed:
                break
        return fn
    did_licm = False
    for _ in range(MAX_ROUNDS):
        changed = constfold.run(fn)
        changed |= dce.run(fn)
        changed |= simplifycfg.run(fn)
        changed |= cse.run(fn)
        if not did_licm:
            changed |= licm.run(fn)
            did_licm = True
        changed |= addressing.run(fn)
        if changed:
            cse.run(fn)
        if fma:
            changed |= fma_pass.run(fn)
        changed |= dce.run(fn)
        if not changed:
            break
    return fn


__all__ = ["run_pipeline", "addressing", "constfold", "cse", "dce", "fma_pass", "licm",
           "simplifycfg"]
