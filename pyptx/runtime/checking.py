"""`pyptx.sanitize()` and `pyptx.profile()`: which checks the launches inside them get.

The active settings live in a ContextVar (per thread / task), plus `PYPTX_SANITIZE=race,init`.
`current()` is the one call the launcher makes per launch: it returns None on the plain path, so
an unchecked launch pays one ContextVar lookup and one environment lookup.  A `Checks` with
sanitizing on sends the launch to the CPU executor, which decodes the PTX a second time with
instrumented memory accesses (see `runtime/cpu/instrument.py`); profiling on a GPU times the
launch with CUDA events instead (`gpu_timed`).
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import NamedTuple

from .envvars import env_reader
from .profiler import LaunchRecord, Profile

_ACTIVE: ContextVar = ContextVar("pyptx_checks", default=None)   # Checks or None
_env_cache: dict = {}


_sanitize_env = env_reader("PYPTX_SANITIZE")


class Checks(NamedTuple):
    """What a launch must check/record: the sanitizer's two checks and the open profiles."""
    race: bool = False
    init: bool = False
    profilers: tuple = ()

    @property
    def sanitizing(self) -> bool:
        return self.race or self.init

    def record(self, rec: LaunchRecord) -> None:
        for p in self.profilers:
            p.launches.append(rec)


def _from_env(value: str) -> Checks:
    hit = _env_cache.get(value)
    if hit is None:
        words = {w.strip().lower() for w in value.replace(";", ",").split(",") if w.strip()}
        unknown = words - {"race", "init", "1", "all", "0", "none"}
        if unknown:
            raise ValueError(f"PYPTX_SANITIZE: unknown check(s) {', '.join(sorted(unknown))}; "
                             f"use a comma-separated list of race, init (or all / none)")
        every = bool(words & {"1", "all"})
        hit = _env_cache[value] = Checks(race=every or "race" in words,
                                         init=every or "init" in words)
    return hit


def current() -> Checks | None:
    """The checks for a launch made now, or None when nothing is on (the plain path)."""
    c = _ACTIVE.get()
    env = _sanitize_env()
    if env:
        e = _from_env(env)
        if e.sanitizing:
            c = e if c is None else c._replace(race=c.race or e.race, init=c.init or e.init)
    if c is None or not (c.sanitizing or c.profilers):
        return None
    return c


@contextlib.contextmanager
def sanitize(race: bool = True, init: bool = True):
    """Launches inside run on the CPU executor with a data-race check (`race`) and a check for
    reads of shared/local memory nothing wrote (`init`); a finding raises `SanitizerError`."""
    for name, v in (("race", race), ("init", init)):
        if not isinstance(v, bool):
            raise TypeError(f"sanitize(): '{name}' must be True or False, got {v!r}")
    outer = _ACTIVE.get() or Checks()
    token = _ACTIVE.set(outer._replace(race=outer.race or race, init=outer.init or init))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def profile():
    """Record every launch inside: `with pyptx.profile() as prof: ...; print(prof)`."""
    prof = Profile()
    outer = _ACTIVE.get() or Checks()
    token = _ACTIVE.set(outer._replace(profilers=outer.profilers + (prof,)))
    try:
        yield prof
    finally:
        _ACTIVE.reset(token)


def gpu_timed(checks: Checks, kernel: str, grid, block, run, stream=None) -> None:
    """Run a GPU launch (`run()`) between two CUDA events; record its time in every profile."""
    if not checks.profilers:
        run()
        return
    from .streams import Event
    start, end = Event(), Event()
    start.record(stream)
    run()
    end.record(stream)
    checks.record(LaunchRecord(kernel=kernel, grid=grid, block=block, device="gpu",
                               gpu_ms=end.elapsed_ms(start)))
