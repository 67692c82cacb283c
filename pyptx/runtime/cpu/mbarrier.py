"""mbarriers on the CPU executor: `mbarrier.init / arrive / arrive.expect_tx / expect_tx /
try_wait.parity` and the completion of asynchronous copies' transactions (tma.py).

The PTX ISA's mbarrier object, per block and shared-memory address: the expected arrival
count, the pending arrival count, the transaction count (tx-count, bytes) and the phase.
`init` starts phase 0 with pending = expected = count and tx-count 0.  `expect_tx` adds to the
tx-count, `arrive` takes one from the pending count, an asynchronous copy's completion takes
its bytes from the tx-count; when pending arrivals are zero and the tx-count is zero the phase
completes: the phase number grows by one and pending is reset to the expected count.
`try_wait.parity P` is true once the phase with parity P has completed, i.e. while the current
phase's parity differs from P (the phase before phase 0 counts as completed, so a wait for
parity 1 on a fresh barrier returns at once — the producer's idiom for "all stages empty").

The state lives beside shared memory (`st._mbar`, keyed by the launch's heap like cp.async's
queue), not in its 8 bytes: a kernel reading those bytes with ld.shared sees what it last
stored there.  Using an address that no `mbarrier.init` of this launch set up is a LaunchError,
as is an arrival on a phase with no pending arrivals left (undefined on the GPU).

Scheduling: try_wait is a MBARWAIT op.  Lanes whose phase has not completed are parked; when
no other lane of the batch can run, the scheduler polls them again (`executor._poll_mbarriers`),
and only when that releases none either is the launch a deadlock (a LaunchError that names
the barrier's state).  Polling is also when asynchronous copies complete (tma.py: the bytes
land, the tx-count drops), so a kernel that reads a TMA tile before waiting sees stale data.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...errors import LaunchError
from .memops import address
from .opkinds import MBARWAIT, NORMAL, Op, builds
from .operands import reader, writer

MAX_COUNT = (1 << 20) - 1


class Inflight(NamedTuple):
    """One issued asynchronous copy (tma.py) whose bytes have not landed: its block, its
    mbarrier's shared offset, the shared buffer indices of its bytes, the bytes, PTX line."""
    blk: int
    bar_off: int
    dst: np.ndarray
    data: np.ndarray
    line: int


class Barriers:
    """The mbarriers of one batch: shared byte offset -> per-block arrays; plus the
    asynchronous copies (tma.py) whose bytes have not landed yet."""

    def __init__(self, st):
        self.heap = st.heap
        self.nb = st.nb
        self.by_offset: dict = {}
        self.inflight: list = []       # tma.Inflight entries, in issue order

    def arrays(self, off: int) -> dict:
        a = self.by_offset.get(off)
        if a is None:
            z = np.zeros(self.nb, np.int64)
            a = self.by_offset[off] = {"init": np.zeros(self.nb, bool), "expected": z.copy(),
                                       "pending": z.copy(), "tx": z.copy(), "phase": z.copy()}
        return a


def barriers(st) -> Barriers:
    b = st.__dict__.get("_mbar")
    if b is None or b.heap is not st.heap:           # a new launch on a reused state
        b = st._mbar = Barriers(st)
    return b


def _lanes(st, sel):
    return st.tidx if sel is None else np.asarray(sel)


def _offsets(st, sel, addr, line: int, what: str):
    """(lanes, blocks, shared byte offsets) of an mbarrier operand; checked like an 8-byte
    shared access, but not shown to the sanitizer (arrivals of many threads on one barrier
    are its purpose, not a race)."""
    t = _lanes(st, sel)
    a = np.broadcast_to(np.asarray(addr(st, sel), np.int64), t.shape)
    st.shared.index(st.blk[t], a, 8, 8)             # raises Fault with the lane and address
    return t, st.blk[t], a


def _groups(blk, off):
    """Unique (block, offset) pairs with how many lanes name each."""
    key = np.stack([off, blk], axis=1)
    uniq, counts = np.unique(key, axis=0, return_counts=True)
    return uniq[:, 1], uniq[:, 0], counts


def _need_init(st, bars, blk, off, line: int, what: str):
    for b, o in zip(blk.tolist(), off.tolist()):
        a = bars.by_offset.get(o)
        if a is None or not a["init"][b]:
            blk3, _ = st.where(int(np.flatnonzero(st.blk == b)[0]))
            raise LaunchError(
                f"CPU executor: {what} at PTX line {line} in kernel '{st.code.name}' uses the "
                f"mbarrier at shared offset {o} of block {blk3}, which no mbarrier.init of this "
                f"launch initialised; call pyptx.mbarrier_init(bars, i, count) first (one "
                f"thread), then pyptx.fence_mbarrier_init() and pyptx.syncthreads()")


def settle(bars: Barriers, off: int, blk) -> None:
    """Complete the phase of the barriers at `off` of blocks `blk` whose pending arrivals and
    tx-count are both zero."""
    a = bars.by_offset[off]
    blk = np.asarray(blk)
    done = blk[(a["pending"][blk] == 0) & (a["tx"][blk] == 0) & a["init"][blk]]
    if done.size:
        a["phase"][done] += 1
        a["pending"][done] = a["expected"][done]


def complete_tx(bars: Barriers, off: int, blk: int, nbytes: int) -> None:
    """An asynchronous copy's bytes landed: its transactions complete on the barrier."""
    a = bars.by_offset.get(off)
    if a is None or not a["init"][blk]:
        return              # reported when the copy was issued
    a["tx"][blk] -= nbytes
    settle(bars, off, np.array([blk]))


def land(st, bars, blk, off) -> None:
    """The in-flight copies completing on the barriers (blk, off) that threads poll: their
    bytes reach shared memory, then their transactions complete."""
    if not bars.inflight:
        return
    keys = set(zip(np.asarray(blk).tolist(), np.asarray(off).tolist()))
    keep = []
    for e in bars.inflight:
        if (e.blk, e.bar_off) not in keys:
            keep.append(e)
            continue
        st.shared.buf[e.dst] = e.data
        mon = st.monitor
        if mon is not None and mon.sanitizer is not None:
            mon.sanitizer.async_landed(st, e.dst)
        complete_tx(bars, e.bar_off, e.blk, int(e.data.size))
    bars.inflight = keep


def arrive(st, bars, t, blk, off, tx, count_arrivals: bool, line: int, what: str):
    """expect_tx (tx bytes per lane, or None) then, if count_arrivals, one arrival per lane."""
    b, o, n = _groups(blk, off)
    _need_init(st, bars, b, o, line, what)
    for bb, oo, nn in zip(b.tolist(), o.tolist(), n.tolist()):
        a = bars.by_offset[oo]
        if tx is not None:
            a["tx"][bb] += int(tx[(blk == bb) & (off == oo)].sum())
        if count_arrivals:
            if a["pending"][bb] < nn:
                blk3, _ = st.where(int(np.flatnonzero(st.blk == bb)[0]))
                raise LaunchError(
                    f"CPU executor: {what} at PTX line {line} in kernel '{st.code.name}': "
                    f"{nn} arrival(s) on the mbarrier at shared offset {oo} of block {blk3}, "
                    f"whose current phase has only {int(a['pending'][bb])} pending arrival(s) "
                    f"left (of {int(a['expected'][bb])}); more arrivals than the count given "
                    f"to mbarrier_init are undefined on the GPU")
            a["pending"][bb] -= nn
        settle(bars, oo, np.array([bb]))


def phase_done(st, bars, blk, off, parity) -> np.ndarray:
    """Per lane: has the phase with `parity` of its barrier completed?"""
    out = np.zeros(blk.shape, bool)
    for oo in np.unique(off).tolist():
        m = off == oo
        ph = bars.by_offset[oo]["phase"][blk[m]]
        out[m] = (ph & 1) != (np.asarray(parity)[m] if np.ndim(parity) else parity)
    return out


@builds("mbarrier", kind=(MBARWAIT, NORMAL), cls="sync")
def build_mbarrier(ctx, ins, parts):
    ops = ins.operands
    line = ins.line
    if "shared" not in parts and "shared::cta" not in parts:
        ctx.error("only the .shared::cta mbarrier forms are supported")
    if parts[1] == "init":
        addr = address(ctx, ops[0])
        cnt = reader(ctx, ops[1], "u32")

        def init(st, sel):
            t, blk, off = _offsets(st, sel, addr, line, "mbarrier.init")
            c = np.broadcast_to(np.asarray(cnt(st, sel), np.int64), t.shape)
            if ((c < 1) | (c > MAX_COUNT)).any():
                raise LaunchError(f"CPU executor: mbarrier.init at PTX line {line}: count "
                                  f"{int(c[(c < 1) | (c > MAX_COUNT)][0])} is outside 1.."
                                  f"{MAX_COUNT}")
            bars = barriers(st)
            for o in np.unique(off).tolist():
                m = off == o
                a = bars.arrays(o)
                b = blk[m]
                a["init"][b] = True
                a["expected"][b] = c[m]
                a["pending"][b] = c[m]
                a["tx"][b] = 0
                a["phase"][b] = 0
        return init
    if parts[1] == "arrive":
        expect = "expect_tx" in parts
        if "noComplete" in parts:
            ctx.error("mbarrier.arrive.noComplete is not supported")
        d = None if ops[0] == ("sym", "_") else writer(ctx, ops[0], "b64")
        addr = address(ctx, ops[1])
        if len(ops) > 2 and not expect:
            ctx.error("mbarrier.arrive with a count operand is not supported")
        txr = reader(ctx, ops[2], "u32") if expect else None
        what = "mbarrier.arrive.expect_tx" if expect else "mbarrier.arrive"

        def run_arrive(st, sel):
            t, blk, off = _offsets(st, sel, addr, line, what)
            bars = barriers(st)
            tx = None if txr is None else \
                np.broadcast_to(np.asarray(txr(st, sel), np.int64), t.shape)
            state = np.zeros(t.shape, np.uint64)
            _need_init(st, bars, *_groups(blk, off)[:2], line, what)
            for o in np.unique(off).tolist():      # the state: the phase arrived on
                m = off == o
                state[m] = bars.by_offset[o]["phase"][blk[m]].astype(np.uint64)
            arrive(st, bars, t, blk, off, tx, True, line, what)
            if d is not None:
                d(st, sel, state)
        return run_arrive
    if parts[1] == "expect_tx":
        addr = address(ctx, ops[0])
        txr = reader(ctx, ops[1], "u32")

        def run_expect(st, sel):
            t, blk, off = _offsets(st, sel, addr, line, "mbarrier.expect_tx")
            tx = np.broadcast_to(np.asarray(txr(st, sel), np.int64), t.shape)
            arrive(st, barriers(st), t, blk, off, tx, False, line, "mbarrier.expect_tx")
        return run_expect
    if parts[1] in ("try_wait", "test_wait"):
        if "parity" not in parts:
            ctx.error("only mbarrier.try_wait.parity / test_wait.parity are supported")
        d = writer(ctx, ops[0], "pred")
        addr = address(ctx, ops[1])
        par = reader(ctx, ops[2], "u32")
        what = f"mbarrier.{parts[1]}.parity"

        def poll(st, sel):
            t, blk, off = _offsets(st, sel, addr, line, what)
            bars = barriers(st)
            _need_init(st, bars, *_groups(blk, off)[:2], line, what)
            land(st, bars, blk, off)
            p = np.broadcast_to(np.asarray(par(st, sel), np.int64) & 1, t.shape)
            done = phase_done(st, bars, blk, off, p)
            d(st, sel, done)
            return done
        if parts[1] == "test_wait":
            return poll                   # never blocks: a NORMAL op
        return Op(poll, MBARWAIT)
    ctx.error(f"mbarrier.{parts[1]} is not supported")


def describe_waiters(st, ops, lanes, pcs) -> str:
    """What the parked lanes of a deadlocked launch wait for (the first barrier's state)."""
    lane = int(lanes[0])
    op = ops[int(pcs[0])]
    blk3, thr = st.where(lane)
    bars = barriers(st)
    b = int(st.blk[lane])
    parts = []
    for o, a in sorted(bars.by_offset.items()):
        if a["init"][b]:
            parts.append(f"offset {o}: phase {int(a['phase'][b])}, {int(a['pending'][b])} of "
                         f"{int(a['expected'][b])} arrivals pending, tx-count "
                         f"{int(a['tx'][b])} bytes")
    return (f"{lanes.size} thread(s), the first block {blk3} thread {thr} at PTX line "
            f"{op.instr.line}, wait on an mbarrier phase that can never complete: no other "
            f"thread can run to arrive on it (block {blk3}'s mbarriers: "
            f"{'; '.join(parts) or 'none initialised'})")
