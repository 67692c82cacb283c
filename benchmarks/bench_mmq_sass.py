"""Quantised prefill GEMMs side by side with llama.cpp's MMQ, counted statically in SASS (no GPU).

    python benchmarks/bench_mmq_sass.py [--arch sm_90] [--ggml DIR]

Ours: `qmma_kernel` (stdlib_kernels/qmma.py: int8 tensor cores, hi + lo int8 activations) for
Q4_K, Q6_K and Q8_0, and the SIMT `qmatmul_tiled_kernel` it replaces for prefill.  Theirs (with
`--ggml DIR` or $GGML_SRC naming a local ggml / llama.cpp checkout; nothing is downloaded):
`mul_mat_q<type, 128, false>` (mmq.cuh, 128 activation columns per block, no bounds-check
fallback) for the same three types, each instantiated alone in a small generated .cu and compiled
with nvcc.

For every kernel: registers, local memory, the k main loop (the innermost loop with the most
IMMA; with inner loops it is counted as a floor, once round each) and once round it: instructions,
IMMA, LDSM, shared / global loads, barriers.  Normalised as instructions per IMMA: both sides
issue m16n8k32 IMMAs (16·8·32 MACs each; Q6_K m16n8k16, counted as half), so equal work per
IMMA; ours issues two per product (the hi and lo activation planes), so per output element and k
it does twice llama.cpp's IMMA work and the ratio per IMMA understates our cost per output by up
to 2x — both are printed.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

if __package__ in (None, ""):                  # `python benchmarks/bench_mmq_sass.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import ggml_build as gb  # noqa: E402
from benchmarks.sass_count import Sass, innermost, iterations, loops, parse_sass  # noqa: E402

#: (label, ggml_type enum name, its value in ggml.h) of the formats compared
TYPES = (("q4_k", "GGML_TYPE_Q4_K", 12), ("q6_k", "GGML_TYPE_Q6_K", 14),
         ("q8_0", "GGML_TYPE_Q8_0", 8))
#: llama.cpp's activation columns per block (mmq_x / J) of the instance compared
MMQ_X = 128
#: tensor-core multiply-adds issued per useful one: ours runs the hi and the lo activation plane
#: (2); llama.cpp issues one per product on q8_1.  Both sides' Q6_K use m16n8k16 IMMAs for its
#: per-16 scales, counted by their shape
OURS_MAC_FACTOR = {"q4_k": 2, "q6_k": 2, "q8_0": 2}
THEIRS_MAC_FACTOR = {"q4_k": 1, "q6_k": 1, "q8_0": 1}
#: multiply-adds of one m16n8k32 IMMA: the unit of the normalised columns
IMMA_16832 = 16 * 8 * 32


@dataclass
class LoopCount:
    label: str
    fmt: str
    side: str                                   # 'ours' or 'llama.cpp'
    registers: int = 0
    local: str = ""
    total: int = 0                              # instructions in the whole kernel
    count: Counter = field(default_factory=Counter)   # the main loop, longest path once round
    nested: bool = False
    error: str = ""


def _imma_macs(i: Sass) -> int:
    """Multiply-adds of one IMMA from its shape modifier (IMMA.16832: 16·8·32, .16816: 16·8·16)."""
    shape = next((m for m in i.modifiers if m.isdigit() and len(m) in (4, 5)), "")
    if i.base != "IMMA" or not shape:
        return 0
    m, n, k = int(shape[:2]), int(shape[2]), int(shape[3:])
    return m * n * k


def _category(i: Sass) -> list[str]:
    out = ["insns"]
    if i.base in ("IMMA", "LDSM", "BAR", "LDS", "STS", "LDG", "LDGSTS", "I2F", "FFMA", "FMUL",
                  "IMAD", "HMMA"):
        out.append(i.base)
    if i.base in ("DADD", "DMUL", "DFMA"):
        out.append("f64")
    if i.base in ("STL", "LDL"):
        out.append("local")
    return out


def _count(instrs) -> Counter:
    c = Counter(c for i in instrs for c in _category(i))
    c["imma_macs"] = sum(_imma_macs(i) for i in instrs)
    return c


def main_loop(instrs: list[Sass]) -> tuple[list[Sass], bool]:
    """(the k loop, whether it holds inner loops): the innermost loop with the most IMMA; when
    the IMMAs sit in an inner loop of a bigger one, the smallest loop holding most of them."""
    every = loops(instrs)
    inner = innermost(every)
    imma = lambda lp: sum(i.base == "IMMA" for i in lp)    # noqa: E731
    best = max(inner, key=imma, default=[])
    total = sum(i.base == "IMMA" for i in instrs)
    if best and imma(best) < total // 2:                   # the k loop has inner loops
        holding = [lp for lp in every if imma(lp) >= total // 2]
        if holding:
            return min(holding, key=len), True
    return best, False


def count_function(row: LoopCount, instrs: list[Sass]) -> LoopCount:
    row.total = len(instrs)
    lp, nested = main_loop(instrs)
    row.nested = nested
    if not lp:
        row.error = "no loop found"
        return row
    row.count = _count(lp) if nested else _count(iterations(instrs, lp)[1])
    row.count["f64_kernel"] = sum(i.base in ("DADD", "DMUL", "DFMA") for i in instrs)
    return row


def ours_rows(arch: str) -> list[LoopCount]:
    import pyptx
    from benchmarks.sass_report import disassemble
    from stdlib_kernels import qmma, qtiled
    rows = []
    for fmt, _, _ in TYPES:
        for label, kern, code in ((f"pyptx qmma[{fmt}]", qmma.qmma_kernel,
                                   getattr(qmma, fmt.upper())),
                                  (f"pyptx qmatmul_tiled[{fmt}]", qtiled.qmatmul_tiled_kernel,
                                   getattr(qtiled, fmt.upper()))):
            row = LoopCount(label, fmt, "ours")
            try:
                ck = pyptx.compile(kern, arch=arch, constexprs={"FMT": code})
                res, text = disassemble(ck.ptx, arch)
            except Exception as e:  # noqa: BLE001 - a missing tool is reported in the table
                row.error = str(e)[:80]
                rows.append(row)
                continue
            row.registers = res["registers"]
            row.local = f"spill {res['spill_stores'] + res['spill_loads']} B, " \
                        f"stack {res['local_bytes']} B"
            rows.append(count_function(row, next(iter(parse_sass(text).values()))))
    return rows


def llama_rows(arch: str, ggml: str | None) -> tuple[list[LoopCount], str]:
    if not ggml:
        return [], ("llama.cpp columns skipped: pass --ggml DIR or set GGML_SRC to a local ggml "
                    "or llama.cpp checkout (nothing is downloaded)")
    root = gb.ggml_root(ggml, "mmq.cuh")
    if root is None or gb.tool("nvcc") is None or gb.tool("cuobjdump") is None:
        why = "no src/ggml-cuda/mmq.cuh" if root is None else "no nvcc/cuobjdump"
        return [], f"llama.cpp columns skipped: {why} (under {ggml})"
    rows = []
    with tempfile.TemporaryDirectory(prefix="pyptx_ggml_") as d:
        for fmt, enum, value in TYPES:
            row = LoopCount(f"llama.cpp mul_mat_q<{fmt}, {MMQ_X}>", fmt, "llama.cpp")
            src = os.path.join(d, f"mmq_{fmt}.cu")
            with open(src, "w") as f:       # taking the address instantiates the one kernel
                f.write(f'#include "mmq.cuh"\nvoid * pyptx_instance = '
                        f'(void *) mul_mat_q<{enum}, {MMQ_X}, false>;\n')
            try:
                cubin = gb.compile_cubin(root, src, arch, d, f"mmq_{fmt}", ("--extended-lambda",))
                funcs = parse_sass(gb.disassemble(cubin))
                res = gb.resources(cubin)
            except RuntimeError as e:
                row.error = str(e).splitlines()[0][:80]
                rows.append(row)
                continue
            prefix = f"_Z9mul_mat_qIL9ggml_type{value}ELi{MMQ_X}ELb0E"
            fn = next((f for f in funcs if f.startswith(prefix)), None)
            if fn is None:
                row.error = f"no {prefix}* in the cubin"
                rows.append(row)
                continue
            r = res.get(fn, {})
            row.registers = r.get("REG", 0)
            local = sum(i.base in ("STL", "LDL") for i in funcs[fn])
            row.local = f"stack {r.get('STACK', 0)} B, {local} STL/LDL"
            rows.append(count_function(row, funcs[fn]))
    return rows, ""


HEAD = (f"{'kernel (k main loop, longest path once round)':44s} regs {'insns':>6s} IMMA "
        f"LDSM  LDS  STS  LDG LDGSTS BAR  I2F FFMA  f64  local memory")


def _line(r: LoopCount) -> str:
    if r.error:
        return f"{r.label:44s} {r.error}"
    c = r.count
    cells = [f"{r.registers:4d}", f"{c['insns']:6d}", f"{c['IMMA']:4d}", f"{c['LDSM']:4d}",
             f"{c['LDS']:4d}", f"{c['STS']:4d}", f"{c['LDG']:4d}", f"{c['LDGSTS']:6d}",
             f"{c['BAR']:3d}", f"{c['I2F']:4d}", f"{c['FFMA']:4d}", f"{c['f64_kernel']:4d}"]
    return f"{r.label:44s} " + " ".join(cells) + f"  {r.local}" + (
        "  (inner loops counted once: a floor)" if r.nested else "")


def per_imma(r: LoopCount) -> float | None:
    """Instructions per m16n8k32 IMMA's worth of tensor-core work (IMMA.16816 counts half)."""
    if r.error or not r.count["imma_macs"]:
        return None
    return r.count["insns"] / (r.count["imma_macs"] / IMMA_16832)


def per_work(r: LoopCount) -> float | None:
    """Instructions per 16·8·32 useful multiply-adds (the same output work on both sides)."""
    n = per_imma(r)
    if n is None:
        return None
    return n * (OURS_MAC_FACTOR if r.side == "ours" else THEIRS_MAC_FACTOR)[r.fmt]


def report(arch: str, ggml: str | None) -> str:
    if gb.tool("cuobjdump") is None:
        return "MMQ SASS report needs cuobjdump (pip install nvidia-cuda-cuobjdump)"
    ours = ours_rows(arch)
    theirs, why = llama_rows(arch, ggml)
    lines = [f"quantised prefill GEMM k loops on {arch}, per warp, once round", "", HEAD]
    lines += [_line(r) for r in ours + theirs]
    if why:
        lines += ["", why]
    lines += ["", f"{'normalised (IMMA = m16n8k32 worth of MACs)':44s} insns/IMMA  "
              "insns per 16x8x32 useful MACs; vs llama.cpp"]
    for r in ours + theirs:
        n, u = per_imma(r), per_work(r)
        if n is None:
            continue
        peer = next((t for t in theirs if t.fmt == r.fmt and per_imma(t)), None)
        vs = ""
        if peer and r.side == "ours":
            vs = (f"  {n / per_imma(peer):.2f}x per IMMA, {u / per_work(peer):.2f}x per unit "
                  f"of work")
        lines.append(f"{r.label:44s} {n:10.1f}  {u:10.1f}{vs}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ggml", default=os.environ.get("GGML_SRC"))
    a = ap.parse_args(argv)
    print(report(a.arch, a.ggml))
    return 0


if __name__ == "__main__":
    sys.exit(main())
