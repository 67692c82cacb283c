"""Hopper warpgroup MMA (`wgmma.*`, sm_90a) and the async-proxy fence (docs/hopper.md).

Why a family of its own: these are the first arch-specific ops (they exist on sm_90a only, not on
sm_90 nor on sm_100a), so their gate names the exact arch as a string instead of a minimum sm
number (record.py, `gate`).  `wgmma` produces N/2 f32 registers: like `mma`, its result is a
VecType value taken apart by `lane`.  None of these ops is pure: they are ordered with each
other (fence, issue, commit, wait) and the wait retires what the issues wrote, so CSE, DCE and
LICM must leave them where the kernel put them.
"""
from __future__ import annotations

from ...types import VecType, bool_, f32, u32, u64
from .record import family

op = family("wgmma")

#: the arch-specific gate shared by every wgmma op: PTX ISA 8.0, exactly sm_90a
WGMMA_GATE = ("wgmma", 80, "sm_90a")

#: N of m64nNk16: 8..256 in steps of 8
WGMMA_NS = tuple(range(8, 257, 8))


def _check_wgmma(c, ins, T, a):
    at = ins.attrs
    n = at.get("n")
    c.need(n in WGMMA_NS, "wgmma: attrs n in 8, 16, ..., 256")
    c.need(at.get("atype") in ("f16", "bf16"), "wgmma: atype must be f16 or bf16")
    c.need(all(isinstance(at.get(k, False), bool) for k in ("trans_a", "trans_b")),
           "wgmma: trans_a / trans_b are bools")
    regs_a = bool(a) and a[0] == u32
    na = 4 if regs_a else 1
    c.need(len(a) == na + 2 + (n or 0) // 2, "wgmma: a (u64 or 4 x u32), b, scale_d, N/2 acc")
    c.need(all(t == (u32 if regs_a else u64) for t in a[:na]) and a[na] == u64
           and a[na + 1] == bool_ and all(t == f32 for t in a[na + 2:]),
           "wgmma: a u64 descriptor or four u32 words, b u64 descriptor, scale_d bool_, "
           "f32 accumulators")
    c.need(not (regs_a and at.get("trans_a")), "wgmma: trans_a needs A from a descriptor")
    c.need(T == VecType(f32, (n or 0) // 2), "wgmma: VecType(f32, N/2) result")


def _check_wgmma_wait(c, ins, T, a):
    n = ins.attrs.get("n")
    c.need(type(n) is int and 0 <= n <= 7, "wgmma_wait: n an int 0..7")


OPS = [
    op("wgmma", "a.., b, scale_d, acc..",
       "warpgroup-collective PTX wgmma.mma_async.sync.aligned.m64n<n>k16.f32.<atype>.<atype> "
       "(attrs n, atype in {'f16','bf16'}, trans_a, trans_b bools): a is a u64 shared-memory "
       "matrix descriptor of A (64x16) or four u32 words (A in registers, packed halves), b a "
       "u64 descriptor of B (16xN), scale_d bool_, acc the N/2 f32 accumulator registers of "
       "this thread.  T VecType(f32, N/2): D = A*B + (acc if scale_d else 0) in the ISA's D "
       "fragment layout, products exact, the sum rounded once to f32.  Asynchronous: the "
       "result may only be read after a wgmma_wait retiring its group",
       nargs=None, pure=False, check=_check_wgmma, gate=WGMMA_GATE, ptx=("wgmma", "mov")),
    op("wgmma_fence", "", "PTX wgmma.fence.sync.aligned: orders the warpgroup's earlier "
       "register and shared-memory accesses before the wgmma operations that follow",
       pure=False, result=False, gate=WGMMA_GATE, ptx=("wgmma",)),
    op("wgmma_commit", "", "PTX wgmma.commit_group.sync.aligned: the wgmma operations issued "
       "since the last commit become one group",
       pure=False, result=False, gate=WGMMA_GATE, ptx=("wgmma",)),
    op("wgmma_wait", "", "PTX wgmma.wait_group.sync.aligned attrs n: wait until at most n "
       "committed groups are pending (their results are then readable)",
       pure=False, result=False, check=_check_wgmma_wait, gate=WGMMA_GATE, ptx=("wgmma",)),
    op("fence_proxy_async", "", "PTX fence.proxy.async.shared::cta: this thread's generic-proxy "
       "shared-memory writes become visible to the async proxy (wgmma, TMA)",
       pure=False, result=False, gate=("fence.proxy.async", 80, 90), ptx=("fence",)),
]
