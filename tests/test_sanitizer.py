"""pyptx.sanitize: planted races and uninitialised reads are reported with both threads and
both lines; the correct versions of the same kernels run clean and give the numpy answer."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32

rng = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.delenv("PYPTX_SANITIZE", raising=False)


@pyptx.kernel
def tree_sum(out: f32[:], x: f32[:], BARRIER: pyptx.constexpr):
    s = pyptx.shared.array(256, f32)
    t = pyptx.thread_idx.x
    s[t] = x[pyptx.block_idx.x * 256 + t]
    pyptx.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            s[t] = s[t] + s[t + step]                      # REDUCE
        if BARRIER:
            pyptx.syncthreads()
        step = step // 2
    if t == 0:
        out[pyptx.block_idx.x] = s[0]


@pyptx.kernel
def warp_tail(out: f32[:], x: f32[:], SYNC: pyptx.constexpr):
    """The classic warp-synchronous tail: the last 64 -> 1 steps done by warp 0 alone."""
    s = pyptx.shared.array(64, f32)
    t = pyptx.thread_idx.x
    s[t] = x[t]
    pyptx.syncthreads()
    if t < 32:
        s[t] = s[t] + s[t + 32]                            # FIRST
        if SYNC:
            pyptx.syncwarp()
        for k in pyptx.static_range(5):
            off = 16 >> k
            v = s[t]
            if t < off:
                v = v + s[t + off]                         # TAIL
            if SYNC:
                pyptx.syncwarp()
            s[t] = v
            if SYNC:
                pyptx.syncwarp()
    if t == 0:
        out[0] = s[0]


@pyptx.kernel
def last_block_wins(out: f32[:], x: f32[:], ATOMIC: pyptx.constexpr):
    if pyptx.thread_idx.x == 0:
        if ATOMIC:
            pyptx.atomic_add(out, 0, x[pyptx.block_idx.x])
        else:
            out[0] = x[pyptx.block_idx.x]                  # ONE_ADDRESS


@pyptx.kernel
def half_written(out: f32[:], FULL: pyptx.constexpr):
    s = pyptx.shared.array(64, f32)
    t = pyptx.thread_idx.x
    if FULL or t < 32:
        s[t] = 1.0 + t
    pyptx.syncthreads()
    out[t] = s[63 - t]                                     # READ_BACK


@pyptx.kernel
def local_scratch(out: f32[:], x: f32[:], FULL: pyptx.constexpr):
    buf = pyptx.local.array(4, f32)
    t = pyptx.thread_idx.x
    buf[0] = x[t]
    if FULL:
        buf[1] = 2.0 * x[t]
    out[t] = buf[0] + buf[1]                               # LOCAL_READ


@pyptx.kernel
def vote_then_read(out: f32[:], x: f32[:], MODE: pyptx.constexpr):
    """Each thread reads its neighbour's shared slot after a block-wide vote, which is a full
    barrier (bar.red) besides a reduction: correct code, no race."""
    s = pyptx.shared.array(64, f32)
    t = pyptx.thread_idx.x
    s[t] = x[t]                                            # BEFORE_VOTE
    if MODE == 0:
        c = f32(pyptx.syncthreads_count(x[t] > 0.0))
    elif MODE == 1:
        c = f32(pyptx.syncthreads_and(x[t] > -100.0))
    else:
        c = f32(pyptx.syncthreads_or(x[t] > 100.0))
    out[t] = s[63 - t] + c


def _line(kernel, marker):
    import inspect
    src, first = inspect.getsourcelines(kernel.py_func)
    return first + next(i for i, l in enumerate(src) if f"# {marker}" in l)


def _poisoned(n):
    return np.full(n, np.nan, np.float32)


def test_missing_barrier_in_a_tree_reduction_is_a_race_naming_both_threads_and_lines():
    x = rng.standard_normal(512).astype(np.float32)
    out = _poisoned(2)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=True, init=True):
            tree_sum[2, 256](out, x, False)
    e = ei.value
    assert isinstance(e, pyptx.MemoryFault)
    assert e.kind == "race" and e.space == "shared" and e.kernel == "tree_sum"
    assert e.source_line == e.other_source_line == _line(tree_sum, "REDUCE")
    assert e.ptx_line != e.other_ptx_line                  # the load and the store
    assert e.block == e.other_block and e.thread != e.other_thread
    assert "smem" in str(e) and f"Python line {_line(tree_sum, 'REDUCE')}" in str(e)
    assert "syncthreads" in str(e)
    assert np.isnan(out).all()                             # the caller's array is untouched


def test_tree_reduction_with_barriers_is_clean_and_correct():
    x = rng.standard_normal(512).astype(np.float32)
    out = _poisoned(2)
    with pyptx.sanitize():
        tree_sum[2, 256](out, x, True)
    np.testing.assert_allclose(out, x.reshape(2, 256).sum(1, dtype=np.float64), rtol=1e-5)


def test_warp_synchronous_reduction_without_syncwarp_is_a_race_within_one_warp():
    x = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=True, init=False):
            warp_tail[1, 64](_poisoned(1), x, False)
    e = ei.value
    assert e.kind == "race" and e.space == "shared"
    assert e.thread[0] // 32 == e.other_thread[0] // 32 == 0     # both in warp 0
    assert {e.source_line, e.other_source_line} <= {_line(warp_tail, "FIRST"),
                                                    _line(warp_tail, "TAIL")}
    assert "syncwarp" in str(e)


def test_warp_synchronous_reduction_with_syncwarp_is_clean_and_correct():
    x = rng.standard_normal(64).astype(np.float32)
    out = _poisoned(1)
    with pyptx.sanitize():
        warp_tail[1, 64](out, x, True)
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["count", "and", "or"])
def test_syncthreads_count_and_or_are_barriers_for_the_race_check(mode):
    x = rng.standard_normal(64).astype(np.float32)
    out = _poisoned(64)
    with pyptx.sanitize(race=True, init=True):
        vote_then_read[1, 64](out, x, mode)
    c = [np.count_nonzero(x > 0), 1, 0][mode]
    np.testing.assert_array_equal(out, x[::-1] + np.float32(c))


def test_two_blocks_writing_one_global_address_is_a_race_between_blocks():
    x = rng.standard_normal(4).astype(np.float32) + 5
    out = _poisoned(1)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=True, init=False):
            last_block_wins[4, 32](out, x, False)
    e = ei.value
    assert e.kind == "race" and e.space == "global"
    assert e.block != e.other_block and e.thread == e.other_thread == (0, 0, 0)
    assert e.source_line == e.other_source_line == _line(last_block_wins, "ONE_ADDRESS")
    assert "parameter 'out'" in str(e) and "offset 0" in str(e)
    assert np.isnan(out).all()


def test_atomic_updates_of_one_global_address_are_not_a_race():
    x = rng.standard_normal(4).astype(np.float32) + 5
    out = np.zeros(1, np.float32)
    with pyptx.sanitize():
        last_block_wins[4, 32](out, x, True)
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


def test_blocks_of_a_later_batch_are_checked_against_earlier_batches(monkeypatch):
    from pyptx.runtime.cpu import executor
    monkeypatch.setattr(executor, "BATCH_THREADS", 32)      # one block per batch
    x = rng.standard_normal(3).astype(np.float32)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=True, init=False):
            last_block_wins[3, 32](_poisoned(1), x, False)
    assert ei.value.kind == "race" and ei.value.block != ei.value.other_block


def test_reading_shared_memory_nobody_wrote_is_uninitialized():
    out = _poisoned(64)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=False, init=True):
            half_written[1, 64](out, False)
    e = ei.value
    assert e.kind == "uninitialized" and e.space == "shared"
    assert e.thread == (0, 0, 0) and e.address == 4 * 63          # s[63], read by thread 0
    assert e.source_line == _line(half_written, "READ_BACK")
    assert np.isnan(out).all()


def test_fully_written_shared_memory_is_clean():
    out = _poisoned(64)
    with pyptx.sanitize():
        half_written[1, 64](out, True)
    np.testing.assert_array_equal(out, 64.0 - np.arange(64, dtype=np.float32))


def test_reading_local_memory_nobody_wrote_is_uninitialized_and_full_writes_are_clean():
    x = rng.standard_normal(32).astype(np.float32)
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(init=True, race=False):
            local_scratch[1, 32](_poisoned(32), x, False)
    assert ei.value.kind == "uninitialized" and ei.value.space == "local"
    assert ei.value.source_line == _line(local_scratch, "LOCAL_READ")
    out = _poisoned(32)
    with pyptx.sanitize():
        local_scratch[1, 32](out, x, True)
    np.testing.assert_allclose(out, 3 * x, rtol=1e-6)


def test_the_environment_variable_turns_the_sanitizer_on(monkeypatch):
    x = rng.standard_normal(512).astype(np.float32)
    monkeypatch.setenv("PYPTX_SANITIZE", "race")
    with pytest.raises(pyptx.SanitizerError):
        tree_sum[2, 256](_poisoned(2), x, False)
    monkeypatch.setenv("PYPTX_SANITIZE", "init")           # races are not looked for
    tree_sum[2, 256](_poisoned(2), x, False)
    monkeypatch.setenv("PYPTX_SANITIZE", "rcae")
    with pytest.raises(ValueError, match="PYPTX_SANITIZE"):
        tree_sum[2, 256](_poisoned(2), x, False)


def test_unsanitized_launches_do_not_check(monkeypatch):
    x = rng.standard_normal(512).astype(np.float32)
    out = _poisoned(2)
    tree_sum[2, 256](out, x, False)                         # racy, but nobody asked
    assert np.isfinite(out).all()                           # it ran, and nothing raised


def test_sanitize_arguments_are_checked():
    with pytest.raises(TypeError, match="race"):
        with pyptx.sanitize(race="yes"):
            pass


def test_sanitized_launch_runs_on_the_cpu_even_when_a_gpu_is_chosen(monkeypatch):
    from pyptx.runtime import launch as L
    monkeypatch.setattr(L, "device", lambda: "gpu")
    x = rng.standard_normal(512).astype(np.float32)
    out = _poisoned(2)
    with pyptx.sanitize():
        tree_sum[2, 256](out, x, True)
    np.testing.assert_allclose(out, x.reshape(2, 256).sum(1, dtype=np.float64), rtol=1e-5)
