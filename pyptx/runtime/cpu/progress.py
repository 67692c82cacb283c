"""Progress of a long CPU launch, measured in work done: a launch runs block batch after block
batch, and inside a batch the executor reports the warp instructions it has retired every
`BEAT` instructions (`Progress.work`).  Once a launch has run for `SHOW_AFTER_S` seconds a line
on stderr shows how far it is (only when stderr is a terminal or `PYPTX_PROGRESS=1`;
`PYPTX_PROGRESS=0` turns it off): blocks done plus the running batch's share, estimated from
the instructions per block of the batches so far, with the time left; during the first batch,
where no total is known yet (a heavy kernel with few blocks is one batch), the instructions
retired and the time elapsed.  A legal grid of 2**31-1 blocks of 1024 threads would run for
days: Ctrl-C (KeyboardInterrupt) stops the launch between two instructions and leaves the
caller's arrays untouched (the executor works on copies and writes back only after the last
batch).
"""
from __future__ import annotations

import os
import sys
import time

SHOW_AFTER_S = 2.0    # show the line once a launch has run this long
REDRAW_S = 0.25
WIDTH = 30
BEAT = 4096           # the executor reports its instruction count this often (per batch)

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
        self.done = 0              # blocks of the finished batches
        self.instrs = 0            # warp instructions of the finished batches
        self.batch = 0             # blocks in the running batch

    def start(self, done_blocks: int, nb: int) -> None:
        """A batch of `nb` blocks starts after `done_blocks`."""
        self.done, self.batch = done_blocks, nb

    def update(self, done_blocks: int, instrs: int = 0) -> None:
        """After each batch: `done_blocks` of `total` have run; the batch retired `instrs`
        warp instructions."""
        self.instrs += instrs
        self.done, self.batch = done_blocks, 0
        if done_blocks < self.total:
            self._draw(done_blocks, None)

    def work(self, instrs: int) -> None:
        """From inside the running batch: it has retired `instrs` warp instructions so far."""
        if self.done and self.instrs:           # instructions per block known: a fraction
            per_block = self.instrs / self.done
            part = min(instrs / (per_block * self.batch), 0.99) * self.batch
            self._draw(self.done + part, instrs)
        else:
            self._draw(None, instrs)

    def _draw(self, done: float | None, instrs: int | None) -> None:
        if self.silent:
            return
        now = clock()
        elapsed = now - self.t0
        if not self.shown:
            if elapsed < SHOW_AFTER_S:
                return
            if not _enabled():
                self.silent = True          # long, but nobody wants a bar
                return
            self.shown = True
        elif self.last is not None and now - self.last < REDRAW_S:
            return
        self.last = now
        if done is None:                    # no total yet: the work so far
            total = self.instrs + (instrs or 0)
            sys.stderr.write(f"\rpyptx: '{self.kernel}' on the CPU executor: {total:,} warp "
                             f"instructions, {_hms(elapsed)} elapsed (Ctrl-C stops) ")
            sys.stderr.flush()
            return
        frac = max(done / self.total, 1e-12)
        left = elapsed / frac - elapsed
        bar = "#" * int(WIDTH * frac) + "." * (WIDTH - int(WIDTH * frac))
        sys.stderr.write(f"\rpyptx: '{self.kernel}' on the CPU executor [{bar}] "
                         f"{100 * frac:5.1f}% {int(done):,}/{self.total:,} blocks, "
                         f"{_hms(elapsed)} elapsed, ~{_hms(left)} left (Ctrl-C stops) ")
        sys.stderr.flush()

    def close(self, interrupted: bool = False) -> None:
        if self.shown:
            sys.stderr.write(" interrupted\n" if interrupted else "\n")
            sys.stderr.flush()
