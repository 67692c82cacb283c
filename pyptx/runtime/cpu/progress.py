"""Progress of a long CPU launch: a launch runs block batch after block batch; after each one
`Progress.update` estimates the total time from the batches so far and, once the estimate is
over `LONG_S` seconds, draws a bar with the time left on stderr (only when stderr is a terminal
or `PYPTX_PROGRESS=1`; `PYPTX_PROGRESS=0` turns it off).  A legal grid of 2**31-1 blocks of
1024 threads would run for days: Ctrl-C (KeyboardInterrupt) stops the launch between two
instructions and leaves the caller's arrays untouched (the executor works on copies and writes
back only after the last batch).
"""
from __future__ import annotations

import os
import sys
import time

LONG_S = 5.0          # show the bar when the whole launch is estimated to take longer
MIN_ELAPSED_S = 0.5   # ... and at least this much has run (a steadier estimate)
REDRAW_S = 0.25
WIDTH = 30

clock = time.monotonic     # tests replace this (no test reads a real clock)


def _enabled() -> bool:
    v = os.environ.get("PYPTX_PROGRESS")
    if v is not None and v.strip() in ("0", "1"):
        return v.strip() == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _hms(s: float) -> str:
    s = int(s)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h:02d}h{m:02d}m"
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    def __init__(self, kernel: str, total_blocks: int):
        self.kernel, self.total = kernel, total_blocks
        self.t0 = clock()
        self.shown = self.silent = False
        self.last = None

    def update(self, done_blocks: int) -> None:
        """After each batch: `done_blocks` of `total` have run."""
        if done_blocks >= self.total or self.silent:
            return
        now = clock()
        elapsed = now - self.t0
        if not self.shown:
            if elapsed < MIN_ELAPSED_S or elapsed * self.total / done_blocks < LONG_S:
                return
            if not _enabled():
                self.silent = True          # long, but nobody wants a bar
                return
            self.shown = True
        elif self.last is not None and now - self.last < REDRAW_S:
            return
        self.last = now
        frac = done_blocks / self.total
        left = elapsed / frac - elapsed
        bar = "#" * int(WIDTH * frac) + "." * (WIDTH - int(WIDTH * frac))
        sys.stderr.write(f"\rpyptx: '{self.kernel}' on the CPU executor [{bar}] "
                         f"{100 * frac:5.1f}% {done_blocks:,}/{self.total:,} blocks, "
                         f"{_hms(elapsed)} elapsed, ~{_hms(left)} left (Ctrl-C stops) ")
        sys.stderr.flush()

    def close(self, interrupted: bool = False) -> None:
        if self.shown:
            sys.stderr.write(" interrupted\n" if interrupted else "\n")
            sys.stderr.flush()
