"""Attention kernels side by side with llama.cpp's, counted statically in SASS (no GPU needed).

    python benchmarks/bench_attention_sass.py [--arch sm_90] [--ggml DIR] [--cutlass DIR]

Ours: `flash_attention_tc` (D = 128, f16, causal and not) and the decode kernels
(`decode_attention`, `paged_attention`, head_dim 128) as the stdlib catalog specialises them;
for `--arch sm_90` / `sm_90a` also the Hopper kernel `flash_attention_wgmma` (D = 128, f16, the
GPU configuration: TMA + wgmma, assembled for sm_90a, its arch-specific target).
Theirs (with `--ggml DIR` or $GGML_SRC naming a local ggml / llama.cpp checkout; nothing is
downloaded): `flash_attn_ext_f16` (fattn-mma-f16.cuh) for D = 128 at the 64-column tiles a
prefill uses, without GQA packing (ncols2 = 1: synchronous loads) and with it (ncols2 = 4, 8:
two-stage cp.async), at the 8-column tiles of small batches (1x8: a decode step with 8 query
heads per KV head; 8x1), and `flash_attn_ext_vec` (fattn-vec.cuh) with f16 K/V, D = 128, one
query column (decode).  Each is instantiated alone in a small generated .cu that includes ggml's header
and compiled with the nvcc wheel.  For sm_90 (with `--cutlass DIR` or $CUTLASS_SRC naming a
local CUTLASS checkout): CUTLASS's Hopper FMHA, examples/88_hopper_fmha (TMA, warp-specialized,
wgmma; FlashAttention-3's structure), forward, f16, D = 128, 128 x 128 tiles, its Cooperative
and Pingpong kernels, each in a generated one-instance .cu compiled with the nvcc wheel for
sm_90a; the Hopper kernel's ratio is taken against these.

For every kernel: the KV main loop (the innermost loop with the most HMMAs, else the most
MUFU.EX2, i.e. the one that does the softmax), and once round it (every path, shortest to longest:
a loop body with a masked and an unmasked copy runs one of them per iteration) the instructions,
HMMA, LDSM, MUFU.EX2, global loads / cp.async by width, shared loads, shuffles, barriers, with
registers and local memory (spills or stack).  Work per warp per iteration is derived from the
code: flash attention does two GEMMs per tile (S = QKᵀ, O += PV), each HMMA.16816 is 16·8·16
MACs, so keys × query rows per warp = HMMA · 2048 / (2·D); an HGMMA.64xNx16 is a warpgroup's
64·N·16 MACs, 16·N·16 per warp, so it counts as N/8 HMMAs ("HMMA-eq"), and the main loop of a
wgmma kernel is the loop with the most HGMMAs without the mbarrier try-wait retries nested in it
(they run only while a stage has not landed); decode does 2·D MACs per KV position
and query head, so positions ≈ FFMA · 32 / (2·D) (an upper bound: the softmax adds a few FFMAs).
Normalised, on the longest path (which overstates the steady state where that path holds code
for the last or the diagonal tile only): flash attention as instructions per HMMA-eq (equal work
per HMMA-eq on every side), decode as warp instructions per KV position per query head.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

if __package__ in (None, ""):                  # `python benchmarks/bench_attention_sass.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import ggml_build as gb  # noqa: E402
from benchmarks.sass_count import (Sass, access_bits, innermost, iteration_lengths,  # noqa: E402
                                   iterations, loops, parse_sass)

D = 128
#: llama.cpp prefill instances for D = 128: (ncols1, ncols2); ncols1·ncols2 = 64 query columns
#: per block (4 warps of 16) and 64 keys per iteration (its Ampere config for D = 128)
MMA_CASES = ((64, 1), (16, 4), (8, 8), (1, 8), (8, 1))
#: fattn-vec, D = 128, one query column, f16 K and V (ggml_type 1), no logit softcap: 128 threads,
#: 128 KV positions per block and iteration, so 32 per warp
VEC_PREFIX = "_Z18flash_attn_ext_vecILi128ELi1EL9ggml_type1ELS0_1ELb0E"
VEC_POSITIONS = 32


@dataclass
class LoopCount:
    """One kernel's KV main loop: the counters of its shortest and longest iteration."""
    label: str
    kind: str                                   # 'fa' or 'decode'
    registers: int = 0
    local: str = ""                             # spills / stack, as text
    short: Counter = field(default_factory=Counter)
    long: Counter = field(default_factory=Counter)
    nested: bool = False                        # the loop has inner loops (counts are a floor)
    lengths: list = field(default_factory=list)  # every distinct iteration length
    positions: int = 0                          # decode: KV positions per warp per iteration
    rows: int = 16                              # FA: query rows (columns) per warp
    error: str = ""


def _category(i: Sass) -> list[str]:
    """The counters one instruction adds to (always 'insns')."""
    out = ["insns"]
    if i.base in ("HMMA", "HGMMA", "LDSM", "SHFL", "BAR", "FFMA", "LDS", "STS", "SYNCS"):
        out.append(i.base)
    elif i.opcode.startswith("MUFU.EX2"):
        out.append("EX2")
    elif i.base in ("LDG", "LDGSTS"):
        out.append(f"{i.base}.{access_bits(i)}")
    elif i.base in ("STL", "LDL"):
        out.append("local")
    return out


def _count(instrs: list[Sass]) -> Counter:
    """The counters, plus HMMA_EQ: the warp's tensor-core work in HMMA.16816 units (module
    docstring: an HGMMA.64xNx16 is N/8 of them)."""
    c = Counter(x for i in instrs for x in _category(i))
    c["HMMA_EQ"] = c["HMMA"] + sum(_hgmma_n(i) // 8 for i in instrs if i.base == "HGMMA")
    return c


def _hgmma_n(i: Sass) -> int:
    """N of an `HGMMA.64xNx16...` instruction (sass_count's parser ends the opcode at the 'x':
    the shape continues in the operands)."""
    return int(re.match(r"HGMMA\.64x(\d+)x", (i.opcode + i.operands).replace(" ", "")).group(1))


def main_loop(instrs: list[Sass]) -> tuple[list[Sass], bool]:
    """(the KV main loop, whether it has inner loops): the innermost loop with the most HMMAs,
    else the smallest loop with the most MUFU.EX2 (the online softmax's exps)."""
    every = loops(instrs)
    inner = innermost(every)

    def n(lp, what):
        return sum(what(i) for i in lp)
    best = max(inner, key=lambda lp: (n(lp, lambda i: i.base == "HMMA"),
                                      n(lp, lambda i: i.opcode.startswith("MUFU.EX2"))),
               default=[])
    if best and n(best, lambda i: i.base == "HMMA") == 0 and \
            n(best, lambda i: i.opcode.startswith("MUFU.EX2")) == 0:
        with_exp = [lp for lp in every if n(lp, lambda i: i.opcode.startswith("MUFU.EX2"))]
        if with_exp:
            return min(with_exp, key=len), True
    return best, False


def count_function(label: str, kind: str, instrs: list[Sass], registers: int,
                   local: str) -> LoopCount:
    if any(i.base == "HGMMA" for i in instrs):      # a wgmma kernel: straight-line main loop
        from benchmarks.bench_gemm_wgmma_sass import loop_with
        row = LoopCount(label, kind, registers, local)
        body = loop_with(instrs, "HGMMA")
        row.short = row.long = _count(body)
        row.lengths = [len(body)]
        return row
    lp, nested = main_loop(instrs)
    row = LoopCount(label, kind, registers, local, nested=nested)
    if not lp:
        row.error = "no loop found"
        return row
    if nested:
        row.short = row.long = _count(lp)
    else:
        short, long = iterations(instrs, lp)
        row.short, row.long = _count(short), _count(long)
        row.lengths = iteration_lengths(instrs, lp)
    return row


# ---- ours ---------------------------------------------------------------------------------

def _ours_specs(arch: str = "sm_90"):
    from stdlib_kernels.catalog import ARCH_SPECIFIC, SPECIALISATIONS
    for s in SPECIALISATIONS:
        if s.label.startswith(f"flash_attention_tc[D={D},") and s.label.endswith(",f16]"):
            yield s, "fa", 0
        elif s.label.startswith(("decode_attention[DPL=4", "paged_attention[DPL=4")):
            yield s, "decode", s.constexprs["TILE"]
    if arch in ("sm_90", "sm_90a"):                 # the Hopper kernel, for its own target
        for s in ARCH_SPECIFIC:
            if s.label in (f"flash_attention_wgmma[d={D},f16,full]",
                           f"flash_attention_wgmma[d={D},f16,causal]"):
                yield s, "fa", 0


def ours_rows(arch: str) -> list[LoopCount]:
    import pyptx
    from benchmarks.sass_report import disassemble
    rows = []
    for spec, kind, tile in _ours_specs(arch):
        target = getattr(spec.kernel, "arch", None) or arch     # sm_90a for the wgmma kernel
        try:
            ck = pyptx.compile(spec.kernel, arch=target, constexprs=spec.constexprs)
            res, text = disassemble(ck.ptx, target)
        except Exception as e:  # noqa: BLE001 - a missing tool is reported in the table
            rows.append(LoopCount(f"pyptx {spec.label}", kind, error=str(e)[:80]))
            continue
        instrs = next(iter(parse_sass(text).values()))
        spills = res["spill_stores"] + res["spill_loads"]
        row = count_function(f"pyptx {spec.label}", kind, instrs, res["registers"],
                             f"spill {spills} B")
        row.positions = tile                  # one warp per query head scores the whole tile
        rows.append(row)
    return rows


# ---- llama.cpp ----------------------------------------------------------------------------

def _ncols(name: str) -> int:
    """Query columns per block of an 'mma{ncols1}x{ncols2}' job: ggml gives a warp 8 of them
    when the block has at most 8, else 16."""
    c1, c2 = name[3:].split("x")
    return int(c1) * int(c2)


def _instance(workdir: str, name: str, header: str, line: str) -> str:
    """A generated one-instance translation unit (ggml's own declaration macro)."""
    path = os.path.join(workdir, f"{name}.cu")
    with open(path, "w") as f:
        f.write(f'#include "{header}"\n{line}\n')
    return path


def llama_rows(arch: str, ggml: str | None) -> tuple[list[LoopCount], str]:
    """(rows, why none) for llama.cpp's kernels compiled from the checkout `ggml`."""
    if not ggml:
        return [], ("llama.cpp columns skipped: pass --ggml DIR or set GGML_SRC to a local ggml "
                    "or llama.cpp checkout (nothing is downloaded)")
    root = gb.ggml_root(ggml, "fattn-mma-f16.cuh")
    if root is None or gb.tool("nvcc") is None or gb.tool("cuobjdump") is None:
        why = "no src/ggml-cuda/fattn-mma-f16.cuh" if root is None else "no nvcc/cuobjdump"
        return [], f"llama.cpp columns skipped: {why} (under {ggml})"
    jobs = [(f"mma{c1}x{c2}", "fattn-mma-f16.cuh",
             f"DECL_FATTN_MMA_F16_CASE({D}, {D}, {c1}, {c2});",
             f"_Z18flash_attn_ext_f16ILi{D}ELi{D}ELi{c1}ELi{c2}ELb0ELb0E", "fa",
             f"llama.cpp fattn-mma-f16 ncols1={c1} ncols2={c2}") for c1, c2 in MMA_CASES]
    jobs.append(("vec", "fattn-vec.cuh", f"DECL_FATTN_VEC_CASE({D}, GGML_TYPE_F16, GGML_TYPE_F16);",
                 VEC_PREFIX, "decode", "llama.cpp fattn-vec f16 K/V ncols=1"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="pyptx_ggml_") as d:
        for name, header, line, prefix, kind, label in jobs:
            try:
                cubin = gb.compile_cubin(root, _instance(d, name, header, line), arch, d, name,
                                         ("--extended-lambda",))
                funcs = parse_sass(gb.disassemble(cubin))
                res = gb.resources(cubin)
            except RuntimeError as e:
                rows.append(LoopCount(label, kind, error=str(e).splitlines()[0][:80]))
                continue
            fn = next((f for f in funcs if f.startswith(prefix)), None)
            if fn is None:
                rows.append(LoopCount(label, kind, error=f"no {prefix}* in the cubin"))
                continue
            r = res.get(fn, {})
            local = sum(i.base in ("STL", "LDL") for i in funcs[fn])
            row = count_function(label, kind, funcs[fn], r.get("REG", 0),
                                 f"stack {r.get('STACK', 0)} B, {local} STL/LDL")
            row.positions = VEC_POSITIONS
            row.rows = 8 if name.startswith("mma") and _ncols(name) <= 8 else 16
            rows.append(row)
    return rows, ""


# ---- CUTLASS's Hopper FMHA -----------------------------------------------------------------

#: CUTLASS example 88 (examples/88_hopper_fmha): the forward kernel for f16, f32 accumulation,
#: 128 query rows x 128 keys x D = 128, TMA + warp-specialized, in one translation unit
FMHA_SOURCE = r"""
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "collective/fmha_fusion.hpp"
#include "kernel/fmha_kernel_builder.hpp"
using namespace cute;
using QkvStride = cute::tuple<int, _1, cute::tuple<int, int>>;      // rows, D, (batch, head)
using FmhaKernel = typename cutlass::fmha::kernel::FmhaBuilder<
    cutlass::half_t, float, float, Shape<_128, _128, _128>, QkvStride, QkvStride, QkvStride,
    cutlass::fmha::collective::DefaultFusion, cutlass::gemm::POLICY>::Kernel;
template __global__ void cutlass::device_kernel<FmhaKernel>(
    CUTLASS_GRID_CONSTANT FmhaKernel::Params const);
"""
FMHA_POLICIES = ("KernelTmaWarpSpecializedCooperative", "KernelTmaWarpSpecializedPingpong")


def cutlass_rows(arch: str, cutlass: str | None) -> tuple[list[LoopCount], str]:
    """(rows, why none) for CUTLASS's Hopper FMHA (sm_90a) compiled from the checkout
    `cutlass` (include/ and examples/88_hopper_fmha/) with the nvcc wheel."""
    import subprocess
    if arch not in ("sm_90", "sm_90a"):
        return [], ""
    cutlass = cutlass or os.environ.get("CUTLASS_SRC")
    ex = os.path.join(cutlass or "", "examples", "88_hopper_fmha")
    if not cutlass or not os.path.isdir(ex):
        return [], ("CUTLASS FMHA columns skipped: pass --cutlass DIR or set CUTLASS_SRC to a "
                    "local CUTLASS checkout with include/ and examples/88_hopper_fmha "
                    "(nothing is downloaded)")
    from benchmarks.bench_gemm_wgmma_sass import _cccl
    nvcc = gb.tool("nvcc")
    cccl = _cccl(nvcc) if nvcc else None
    if nvcc is None or gb.tool("cuobjdump") is None or cccl is None:
        return [], "CUTLASS FMHA columns skipped: no nvcc / cuobjdump / libcu++ headers"
    inc = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include")
    rows = []
    with tempfile.TemporaryDirectory(prefix="pyptx_fmha_") as d:
        src = os.path.join(d, "fmha.cu")
        with open(src, "w") as f:
            f.write(FMHA_SOURCE)
        for pol in FMHA_POLICIES:
            label = f"CUTLASS 88_hopper_fmha {pol.replace('KernelTmaWarpSpecialized', '')}"
            cubin = os.path.join(d, pol + ".cubin")
            p = subprocess.run([nvcc, "-arch=sm_90a", "-cubin", "-O3", "-std=c++17", "-DNDEBUG",
                                "--expt-relaxed-constexpr", "-diag-suppress", "20012",
                                f"-DPOLICY={pol}", "-I" + os.path.join(cutlass, "include"),
                                "-I" + ex, "-I" + inc, "-I" + cccl, src, "-o", cubin],
                               capture_output=True, text=True, env=gb._env(nvcc), timeout=1800)
            if p.returncode:
                rows.append(LoopCount(label, "fa", error="nvcc failed: " + (
                    p.stdout + p.stderr).strip().splitlines()[-1][:70]))
                continue
            funcs = parse_sass(gb.disassemble(cubin))
            res = gb.resources(cubin)
            fn = next((f for f, ins in funcs.items() if any(i.base == "HGMMA" for i in ins)),
                      None)
            if fn is None:
                rows.append(LoopCount(label, "fa", error="no HGMMA kernel in the cubin"))
                continue
            r = res.get(fn, {})
            local = sum(i.base in ("STL", "LDL") for i in funcs[fn])
            rows.append(count_function(label, "fa", funcs[fn], r.get("REG", 0),
                                       f"stack {r.get('STACK', 0)} B, {local} STL/LDL"))
    return rows, ""


# ---- the table ----------------------------------------------------------------------------

def _span(a, b, fmt="{:.0f}") -> str:
    return fmt.format(a) if fmt.format(a) == fmt.format(b) else f"{fmt.format(a)}-{fmt.format(b)}"


def _widths(c: Counter, base: str) -> str:
    return " ".join(f"{k.split('.')[1]}x{v}" for k, v in sorted(c.items())
                    if k.startswith(base + ".")) or "-"


def _line(r: LoopCount) -> str:
    if r.error:
        return f"{r.label:48s} {r.error}"
    s, lg = r.short, r.long
    cells = [f"{r.registers:4d}", f"{_span(s['insns'], lg['insns']):>9s}",
             f"{lg['HMMA_EQ']:4d}", f"{lg['LDSM']:4d}", f"{lg['EX2']:3d}", f"{lg['FFMA']:4d}",
             f"{lg['SHFL']:4d}", f"{lg['BAR']:3d}", f"{lg['LDS']:4d}",
             f"{_widths(lg, 'LDGSTS'):>9s}", f"{_widths(lg, 'LDG'):>14s}"]
    return f"{r.label:48s} " + " ".join(cells) + f"  {r.local}" + (
        "  (has inner loops: a floor)" if r.nested else "")


HEAD = (f"{'kernel (KV main loop, once round)':48s} regs {'insns':>9s} HMMA* LDSM EX2 FFMA SHFL "
        f"BAR  LDS {'LDGSTS':>9s} {'LDG bits x n':>14s}  local memory")


def normalised(r: LoopCount) -> float | None:
    """Of the longest iteration (the steady state: the shorter ones skip the next tile's prefetch
    on the last tile, or the mask where there is none): FA: instructions per HMMA; decode: warp
    instructions per KV position per query head."""
    if r.error:
        return None
    if r.kind == "fa":
        return r.long["insns"] / r.long["HMMA_EQ"] if r.long["HMMA_EQ"] else None
    return r.long["insns"] / r.positions if r.positions else None


def work(r: LoopCount) -> str:
    if r.kind == "fa":
        area = r.long["HMMA_EQ"] * 2048 // (2 * D)
        return f"{area} key·rows (= {area // r.rows} keys x {r.rows} rows)"
    est = r.long["FFMA"] * 32 / (2 * D)
    return f"{r.positions} positions (FFMA: <= {est:.0f})"


def report(arch: str, ggml: str | None, cutlass: str | None = None) -> str:
    if gb.tool("cuobjdump") is None:
        return "attention SASS report needs cuobjdump (pip install nvidia-cuda-cuobjdump)"
    ours = ours_rows(arch)
    theirs, why = llama_rows(arch, ggml)
    fmha, why_fmha = cutlass_rows(arch, cutlass)
    why = "\n".join(w for w in (why, why_fmha) if w)
    lines = [f"attention KV main loops on {arch}, D = {D}, per warp, once round (shortest-longest "
             "path; the other columns count the longest)", "", HEAD]
    lines += [_line(r) for r in ours + theirs + fmha]
    lines += ["", "every way once round (instructions; a causal kernel masks only its diagonal "
              "tiles, the last tile prefetches nothing, llama.cpp skips its mask code without "
              "a mask):"]
    lines += [f"{r.label:48s} {' / '.join(map(str, r.lengths))}" for r in ours + theirs
              if r.lengths]
    if why:
        lines += ["", why]
    lines += ["", f"{'normalised (longest iteration)':48s} {'work per warp per iteration':36s} "
              "insns/HMMA-eq (FA), insns per KV position per query head (decode); vs "
              "llama.cpp's lowest"]
    for r in ours + theirs + fmha:
        n = normalised(r)
        if n is None:
            continue
        # the Hopper kernel against CUTLASS's Hopper FMHA, the others against llama.cpp
        hopper = r in fmha or "HGMMA" in r.long
        pool = fmha if hopper and r in ours else theirs
        peer = [normalised(t) for t in pool if t.kind == r.kind and normalised(t)]
        vs = f"  {n / min(peer):.2f}x" if peer and r in ours else ""
        if r.nested:
            vs += "  (a floor: its inner loops are counted once)"
        lines.append(f"{r.label:48s} {work(r):36s} {n:6.1f}{vs}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ggml", default=os.environ.get("GGML_SRC"))
    ap.add_argument("--cutlass", default=os.environ.get("CUTLASS_SRC"))
    a = ap.parse_args(argv)
    print(report(a.arch, a.ggml, a.cutlass))
    return 0


if __name__ == "__main__":
    sys.exit(main())
