"""mbarriers and TMA bulk tensor copies (docs/hopper.md, "TMA and mbarriers").

An mbarrier is a 64-bit object in shared memory (operand `p`: a ptr.shared<u64>, plus
attrs offset bytes) with a pending-arrival count, an expected-arrival count, a transaction
(tx) count in bytes and a phase; a phase completes when its pending arrivals reach zero and
its tx-count is zero.  mbarrier.init/arrive exist from sm_80; the tx-count forms, try_wait.parity
and the bulk tensor copies (TMA) from sm_90 (PTX ISA 8.0).
"""
from __future__ import annotations

from ...types import PtrType, bool_, i32, u32, u64
from .record import family

op = family("hopper_async")

_MBAR = ("mbarrier", 70, 80)
_MBAR_TX = ("mbarrier.tx", 80, 90)
_TMA = ("cp.async.bulk.tensor", 80, 90)


def _is_bar(t) -> bool:
    return isinstance(t, PtrType) and t.space == "shared" and t.elem == u64


def _check_bar(extra, msg):
    def check(c, ins, T, a):
        c.need(len(a) == 1 + len(extra) and _is_bar(a[0])
               and all(x == want for x, want in zip(a[1:], extra)), msg)
    return check


def _check_try_wait(c, ins, T, a):
    c.need(T == bool_ and len(a) == 2 and _is_bar(a[0]) and a[1] == u32,
           "mbar_try_wait: a ptr.shared<u64> mbarrier and a u32 parity, bool_ result")


def _check_arrive(c, ins, T, a):
    c.need(T == u64 and len(a) == 1 and _is_bar(a[0]),
           "mbar_arrive: a ptr.shared<u64> mbarrier, u64 result (the arrival state)")


def _check_tma_store(c, ins, T, a):
    c.need(len(a) in (4, 5) and isinstance(a[0], PtrType) and a[0].space == "param"
           and isinstance(a[1], PtrType) and a[1].space == "shared"
           and all(t == i32 for t in a[2:]),
           "tma_store: ptr.param tensor map, shared src, 2 or 3 i32 coordinates (innermost "
           "first)")


def _check_tma_store_wait(c, ins, T, a):
    n = ins.attrs.get("n")
    c.need(type(n) is int and 0 <= n <= 63, "tma_store_wait: n an int 0..63")


def _check_tma_load(c, ins, T, a):
    c.need(len(a) in (5, 6) and isinstance(a[0], PtrType) and a[0].space == "shared"
           and isinstance(a[1], PtrType) and a[1].space == "param" and _is_bar(a[2])
           and all(t == i32 for t in a[3:]),
           "tma_load: shared dst, ptr.param tensor map, ptr.shared<u64> mbarrier, 2 or 3 i32 "
           "coordinates (innermost first)")


OPS = [
    op("mbar_init", "p, count",
       "PTX mbarrier.init.shared.b64 [p], count: the mbarrier at p (plus attrs offset bytes) "
       "starts phase 0 with count (u32, 1..2**20-1) expected and pending arrivals, tx-count 0",
       pure=False, result=False, check=_check_bar((u32,), "mbar_init: ptr.shared<u64>, u32"),
       addresses=((0, "offset"),), gate=_MBAR, ptx=("mbarrier",)),
    op("mbar_arrive", "p",
       "PTX mbarrier.arrive.shared.b64 state, [p]: one arrival on the mbarrier at p; when it "
       "makes pending arrivals zero and the tx-count is zero, the phase completes (the next "
       "phase starts with the expected count).  T u64: the opaque arrival state",
       pure=False, check=_check_arrive, addresses=((0, "offset"),), gate=_MBAR,
       ptx=("mbarrier",)),
    op("mbar_arrive_expect_tx", "p, nbytes",
       "PTX mbarrier.arrive.expect_tx.shared::cta.b64 _, [p], nbytes: the tx-count of the "
       "current phase grows by nbytes (u32), then one arrival (as mbar_arrive)",
       pure=False, result=False,
       check=_check_bar((u32,), "mbar_arrive_expect_tx: ptr.shared<u64>, u32"),
       addresses=((0, "offset"),), gate=_MBAR_TX, ptx=("mbarrier",)),
    op("mbar_expect_tx", "p, nbytes",
       "PTX mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [p], nbytes: the tx-count of the "
       "current phase grows by nbytes (u32); no arrival",
       pure=False, result=False,
       check=_check_bar((u32,), "mbar_expect_tx: ptr.shared<u64>, u32"),
       addresses=((0, "offset"),), gate=_MBAR_TX, ptx=("mbarrier",)),
    op("mbar_try_wait", "p, parity",
       "PTX mbarrier.try_wait.parity.shared::cta.b64 d, [p], parity: T bool_, true when the "
       "phase of the mbarrier with parity (u32, 0 or 1) has completed (the current phase's "
       "parity differs from it).  Potentially blocking for a time the hardware chooses",
       pure=False, check=_check_try_wait, addresses=((0, "offset"),), gate=_MBAR_TX,
       ptx=("mbarrier",)),
    op("mbar_wait", "p, parity",
       "a loop on PTX mbarrier.try_wait.parity.shared::cta.b64 until it is true: returns once "
       "the phase with parity (u32) of the mbarrier at p has completed",
       pure=False, result=False,
       check=_check_bar((u32,), "mbar_wait: ptr.shared<u64>, u32 parity"),
       addresses=((0, "offset"),), gate=_MBAR_TX, ptx=("mbarrier", "bra")),
    op("fence_mbarrier_init", "",
       "PTX fence.mbarrier_init.release.cluster: makes prior mbarrier.init visible to other "
       "threads' (and the async proxy's) mbarrier operations",
       pure=False, result=False, gate=("fence.mbarrier_init", 80, 90), ptx=("fence",)),
    op("tma_load", "dst, tmap, p, c0, c1[, c2]",
       "PTX cp.async.bulk.tensor.{2d,3d}.shared::cluster.global.tile.mbarrier::complete_tx"
       "::bytes [dst], [tmap, {c0, c1[, c2]}], [p]: copy the box of the tensor map at tmap "
       "(ptr.param: a .param .b8[128] kernel parameter's address) whose innermost-first "
       "element coordinates are c0.. (i32, may be out of bounds: such elements read as 0) to "
       "shared memory at dst (128-byte aligned, plus attrs offset bytes) with the map's "
       "swizzle, asynchronously; the bytes written count as completed transactions on the "
       "mbarrier at p (plus attrs bar_offset bytes)",
       pure=False, result=False, check=_check_tma_load,
       addresses=((0, "offset"), (2, "bar_offset")), gate=_TMA, ptx=("cp",)),
    op("tma_store", "tmap, src, c0, c1[, c2]",
       "PTX cp.async.bulk.tensor.{2d,3d}.global.shared::cta.tile.bulk_group [tmap, {c0, c1[, "
       "c2]}], [src]: copy a box from shared memory at src (128-byte aligned, laid out with "
       "the map's swizzle, plus attrs offset bytes) to the tensor map's box at innermost-first "
       "coordinates c0.. (elements outside the tensor are not written), asynchronously, in "
       "the thread's current bulk group",
       pure=False, result=False, check=_check_tma_store, addresses=((1, "offset"),),
       gate=_TMA, ptx=("cp",)),
    op("tma_store_wait", "",
       "PTX cp.async.bulk.commit_group then cp.async.bulk.wait_group.read attrs n: commit "
       "this thread's bulk stores since the last commit as one group, then wait until at most "
       "n groups are still reading their shared source",
       pure=False, result=False, check=_check_tma_store_wait, gate=_TMA, ptx=("cp",)),
]
