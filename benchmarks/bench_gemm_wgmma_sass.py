"""The Hopper GEMM side by side with CUTLASS's, counted statically in SASS (no GPU needed).

    python benchmarks/bench_gemm_wgmma_sass.py [--cutlass DIR]

Ours: `gemm_wgmma_kernel` (stdlib_kernels/gemm_wgmma.py) as `gemm(..., variant="wgmma")` launches it
on a GPU (bf16, 4 stages), assembled for sm_90a.  Theirs (with `--cutlass DIR` or $CUTLASS_SRC
naming a local CUTLASS checkout with `include/`; nothing is downloaded): minimal CUTLASS 3
CollectiveBuilder instantiations of the same problem — bf16 A row-major and B row-major (MN-major
for wgmma), f32 accumulate and C, 128 x 128 x 64 tile, cluster 1 x 1, 4 stages,
`NoSmemWarpSpecialized` epilogue, one producer warpgroup issuing TMA — with either schedule:
`KernelTmaWarpSpecialized` (one consumer warpgroup doing the 128 x 128 tile as two m64n128k16 per
k16) and `KernelTmaWarpSpecializedCooperative` (two consumer warpgroups of 64 rows, as ours),
compiled with the nvcc wheel for sm_90a (about 15 s each).  CUTLASS needs libcu++ (`cuda/std/...`):
the CCCL headers of the nvcc wheel or of a CUDA toolkit (`include/cccl`) are used when found.

For each kernel: registers, local memory, HGMMA / UTMALDG present, f64 instructions, and the
consumer main loop — the loop with the most HGMMAs — once round, counting its instructions except
those of the loops nested in it (the mbarrier try-wait retries, which run only while a stage is not
ready; ptxas's ELECT loop round a TMA load that one thread issues counts once): instructions, HGMMA,
SYNCS (mbarrier), WARPGROUP (wgmma fence / arrive / wait), BAR, and the normalised figure, main-loop
instructions per HGMMA.  Per HGMMA the work is the same on both sides (m64n128k16: 64·128·16 MACs),
so the figure compares the overhead each kernel spends around its tensor-core instructions.  The
producer loop (the one with UTMALDG) is counted the same way.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

if __package__ in (None, ""):                  # `python benchmarks/bench_gemm_wgmma_sass.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import ggml_build as gb  # noqa: E402
from benchmarks.sass_count import Sass, is_f64, loops, parse_sass  # noqa: E402

ARCH = "sm_90a"

#: the CUTLASS instance (a translation unit of its own; the explicit instantiation makes nvcc
#: emit the kernel without a host launch); SCHEDULE is one of PEER_SCHEDULES
PEER_SOURCE = r"""
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;
using ElementA = cutlass::bfloat16_t; using LayoutA = cutlass::layout::RowMajor;
using ElementB = cutlass::bfloat16_t; using LayoutB = cutlass::layout::RowMajor;
using ElementC = float; using LayoutC = cutlass::layout::RowMajor;
using TileShape = Shape<_128,_128,_64>;
using ClusterShape = Shape<_1,_1,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 4, ElementC, LayoutC, 4,
    cutlass::epilogue::NoSmemWarpSpecialized>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementA, LayoutA, 8, ElementB, LayoutB, 8, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCount<4>,
    cutlass::gemm::SCHEDULE>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>,
    CollectiveMainloop, CollectiveEpilogue>;
template __global__ void cutlass::device_kernel<GemmKernel>(
    CUTLASS_GRID_CONSTANT GemmKernel::Params const);
"""


#: CUTLASS's two warp-specialised schedules for one 128 x 128 tile per block: one consumer
#: warpgroup doing all 128 rows (2 HGMMA per k16), and two doing 64 rows each (ours)
PEER_SCHEDULES = (("KernelTmaWarpSpecialized", "1 consumer warpgroup"),
                  ("KernelTmaWarpSpecializedCooperative", "2 consumer warpgroups"))


@dataclass
class KernelCount:
    label: str
    registers: int = 0
    local: str = ""
    hgmma: int = 0                       # in the whole kernel
    utmaldg: int = 0
    f64: int = 0
    main: Counter = field(default_factory=Counter)        # consumer main loop, once round
    producer: Counter = field(default_factory=Counter)    # TMA loop, once round
    error: str = ""


def _category(i: Sass) -> list[str]:
    out = ["insns"]
    if i.base in ("HGMMA", "SYNCS", "WARPGROUP", "BAR", "UTMALDG", "R2UR", "STG", "LDS", "STS"):
        out.append(i.base)
    return out


def _own_body(instrs: list[Sass], loop: list[Sass], base: str) -> list[Sass]:
    """`loop` without the instructions of the loops nested in it that have no `base`
    instruction (the mbarrier spin-wait retries, which run only while a stage is not ready); a
    nested loop with one (ptxas wraps a TMA load that one thread of a warp issues in an ELECT
    loop, run once) counts once."""
    mine = {i.addr for i in loop}
    drop = set()
    for other in loops(instrs):
        addrs = {i.addr for i in other}
        if addrs < mine and not any(i.base == base for i in other):
            drop |= addrs
    return [i for i in loop if i.addr not in drop]


def _elect_wrapper(lp: list[Sass], base: str) -> bool:
    """ptxas's loop round one instruction that one thread of a warp issues (ELECT, the
    instruction, a branch back while other threads want it): not a loop of the kernel's."""
    return lp[0].base == "ELECT" and sum(i.base == base for i in lp) == 1


def loop_with(instrs: list[Sass], base: str) -> list[Sass]:
    """The innermost loop that has `base` instructions (ELECT wrappers aside), the one with the
    most of them (smallest on ties), as `_own_body` counts it; [] when none has one."""
    cands = [lp for lp in loops(instrs)
             if any(i.base == base for i in lp) and not _elect_wrapper(lp, base)]
    sets = [{i.addr for i in lp} for lp in cands]
    inner = [lp for lp, st in zip(cands, sets) if not any(o < st for o in sets)]
    best, key = [], None
    for lp in inner:
        body = _own_body(instrs, lp, base)
        n = sum(i.base == base for i in body)
        if key is None or (n, -len(body)) > key:
            best, key = body, (n, -len(body))
    return best


def count(label: str, instrs: list[Sass], registers: int, local: str) -> KernelCount:
    row = KernelCount(label, registers, local)
    row.hgmma = sum(i.base == "HGMMA" for i in instrs)
    row.utmaldg = sum(i.base == "UTMALDG" for i in instrs)
    row.f64 = sum(is_f64(i) for i in instrs)
    row.main = Counter(c for i in loop_with(instrs, "HGMMA") for c in _category(i))
    row.producer = Counter(c for i in loop_with(instrs, "UTMALDG") for c in _category(i))
    if not row.main["HGMMA"]:
        row.error = "no main loop with HGMMA found"
    return row


def ours() -> KernelCount:
    import pyptx
    from benchmarks.sass_report import disassemble
    from stdlib_kernels.gemm_wgmma import GPU_STAGES, gemm_wgmma_kernel
    label = f"pyptx gemm_wgmma (bf16, {GPU_STAGES} stages)"
    try:
        ck = pyptx.compile(gemm_wgmma_kernel, constexprs={"BF": True, "STAGES": GPU_STAGES})
        res, text = disassemble(ck.ptx, ARCH)
    except Exception as e:  # noqa: BLE001 - a missing tool is reported in the table
        return KernelCount(label, error=str(e).splitlines()[0][:90])
    instrs = next(iter(parse_sass(text).values()))
    spills = res["spill_stores"] + res["spill_loads"]
    return count(label, instrs, res["registers"], f"spill {spills} B")


def _cccl(nvcc: str) -> str | None:
    """A folder holding libcu++'s `cuda/std` headers (the nvcc wheel's or a toolkit's)."""
    here = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include")
    cands = [here, os.path.join(here, "cccl")]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands += [os.path.join(os.environ[env], "include"),
                      os.path.join(os.environ[env], "include", "cccl")]
    cands += sorted(glob.glob("/usr/local/cuda*/include/cccl"), reverse=True)
    return next((c for c in cands if os.path.isdir(os.path.join(c, "cuda", "std"))), None)


def peer(cutlass: str | None) -> tuple[list[KernelCount], str]:
    """(CUTLASS's rows, why none)."""
    if not cutlass or not os.path.isfile(os.path.join(cutlass, "include", "cutlass",
                                                      "cutlass.h")):
        return [], ("CUTLASS rows skipped: pass --cutlass DIR or set CUTLASS_SRC to a local "
                    "CUTLASS checkout with include/ (nothing is downloaded)")
    nvcc, cuobjdump = gb.tool("nvcc"), gb.tool("cuobjdump")
    if nvcc is None or cuobjdump is None:
        return [], "CUTLASS rows skipped: no nvcc / cuobjdump (pip install nvidia-cuda-nvcc)"
    cccl = _cccl(nvcc)
    if cccl is None:
        return [], ("CUTLASS rows skipped: no libcu++ headers (cuda/std) next to nvcc or in a "
                    "CUDA toolkit's include/cccl")
    return [_peer_row(cutlass, nvcc, cccl, sched, what) for sched, what in PEER_SCHEDULES], ""


def _peer_row(cutlass: str, nvcc: str, cccl: str, schedule: str, what: str) -> KernelCount:
    label = f"CUTLASS {what} (bf16, 4 stages)"
    inc = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include")
    with tempfile.TemporaryDirectory(prefix="pyptx_cutlass_") as d:
        src, cubin = os.path.join(d, "gemm.cu"), os.path.join(d, "gemm.cubin")
        with open(src, "w") as f:
            f.write(PEER_SOURCE.replace("SCHEDULE", schedule))
        p = subprocess.run([nvcc, f"-arch={ARCH}", "-cubin", "-O3", "-std=c++17", "-DNDEBUG",
                            "--expt-relaxed-constexpr", "-diag-suppress", "20012",
                            "-I" + os.path.join(cutlass, "include"), "-I" + inc, "-I" + cccl,
                            src, "-o", cubin], capture_output=True, text=True,
                           env=gb._env(nvcc), timeout=1200)
        if p.returncode:
            return KernelCount(label, error="nvcc failed: " + (p.stdout + p.stderr)
                               .strip().splitlines()[-1][:80])
        funcs = parse_sass(gb.disassemble(cubin))
        res = gb.resources(cubin)
    fn = next((f for f in funcs if "device_kernel" in f), None)
    if fn is None:
        return KernelCount(label, error="no device_kernel in the cubin")
    r = res.get(fn, {})
    local = sum(i.base in ("STL", "LDL") for i in funcs[fn])
    return count(label, funcs[fn], r.get("REG", 0),
                 f"stack {r.get('STACK', 0)} B, {local} STL/LDL")


HEAD = (f"{'kernel':50s} regs HGMMA UTMALDG f64 | main loop: insns HGMMA SYNCS WGRP BAR "
        f"insns/HGMMA | TMA loop: insns UTMALDG | local memory")


def line(r: KernelCount) -> str:
    if r.error:
        return f"{r.label:50s} {r.error}"
    m, p = r.main, r.producer
    per = m["insns"] / m["HGMMA"]
    return (f"{r.label:50s} {r.registers:4d} {r.hgmma:5d} {r.utmaldg:7d} {r.f64:3d} | "
            f"{m['insns']:16d} {m['HGMMA']:5d} {m['SYNCS']:5d} {m['WARPGROUP']:4d} "
            f"{m['BAR']:3d} {per:11.2f} | {p['insns']:14d} {p['UTMALDG']:7d} | {r.local}")


def report(cutlass: str | None) -> str:
    if gb.tool("cuobjdump") is None:
        return "Hopper GEMM SASS report needs cuobjdump (pip install nvidia-cuda-cuobjdump)"
    mine = ours()
    theirs, why = peer(cutlass)
    out = [f"Hopper GEMM on {ARCH}: the consumer main loop (most HGMMAs) and the TMA loop once "
           "round, spin-wait retries excluded", "", HEAD] + [line(r) for r in [mine, *theirs]]
    if why:
        out += ["", why]
    if not mine.error:
        a = mine.main["insns"] / mine.main["HGMMA"]
        for t in theirs:
            if not t.error:
                b = t.main["insns"] / t.main["HGMMA"]
                out.append(f"main-loop instructions per HGMMA: pyptx {a:.2f}, {t.label} "
                           f"{b:.2f} ({a / b:.2f}x)")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cutlass", default=os.environ.get("CUTLASS_SRC"))
    a = ap.parse_args(argv)
    print(report(a.cutlass))
    return 0


if __name__ == "__main__":
    sys.exit(main())
