"""Static GPU code quality report: what ptxas makes of our PTX, counted in SASS.

    python -m benchmarks.sass_report [--arch sm_90] [--only LABEL_SUBSTRING]

For every stdlib kernel specialisation (`stdlib_kernels.catalog`) and for the three peer kernels
(`benchmarks/peer_kernels.py`: saxpy, row softmax, tiled matmul), compiled by pyptx and - for the
peers - by numba-cuda (`numba.cuda.compile_ptx`): registers and spills (`ptxas -v`), SASS
instruction count, f64 instructions, global loads by width, the hot (innermost, most-FFMA) loop's
size and its FFMA share. Peers are printed side by side with pyptx/numba ratios.

Tools: ptxas through `pyptx.toolchain`, cuobjdump from the `nvidia-cuda-cuobjdump` wheel (or
the toolkit) found through cuda.pathfinder, else PATH. A missing tool or numba-cuda is reported
in the table, never a crash. No GPU is needed. `run(arch)` returns the rows for other callers.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

if __package__ in (None, ""):                  # `python benchmarks/sass_report.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.sass_count import SassStats, kernel_stats, parse_sass  # noqa: E402


@dataclass
class Row:
    label: str
    compiler: str                     # 'pyptx' or 'numba'
    registers: int | None = None
    spills: int | None = None         # spill stores + loads, bytes
    stats: SassStats | None = None
    error: str | None = None


def find_cuobjdump() -> str | None:
    """cuobjdump from its wheel or toolkit (cuda.pathfinder), else PATH; None when missing."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        found = find_nvidia_binary_utility("cuobjdump")
        if found:
            return str(found)
    except Exception:  # noqa: BLE001 - pathfinder missing or unable: fall back to PATH
        pass
    return shutil.which("cuobjdump")


def disassemble(ptx: str, arch: str) -> tuple[dict, str]:
    """(ptxas resources, SASS text) of `ptx`.  ToolchainError / RuntimeError when a tool is missing
    or fails."""
    from pyptx import toolchain
    from pyptx.errors import ToolchainError
    ptxas = toolchain.find_ptxas()
    if ptxas is None:
        raise ToolchainError("ptxas not found (pip install nvidia-cuda-nvcc)")
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        raise ToolchainError("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    with tempfile.TemporaryDirectory(prefix="pyptx_sass_") as tmp:
        src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        p = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", cubin, src],
                           capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise ToolchainError(f"ptxas failed: {(p.stdout + p.stderr).strip()[:300]}")
        res = toolchain.parse_resources(p.stdout + p.stderr)
        d = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                           timeout=600)
        if d.returncode:
            raise ToolchainError(f"cuobjdump failed: {d.stderr.strip()[:300]}")
    return res, d.stdout


def measure(label: str, compiler: str, ptx_of, arch: str) -> Row:
    """Compile with `ptx_of()` -> PTX text, assemble, disassemble, count; errors become text."""
    row = Row(label, compiler)
    try:
        res, sass = disassemble(ptx_of(), arch)
    except Exception as e:  # noqa: BLE001 - the report shows what went wrong and goes on
        row.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:90]
        return row
    funcs = parse_sass(sass)
    row.registers = res["registers"]
    row.spills = res["spill_stores"] + res["spill_loads"]
    row.stats = kernel_stats(next(iter(funcs.values()))) if funcs else None
    return row


def stdlib_rows(arch: str, only: str = "") -> list[Row]:
    import pyptx
    from stdlib_kernels.catalog import SPECIALISATIONS
    rows = []
    for spec in SPECIALISATIONS:
        if only and only not in spec.label:
            continue
        rows.append(measure(spec.label, "pyptx", lambda s=spec: pyptx.compile(
            s.kernel, arch=arch, constexprs=s.constexprs).ptx, arch))
    return rows


def _numba_ptx(fn, sig, arch):
    from numba import cuda
    cc = tuple(int(c) for c in arch[3:5].ljust(2, "0"))
    ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
    return ptx


def peer_rows(arch: str, only: str = "") -> list[tuple[Row, Row]]:
    import pyptx
    from benchmarks import peer_kernels as pk
    ours = pk.load(pk.PYPTX_SRC, "pyptx_peer_kernels")
    try:
        theirs = pk.load(pk.NUMBA_SRC, "numba_peer_kernels")
        numba_error = None
    except Exception as e:  # noqa: BLE001 - numba-cuda is a bench extra
        theirs, numba_error = None, f"numba-cuda unavailable: {type(e).__name__}: {e}"[:90]
    out = []
    for name in pk.KERNELS:
        if only and only not in name:
            continue
        a = measure(name, "pyptx", lambda n=name: pyptx.compile(
            pyptx.kernel(getattr(ours, n)), arch=arch).ptx, arch)
        if theirs is None:
            b = Row(name, "numba", error=numba_error)
        else:
            b = measure(name, "numba", lambda n=name: _numba_ptx(
                getattr(theirs, n), pk.NUMBA_SIGS[n], arch), arch)
        out.append((a, b))
    return out


def run(arch: str = "sm_90", only: str = "") -> dict:
    """{'stdlib': [Row], 'peers': [(pyptx Row, numba Row)]}."""
    return {"stdlib": stdlib_rows(arch, only), "peers": peer_rows(arch, only)}


# ---- printing ---------------------------------------------------------------------------------

def _ldg(s: SassStats) -> str:
    return "/".join(str(s.ldg.get(b, 0)) for b in (32, 64, 128)) + (
        f" +{sum(v for b, v in s.ldg.items() if b < 32)}n" if any(b < 32 for b in s.ldg) else "")


def _cells(r: Row) -> list[str]:
    if r.error or r.stats is None:
        return [r.error or "no SASS"]
    s = r.stats
    loop = f"{s.loop_size:4d} {s.ffma_share:5.2f}" if s.loop_size else "   -     -"
    return [f"{r.registers:4d}", f"{r.spills:5d}", f"{s.instructions:5d}", f"{s.f64:4d}",
            f"{_ldg(s):>11s}", loop]


HEAD = f"{'regs':>4s} {'spill':>5s} {'sass':>5s} {'f64':>4s} {'LDG 32/64/128':>13s} " \
       f"{'loop':>4s} {'ffma':>5s}"


def format_report(result: dict, arch: str) -> str:
    lines = [f"static SASS report ({arch}); loop = the innermost loop with the most FFMAs, "
             f"ffma = its FFMA share", "", f"{'stdlib kernel':44s} {HEAD}"]
    for r in result["stdlib"]:
        lines.append(f"{r.label:44s} " + " ".join(_cells(r)))
    lines += ["", f"{'peer kernel':14s} {'compiler':8s} {HEAD}"]
    for a, b in result["peers"]:
        for r in (a, b):
            lines.append(f"{r.label:14s} {r.compiler:8s} " + " ".join(_cells(r)))
        if a.stats and b.stats:
            def ratio(x, y):
                return f"{x / y:.2f}" if y else "-"
            lines.append(f"{'':14s} {'ratio':8s} regs {ratio(a.registers, b.registers)}  "
                         f"sass {ratio(a.stats.instructions, b.stats.instructions)}  "
                         f"ffma share {a.stats.ffma_share:.2f} vs {b.stats.ffma_share:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", default="", help="only kernels whose label contains this")
    args = ap.parse_args(argv)
    result = run(args.arch, args.only)
    print(format_report(result, args.arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
