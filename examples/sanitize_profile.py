"""Checking kernels on the CPU executor: `python examples/sanitize_profile.py`.

1. pyptx.sanitize() finds a planted race: a block reduction whose loop lacks a barrier.
2. pyptx.profile() finds a bad access pattern: a naive transpose writes with a 4 KiB stride
   (one 32-byte sector per thread); the shared-memory tiled transpose is fully coalesced, and
   padding its tile by one column removes the 32-way bank conflicts of the column reads.
Both run on the CPU executor even where a GPU is present: pyptx.sanitize() always does, and the
profiler's counters exist only there (a profiled GPU launch records only `gpu_ms`), so the
profiled launches set PYPTX_DEVICE=cpu for their duration.
(docs/checking.md walks through the output.)
"""
import contextlib
import os

import numpy as np

import pyptx
from pyptx import f32

TILE = 32


@pyptx.kernel
def block_sum(out: f32[:], x: f32[:], BARRIER: pyptx.constexpr):
    s = pyptx.shared.array(256, f32)
    t = pyptx.thread_idx.x
    s[t] = x[pyptx.block_idx.x * 256 + t]
    pyptx.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            s[t] = s[t] + s[t + step]
        if BARRIER:                      # the planted bug: BARRIER=False drops this barrier
            pyptx.syncthreads()
        step = step // 2
    if t == 0:
        out[pyptx.block_idx.x] = s[0]


@pyptx.kernel
def transpose_naive(out: f32[:, :], a: f32[:, :]):
    col = pyptx.block_idx.x * TILE + pyptx.thread_idx.x
    row = pyptx.block_idx.y * TILE + pyptx.thread_idx.y
    out[col, row] = a[row, col]


@pyptx.kernel
def transpose_tiled(out: f32[:, :], a: f32[:, :], PAD: pyptx.constexpr):
    tile = pyptx.shared.array(TILE * (TILE + PAD), f32)
    tx, ty = pyptx.thread_idx.x, pyptx.thread_idx.y
    bx, by = pyptx.block_idx.x * TILE, pyptx.block_idx.y * TILE
    tile[ty * (TILE + PAD) + tx] = a[by + ty, bx + tx]
    pyptx.syncthreads()
    out[bx + ty, by + tx] = tile[tx * (TILE + PAD) + ty]


def find_the_race():
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    try:
        with pyptx.sanitize(race=True, init=True):
            block_sum[4, 256](out, x, False)
    except pyptx.SanitizerError as e:
        print(f"sanitizer ({e.kind}): {e}\n")
    else:
        raise AssertionError("the planted race was not found")
    with pyptx.sanitize():
        block_sum[4, 256](out, x, True)
    assert np.allclose(out, x.reshape(4, 256).sum(1), rtol=1e-5)
    print("with the barrier: clean\n")


@contextlib.contextmanager
def on_cpu_executor():
    """Launches inside run on the CPU executor (PYPTX_DEVICE is re-read at every launch)."""
    before = os.environ.get("PYPTX_DEVICE")
    os.environ["PYPTX_DEVICE"] = "cpu"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYPTX_DEVICE"]
        else:
            os.environ["PYPTX_DEVICE"] = before


def profile_transposes(n=256):
    a = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    grid, block = (n // TILE, n // TILE), (TILE, TILE)
    with on_cpu_executor(), pyptx.profile() as prof:     # the counters need the CPU executor
        for launch in (lambda o: transpose_naive[grid, block](o, a),
                       lambda o: transpose_tiled[grid, block](o, a, 0),
                       lambda o: transpose_tiled[grid, block](o, a, 1)):
            out = np.full((n, n), np.nan, np.float32)
            launch(out)
            assert np.array_equal(out, a.T)
    print(prof)
    naive, tiled, padded = prof.launches
    assert naive.coalescing < 0.6 and tiled.coalescing == padded.coalescing == 1.0
    assert tiled.shared_bank_conflicts > 0 and padded.shared_bank_conflicts == 0
    return prof


if __name__ == "__main__":
    find_the_race()
    profile_transposes()
