"""Long CPU launches: a progress bar with an estimate (stderr, TTY or PYPTX_PROGRESS=1) and a
clean Ctrl-C.  A fake clock stands in for time and the interrupt is raised from a patched
hook: no test reads a clock or sends a signal."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32
from pyptx.runtime.cpu import progress

rng = np.random.default_rng(5)
BIGGEST_GRID = 2**31 - 1


@pyptx.kernel
def fill(out: f32[:], x: f32[:], n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = x[i] * 2.0


class FakeClock:
    """Every reading is `step` seconds after the previous one."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.delenv("PYPTX_SANITIZE", raising=False)


def _interrupt_after(monkeypatch, n_batches):
    seen = []
    real = progress.Progress.update

    def update(self, done, *rest):
        real(self, done, *rest)
        seen.append(done)
        if len(seen) == n_batches:
            raise KeyboardInterrupt
    monkeypatch.setattr(progress.Progress, "update", update)
    return seen


def test_the_largest_legal_grid_is_accepted_and_ctrl_c_leaves_host_arrays_untouched(
        monkeypatch):
    monkeypatch.setenv("PYPTX_PROGRESS", "0")
    seen = _interrupt_after(monkeypatch, 2)
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    with pytest.raises(KeyboardInterrupt):
        fill[BIGGEST_GRID, 1024](out, x, n)
    assert len(seen) == 2 and seen[0] < seen[1] < BIGGEST_GRID
    assert np.isnan(out).all()                      # nothing written back
    monkeypatch.undo()                              # the executor still works afterwards
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    fill[n // 1024, 1024](out, x, n)
    np.testing.assert_array_equal(out, 2 * x)


def test_a_long_launch_draws_a_bar_with_an_estimate_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv("PYPTX_PROGRESS", "1")
    monkeypatch.setattr(progress, "clock", FakeClock(step=60.0))   # each batch "takes" 60 s
    _interrupt_after(monkeypatch, 3)
    n = 4096
    with pytest.raises(KeyboardInterrupt):
        fill[BIGGEST_GRID, 1024](np.full(n, np.nan, np.float32),
                                 rng.standard_normal(n).astype(np.float32), n)
    err = capsys.readouterr().err
    assert "pyptx: 'fill' on the CPU executor [" in err
    assert f"/{BIGGEST_GRID:,} blocks" in err and "left" in err and "d " in err   # days
    assert err.rstrip().endswith("interrupted")


def test_no_bar_when_disabled_or_short(monkeypatch, capsys):
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    monkeypatch.setenv("PYPTX_PROGRESS", "0")
    monkeypatch.setattr(progress, "clock", FakeClock(step=60.0))
    monkeypatch.setattr(progress, "_enabled", lambda: False)
    _interrupt_after(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        fill[BIGGEST_GRID, 1024](out, x, n)
    assert capsys.readouterr().err == ""
    monkeypatch.undo()
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.setenv("PYPTX_PROGRESS", "1")
    monkeypatch.setattr(progress, "clock", FakeClock(step=1e-6))    # a fast launch
    fill[n // 32, 32](out, x, n)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(out, 2 * x)


def test_time_format():
    assert progress._hms(75) == "01:15"
    assert progress._hms(3 * 3600 + 62) == "3:01:02"
    assert progress._hms(2 * 86400 + 3600 * 5 + 60 * 7) == "2d 05h07m"


@pyptx.kernel
def heavy(out: f32[:], n: i32, reps: i32):
    """One block of long loops: the whole launch is a single batch."""
    i = pyptx.thread_idx.x
    s = f32(0.0)
    for r in range(reps):
        s += f32(r % 7)
    if i < n:
        out[i] = s


def test_a_single_heavy_batch_reports_work_done_inside_the_batch(monkeypatch, capsys):
    """A kernel with few blocks runs as one batch: progress comes from inside it, counted in
    warp instructions retired (no total is known yet), once the launch has run SHOW_AFTER_S."""
    monkeypatch.setenv("PYPTX_PROGRESS", "1")
    monkeypatch.setattr(progress, "clock", FakeClock(step=1.0))   # each reading 1 s later
    beats = []
    real = progress.Progress.work
    monkeypatch.setattr(progress.Progress, "work", lambda self, w: (beats.append(w),
                                                                     real(self, w)))
    out = np.zeros(32, np.float32)
    heavy[1, 32](out, 32, 20000)
    assert out[0] == sum(r % 7 for r in range(20000))
    assert len(beats) >= 3 and beats == sorted(beats)             # growing work counts
    err = capsys.readouterr().err
    assert "pyptx: 'heavy' on the CPU executor: " in err and "warp instructions" in err


def test_later_batches_show_a_fraction_from_instructions_per_block(monkeypatch, capsys):
    """After a batch has finished, in-batch progress becomes a fraction of the grid: blocks done
    plus the running batch's share estimated from the instructions per block so far."""
    monkeypatch.setenv("PYPTX_PROGRESS", "1")
    monkeypatch.setattr(progress, "clock", FakeClock(step=1.0))
    bar = progress.Progress("k", total_blocks=100)
    bar.start(0, 50)
    bar.update(50, instrs=5000)                 # 100 warp instructions per block
    bar.start(50, 50)
    bar.work(2500)                              # half of the second batch
    err = capsys.readouterr().err
    assert "75/100 blocks" in err and " 75.0%" in err
