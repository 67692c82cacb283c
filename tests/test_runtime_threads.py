"""Runtime state shared by threads that launch at the same time: the staging-memory pool's free
lists and the context's idle internal events.  Each test forces the interleaving that used to
break (two threads both see one idle entry, both pop it) with a barrier inside the list."""
from __future__ import annotations

import threading

import pytest

from pyptx.runtime import driver

from fake_driver import FakeDriver, in_forked_child, on_fake_gpu


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


class RacyList(list):
    """A free list whose pop() waits (briefly) for a second thread to reach pop() too: without
    a lock both threads saw it non-empty and the second pop fails."""

    def __init__(self, items, barrier):
        super().__init__(items)
        self.barrier = barrier

    def pop(self, *a):
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:     # the other thread is (rightly) blocked
            pass
        return super().pop(*a)


def _race(action, n=2):
    errors, results = [], []

    def run():
        try:
            results.append(action())
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, results


def test_pool_alloc_from_two_threads_never_hands_out_one_buffer_twice(fake):
    ctx = driver.context()
    pool = ctx.pool
    ctx.enter()
    ptr, size = pool.alloc(100, None)
    pool.give_back(ptr, size, None)
    pool.idle[(0, size)] = RacyList(pool.idle[(0, size)], threading.Barrier(2, timeout=0.5))

    def alloc():
        ctx.enter()
        return pool.alloc(100, None)[0]
    errors, got = _race(alloc)
    assert errors == [] and len(set(got)) == 2 and ptr in got
    assert pool.in_use_bytes == 2 * size and pool.cached_bytes == 0


def test_internal_events_from_two_threads_are_distinct(fake):
    ctx = driver.context()
    ctx.enter()
    ev = ctx.event()
    ctx.idle_event(ev)
    ctx._events = RacyList(ctx._events, threading.Barrier(2, timeout=0.5))

    def take():
        ctx.enter()
        return ctx.event()
    errors, got = _race(take)
    assert errors == [] and len({int(e) for e in got}) == 2


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_child_forked_after_a_compile_time_cuinit_gets_the_clear_error(fake, monkeypatch):
    """The compiler asks the driver for device 0's arch (pyptx/target.py: cuInit, no
    context).  A child forked after that cannot use CUDA either: it must get the fork
    message, not a generic init error at some later call."""
    import cuda.bindings.driver as real
    from pyptx import target
    ok = real.CUresult.CUDA_SUCCESS
    a = real.CUdevice_attribute
    monkeypatch.setattr(real, "cuInit", lambda flags: (ok,))
    monkeypatch.setattr(real, "cuDeviceGet", lambda i: (ok, 0))
    monkeypatch.setattr(real, "cuDeviceGetAttribute", lambda attr, d: (
        ok, 8 if attr == a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR else 0))
    assert target._device0_arch() == "sm_80"          # cuInit ran, no pyptx context exists
    assert driver.contexts() == []
    msg = in_forked_child(lambda: (driver.context(), "no error")[1])
    assert "forked" in msg and "spawn" in msg
