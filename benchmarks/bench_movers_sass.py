"""The data-movement kernels counted statically in SASS (no GPU): the 128-bit kernels next to the
per-element ones they replaced (still in the tree as the fallbacks, so "before" is compiled from
the same source).

    python benchmarks/bench_movers_sass.py [--arch sm_90]

For each kernel: the widths of its global loads and stores, f64 instructions, and the hot path,
the instructions one thread of the common case executes (from the entry, falling through every
guarded branch or exit, to the first unguarded EXIT: ptxas lays the taken-by-most path there),
normalised per 16 bytes read.  The copy's tail thread and the fallbacks' divisions are off it.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

if __package__ in (None, ""):                  # `python benchmarks/bench_movers_sass.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.sass_count import Sass, kernel_stats, parse_sass  # noqa: E402


@dataclass
class MoverRow:
    label: str
    bytes_read: int           # per thread of the common case
    hot_path: int = 0
    ldg: str = ""
    stg: str = ""
    f64: int = 0
    mufu: int = 0             # MUFU.RCP & co: a division by a runtime value
    error: str = ""

    @property
    def per_16_bytes(self) -> float:
        return self.hot_path * 16 / self.bytes_read


def hot_path(instrs: list[Sass]) -> int:
    """Instructions from the entry to the first unguarded EXIT, falling through guarded ones."""
    for k, s in enumerate(instrs):
        if s.base == "EXIT" and not s.guard:
            return k + 1
    return len(instrs)


def _widths(instrs: list[Sass], op: str) -> str:
    return ",".join(sorted({s.opcode.removesuffix(".CONSTANT") for s in instrs
                            if s.base == op}))


def kernels():
    """(label, kernel, constexprs, bytes read per thread) at the preset's head_dim and page size."""
    import pyptx
    from stdlib_kernels.catalog import LLAMA
    from stdlib_kernels.elementwise import copy_kernel
    from stdlib_kernels.llama import kernels as M
    d, C = LLAMA["head_dim"], pyptx.constexpr
    gh = {n: M.typed(M.gather_heads_kernel, "_" + n, (pyptx.f32[:, :, :], t[:, :, :, :], C))
          for n, t in (("f32", pyptx.f32), ("f16", pyptx.f16))}
    return [("copy_words (VEC=1: the old u16 copy)", copy_kernel, {"VEC": 1}, 2),
            ("copy_words VEC=8", copy_kernel, {"VEC": 8}, 16),
            ("swap01 per element", M.swap01_kernel, {}, 4),
            (f"swap01_vec D={d}", M.swap01_vec_kernel, {"D": d}, 16),
            ("gather_heads f32 per element", gh["f32"], {"PS": 16}, 4),
            (f"gather_heads_vec f32 D={d} PS=16", M.gather_heads_vec_kernel,
             {"PS": 16, "D": d, "VEC": 4}, 16),
            ("gather_heads f16 per element", gh["f16"], {"PS": 16}, 2),
            (f"gather_heads_vec f16 D={d} PS=16", M.gather_heads_f16_kernel(),
             {"PS": 16, "D": d, "VEC": 8}, 16)]


def measure(label, kernel, constexprs, nbytes, arch: str) -> MoverRow:
    import pyptx
    from benchmarks.sass_report import disassemble
    row = MoverRow(label, nbytes)
    try:
        _, sass = disassemble(pyptx.compile(kernel, arch=arch, constexprs=constexprs).ptx, arch)
    except Exception as e:  # noqa: BLE001 - the table shows what went wrong and goes on
        row.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:90]
        return row
    instrs = next(iter(parse_sass(sass).values()))
    row.hot_path, row.f64 = hot_path(instrs), kernel_stats(instrs).f64
    row.mufu = sum(s.base == "MUFU" for s in instrs)
    row.ldg, row.stg = _widths(instrs, "LDG"), _widths(instrs, "STG")
    return row


def rows(arch: str = "sm_90") -> list[MoverRow]:
    return [measure(*k, arch) for k in kernels()]


def format_table(rs: list[MoverRow]) -> str:
    out = ["| kernel | bytes read / thread | hot path (SASS) | per 16 B read | loads | stores |",
           "|---|---:|---:|---:|---|---|"]
    for r in rs:
        out.append(f"| {r.label} | error: {r.error} |||||" if r.error else
                   f"| {r.label} | {r.bytes_read} | {r.hot_path} | {r.per_16_bytes:.0f} | "
                   f"{r.ldg} | {r.stg} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    print(format_table(rows(p.parse_args(argv).arch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
