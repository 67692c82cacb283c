"""Lowerings of the mbarrier and TMA ops (sm_90; mbarrier.init/arrive from sm_80).

`mbar_wait` is the one op here with control flow of its own: a try_wait loop on two fresh
labels (`$L__BB<n>`, numbered after the function's blocks like the emitter's edge blocks), so
the frontend needs no loop for it.  The tensor map operand is the generic address of the
`.param .align 64 .b8 name[128]` parameter (the emitter loads it once: `mov` of the
parameter's address, then `cvta.param`), as CUDA C++ passes `&tmap` of a `__grid_constant__
const CUtensorMap`.
"""
from __future__ import annotations

from .emitter import lowers
from .lower_memory import _address


def _label(em) -> str:
    label = f"$L__BB{em.n_labels}"
    em.n_labels += 1
    return label


@lowers("mbar_init")
def lower_mbar_init(em, ins) -> None:
    em.i(f"mbarrier.init.shared.b64 {_address(em, ins.operands[0], ins)}, "
         f"{em.src(ins.operands[1])}")


@lowers("mbar_arrive")
def lower_mbar_arrive(em, ins) -> None:
    em.i(f"mbarrier.arrive.shared.b64 {em.dst(ins)}, {_address(em, ins.operands[0], ins)}")


@lowers("mbar_arrive_expect_tx")
def lower_mbar_arrive_expect_tx(em, ins) -> None:
    em.i(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, {_address(em, ins.operands[0], ins)}, "
         f"{em.src(ins.operands[1])}")


@lowers("mbar_expect_tx")
def lower_mbar_expect_tx(em, ins) -> None:
    em.i(f"mbarrier.expect_tx.relaxed.cta.shared::cta.b64 "
         f"{_address(em, ins.operands[0], ins)}, {em.src(ins.operands[1])}")


@lowers("mbar_try_wait")
def lower_mbar_try_wait(em, ins) -> None:
    em.i(f"mbarrier.try_wait.parity.shared::cta.b64 {em.dst(ins)}, "
         f"{_address(em, ins.operands[0], ins)}, {em.src(ins.operands[1])}")


@lowers("mbar_wait")
def lower_mbar_wait(em, ins) -> None:
    addr = _address(em, ins.operands[0], ins)
    parity = em.src(ins.operands[1])
    p = em.new_reg("%p")
    again = _label(em)
    em.out.append(f"{again}:")
    em.i(f"mbarrier.try_wait.parity.shared::cta.b64 {p}, {addr}, {parity}")
    em.i(f"@!{p} bra {again}")


@lowers("fence_mbarrier_init")
def lower_fence_mbarrier_init(em, ins) -> None:
    em.i("fence.mbarrier_init.release.cluster")


@lowers("tma_store")
def lower_tma_store(em, ins) -> None:
    tmap, src, *coords = ins.operands
    cs = ", ".join(em.reg(c) for c in coords)
    em.i(f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group "
         f"[{em.reg(tmap)}, {{{cs}}}], {_address(em, src, ins)}")


@lowers("tma_store_wait")
def lower_tma_store_wait(em, ins) -> None:
    em.i("cp.async.bulk.commit_group")
    em.i(f"cp.async.bulk.wait_group.read {int(ins.attrs['n'])}")


@lowers("tma_load")
def lower_tma_load(em, ins) -> None:
    dst, tmap, bar, *coords = ins.operands
    dims = len(coords)
    cs = ", ".join(em.reg(c) for c in coords)
    em.i(f"cp.async.bulk.tensor.{dims}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
         f"{_address(em, dst, ins)}, [{em.reg(tmap)}, {{{cs}}}], "
         f"{_address(em, bar, ins, 'bar_offset')}")
