"""mbarriers on the CPU executor, against the PTX ISA's mbarrier object: phases complete when
the pending arrivals reach zero (and the tx-count is zero), try_wait.parity P is true once the
phase with parity P has completed, a warp spinning on a barrier lets the warp that completes it
run, and what can never complete is reported as a deadlock rather than hanging.

Every kernel here is assembled by ptxas for sm_90 (conftest) and, in
test_ptxas_accepts_sm_90a, for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32, u32, u64, thread_idx
from pyptx.errors import CompileError, LaunchError

rng = np.random.default_rng(20261126)


# ---- a producer/consumer ring: warp 0 produces, warp 1 consumes (or the other way round) ------

@pyptx.kernel
def ring(out: f32[:], data: f32[:, :], K: pyptx.constexpr, S: pyptx.constexpr,
         producer_first: pyptx.constexpr):
    """K tiles of 32 floats pass through an S-stage ring in shared memory.  full[s] completes
    when the producer warp's 32 threads have stored stage s, empty[s] when the consumer warp's
    32 threads have read it.  Tile k uses stage k % S in round k // S: the consumer waits on
    full[s] for parity (k // S) & 1 and the producer on empty[s] for the opposite parity (on a
    fresh barrier the phase "before phase 0" counts as completed, so round 0 does not wait)."""
    buf = pyptx.shared.array((S, 32), f32)
    full = pyptx.shared.array(S, u64)
    empty = pyptx.shared.array(S, u64)
    tid = thread_idx.x
    lane = tid % 32
    if tid == 0:
        for s in range(S):
            pyptx.mbarrier_init(full, s, 32)
            pyptx.mbarrier_init(empty, s, 32)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    producer = (tid < 32) == producer_first
    if producer:
        for k in range(K):
            s = k % S
            pyptx.mbarrier_wait(empty, s, ((k // S) & 1) ^ 1)
            buf[s, lane] = data[k, lane]
            pyptx.mbarrier_arrive(full, s)
    else:
        acc = f32(0.0)
        for k in range(K):
            s = k % S
            pyptx.mbarrier_wait(full, s, (k // S) & 1)
            acc = acc * f32(0.5) + buf[s, lane]
            pyptx.mbarrier_arrive(empty, s)
        out[lane] = acc


@pytest.mark.parametrize("S,K", [(2, 5), (3, 7), (1, 4)])
@pytest.mark.parametrize("producer_first", [True, False])
def test_ring_passes_every_tile_in_order(cpu_device, S, K, producer_first):
    """K > 2*S: every stage is used in at least two rounds, so both parities of every
    barrier are waited on.  The reference folds the tiles in order; a stage overwritten
    before it was consumed, or read before it was written, changes the result."""
    data = rng.integers(-8, 8, size=(K, 32)).astype(np.float32)
    out = np.zeros(32, np.float32)
    ring[1, 64](out, data, K, S, producer_first)
    want = np.zeros(32)
    for k in range(K):
        want = want * 0.5 + data[k].astype(np.float64)
    # integers times powers of two: every partial result is exact in f32 (|acc| < 16 with
    # at most K + 1 <= 8 significant halvings), so equality is exact
    np.testing.assert_array_equal(out, want.astype(np.float32))


# ---- the phase protocol on one barrier ---------------------------------------------------------

@pyptx.kernel
def phases(out: u32[:]):
    bars = pyptx.shared.array(1, u64)
    if thread_idx.x == 0:
        out[0] = 0
        pyptx.mbarrier_init(bars, 0, 2)
        out[1] = u32(pyptx.mbarrier_try_wait(bars, 0, 1))      # phase -1: completed
        s0 = pyptx.mbarrier_arrive(bars, 0)                     # 1 of 2 in phase 0
        s1 = pyptx.mbarrier_arrive(bars, 0)                     # phase 0 completes
        out[2] = u32(pyptx.mbarrier_try_wait(bars, 0, 0))
        pyptx.mbarrier_arrive(bars, 0)
        pyptx.mbarrier_arrive(bars, 0)                          # phase 1 completes
        out[3] = u32(pyptx.mbarrier_try_wait(bars, 0, 1))
        out[4] = u32(s0 == s1)                                  # both arrived in phase 0


def test_parity_names_the_completed_phase(cpu_device):
    out = np.full(5, 7, np.uint32)
    phases[1, 32](out)
    assert out.tolist() == [0, 1, 1, 1, 1]


@pyptx.kernel
def starved(out: i32[:], arrivals: i32):
    """Thread 0 waits for phase 0 of a barrier expecting 2 arrivals; `arrivals` threads of
    the other warp arrive."""
    bars = pyptx.shared.array(1, u64)
    tid = thread_idx.x
    if tid == 0:
        pyptx.mbarrier_init(bars, 0, 2)
    pyptx.syncthreads()
    if tid == 0:
        pyptx.mbarrier_wait(bars, 0, 0)
        out[0] = 1
    elif tid >= 32 and tid < 32 + arrivals:
        pyptx.mbarrier_arrive(bars, 0)


def test_waiter_released_by_later_warp(cpu_device):
    out = np.zeros(1, np.int32)
    starved[1, 64](out, 2)
    assert out[0] == 1


def test_wait_that_cannot_complete_is_a_deadlock(cpu_device):
    out = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match=r"mbarrier deadlock.*1 of 2 arrivals pending"):
        starved[1, 64](out, 1)


def test_too_many_arrivals_are_an_error(cpu_device):
    out = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match=r"3 arrival\(s\).*only 2 pending"):
        starved[1, 64](out, 3)


@pyptx.kernel
def no_init(out: i32[:]):
    bars = pyptx.shared.array(2, u64)
    if thread_idx.x == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.mbarrier_arrive(bars, 1)
        out[0] = 1


def test_barrier_used_before_init_is_an_error(cpu_device):
    with pytest.raises(LaunchError, match=r"shared offset 8 .*no mbarrier.init"):
        no_init[1, 32](np.zeros(1, np.int32))


@pyptx.kernel
def expect_only(out: i32[:]):
    """A phase whose tx-count never drains: the arrival alone does not complete it."""
    bars = pyptx.shared.array(1, u64)
    if thread_idx.x == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.mbarrier_expect_tx(bars, 0, 16)
        pyptx.mbarrier_arrive(bars, 0)
        pyptx.mbarrier_wait(bars, 0, 0)
        out[0] = 1


def test_pending_tx_count_keeps_the_phase_open(cpu_device):
    with pytest.raises(LaunchError, match=r"mbarrier deadlock.*tx-count 16 bytes"):
        expect_only[1, 32](np.zeros(1, np.int32))


# ---- compile-time checks and ptxas ---------------------------------------------------------------

def test_ptxas_accepts_sm_90a():
    from pyptx.toolchain import assemble, find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    for k, cx in ((ring, dict(K=5, S=2, producer_first=True)), (phases, {}),
                  (starved, {}), (expect_only, {})):
        ck = pyptx.compile(k, arch="sm_90a", constexprs=cx)
        assemble(ck.ptx, "sm_90a")


def test_needs_sm_90():
    with pytest.raises(CompileError, match=r"needs sm_90 or newer.*arch='sm_90'"):
        pyptx.compile(expect_only, arch="sm_80")


def test_init_and_arrive_exist_on_sm_80():
    @pyptx.kernel
    def k80(out: i32[:]):
        bars = pyptx.shared.array(1, u64)
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.mbarrier_arrive(bars, 0)
        out[0] = 1
    assert "mbarrier.init.shared.b64" in pyptx.compile(k80, arch="sm_80").ptx


@pytest.mark.parametrize("body,msg", [
    ("bars = pyptx.shared.array(1, i32)\n    pyptx.mbarrier_init(bars, 0, 1)",
     r"shared array of u64.*pyptx.shared.array\(n, pyptx.u64\)"),
    ("bars = pyptx.shared.array(1, u64)\n    pyptx.mbarrier_wait(bars, 0, 2)",
     r"parity must be 0 or 1"),
    ("bars = pyptx.shared.array(1, u64)\n    pyptx.mbarrier_init(bars, 0, 0)",
     r"count must be between 1 and 1048575"),
    ("pyptx.mbarrier_arrive(out, 0)", r"shared array of u64"),
])
def test_misuse_is_a_compile_error(body, msg, tmp_path):
    src = (f"import pyptx\nfrom pyptx import i32, u64\n\n@pyptx.kernel\n"
           f"def bad(out: i32[:]):\n    {body}\n")
    path = tmp_path / "bad_mbar.py"
    path.write_text(src)
    ns: dict = {}
    exec(compile(src, str(path), "exec"), ns)      # noqa: S102 - the test's own source
    with pytest.raises(CompileError, match=msg) as e:
        pyptx.compile(ns["bad"], arch="sm_90")
    assert e.value.lineno is not None
