"""GGUF quantised matmul benchmark.

    python benchmarks/bench_gguf.py [--repeat 20]          # GPU: timings; else the SASS report
    python benchmarks/bench_gguf.py --sass [--ggml DIR]    # static SASS comparison only

On a GPU: time of the decode GEMVs (m = 1 and 8) for Llama-7B shapes on each path, as GB/s of
weight bytes streamed (the roofline of a memory-bound GEMV is the DRAM bandwidth).

SASS report (no GPU needed, ptxas + cuobjdump from the nvidia wheels or PATH): the innermost loop
of each GEMV kernel (M = 1), as warp instructions per 256 weights, with registers and the widths
of its global loads.  With `--ggml DIR` (or $GGML_SRC) pointing at a local ggml / llama.cpp
checkout (`src/ggml-cuda/mmvq.cu` or `ggml/src/ggml-cuda/mmvq.cu`), llama.cpp's `mul_mat_vec_q`
for the same types (ncols_dst = 1) is compiled with the nvcc wheel for the same arch and counted
the same way, side by side.  Nothing is fetched; without the source that column is skipped with a
message.  (The CUDA source needs cuBLAS headers only for types: a stub header is generated.)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

import pyptx
from pyptx.toolchain import find_ptxas
from stdlib_kernels import qgemv, quant
from stdlib_kernels.catalog import LLAMA

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_build import compile_cubin, disassemble, ggml_root, tool  # noqa: E402 (same folder)

#: kernel, format, weights one warp covers per loop iteration
GEMVS = (
    ("q4k_gemv_kernel", "Q4_K", 4 * 256), ("q4k_dp4a_kernel", "Q4_K", 4 * 256),
    ("q6k_gemv_kernel", "Q6_K", 8 * 256), ("q6k_dp4a_kernel", "Q6_K", 8 * 256),
    ("q8_0_gemv_kernel", "Q8_0", 32 * 32), ("q8_0_dp4a_kernel", "Q8_0", 32 * 32),
)
#: llama.cpp: ggml_type code, weights per warp per mmvq iteration (vdr · 32 / qi blocks) and the
#: dp4a (IDP) instructions of one iteration per thread (nvcc may unroll the loop: the IDP count of
#: the loop body / this = the unroll factor)
LLAMA_CPP = {"Q4_K": (12, 2 * 256, 8), "Q6_K": (14, 1 * 256, 2), "Q8_0": (8, 8 * 32, 2)}

_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


# ---- SASS ---------------------------------------------------------------------------------

def sass_functions(cubin: str) -> dict[str, list[tuple[int, str, str]]]:
    """cuobjdump -sass → {function: [(address, opcode, operands)]}."""
    text = disassemble(cubin)
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function\s*:\s*(\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = _INSN.search(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(3), m.group(4)))
    return funcs


def hot_loop(insns) -> tuple[int, dict[str, int], int]:
    """(instruction count, LDG widths, IDP count) of the largest innermost loop (a backward
    BRA)."""
    loops = []
    for addr, op, operands in insns:
        if op.startswith("BRA"):
            t = re.findall(r"0x([0-9a-f]+)", operands)
            if t and int(t[-1], 16) <= addr:
                loops.append((int(t[-1], 16), addr))
    inner = [lp for lp in loops if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1]
                                           for o in loops)]
    if not inner:
        return 0, {}, 0
    lo, hi = max(inner, key=lambda lp: lp[1] - lp[0])
    body = [(op, ops) for a, op, ops in insns if lo <= a <= hi]
    widths: dict[str, int] = {}
    for op, _ in body:
        if op.startswith("LDG"):
            w = next((x for x in ("128", "64", "U16", "S16", "U8", "S8") if f".{x}" in op), "32")
            widths[w] = widths.get(w, 0) + 1
    return len(body), widths, sum(op.startswith("IDP") for op, _ in body)


def pyptx_rows(arch: str):
    ptxas = find_ptxas()
    for name, fmt, per in GEMVS:
        ck = pyptx.compile(getattr(qgemv, name), arch=arch, constexprs={"M": 1})
        with tempfile.TemporaryDirectory() as d:
            src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
            with open(src, "w") as f:
                f.write(ck.ptx)
            subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], check=True)
            n, widths, _ = hot_loop(next(iter(sass_functions(cubin).values())))
        yield f"pyptx {name}", fmt, n * 256 / per, ck.resources()["registers"], widths


def llama_cpp_rows(arch: str, ggml: str | None):
    if not ggml:
        print("llama.cpp column skipped: pass --ggml DIR or set GGML_SRC to a local ggml or "
              "llama.cpp checkout (nothing is downloaded)")
        return
    root = ggml_root(ggml, "mmvq.cu")
    if root is None or tool("nvcc") is None:
        why = "no nvcc" if tool("nvcc") is None else "no src/ggml-cuda/mmvq.cu"
        print(f"llama.cpp column skipped: {why} (under {ggml})")
        return
    with tempfile.TemporaryDirectory() as d:
        print("compiling llama.cpp's mmvq.cu with nvcc (a few minutes) ...", flush=True)
        try:
            cubin = compile_cubin(root, os.path.join(root, "src", "ggml-cuda", "mmvq.cu"), arch,
                                  d, "mmvq")
        except RuntimeError as e:
            print(f"llama.cpp column skipped: {e}")
            return
        funcs = sass_functions(cubin)
        for fmt, (code, per, idp) in LLAMA_CPP.items():
            name = next((f for f in funcs if f.startswith(
                f"_Z13mul_mat_vec_qIL9ggml_type{code}ELi1ELb0ELb0ELb0E")), None)
            if name:
                n, widths, idps = hot_loop(funcs[name])
                unroll = max(1, idps // idp)
                yield (f"llama.cpp mul_mat_vec_q (x{unroll})", fmt, n * 256 / (per * unroll),
                       None, widths)


def sass_report(arch: str, ggml: str | None) -> int:
    if find_ptxas() is None or tool("cuobjdump") is None:
        print("SASS report needs ptxas and cuobjdump "
              "(pip: nvidia-cuda-nvcc, nvidia-cuda-cuobjdump)")
        return 1
    print(f"innermost GEMV loop on {arch}, m = 1: warp instructions per 256 weights")
    print(f"{'kernel':36s} {'type':5s} {'insns/256':>9s} {'regs':>5s}  global loads in the loop")
    for label, fmt, per256, regs, widths in (*pyptx_rows(arch), *llama_cpp_rows(arch, ggml)):
        loads = ", ".join(f"LDG.{w} x{c}" for w, c in sorted(widths.items()))
        print(f"{label:36s} {fmt:5s} {per256:9.1f} {regs if regs else '-':>5}  {loads}")
    return 0


# ---- GPU timings --------------------------------------------------------------------------

def gpu_report(repeat: int) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_stdlib import timed                       # noqa: E402 (same folder)
    from stdlib_kernels import qmatmul
    rng = np.random.default_rng(0)
    k, shapes = LLAMA["hidden"], (LLAMA["hidden"], LLAMA["ffn"])
    print("device: GPU; GB/s of weight bytes (a GEMV reads each weight byte once)")
    for fmt, (f32_kernel, dp4a_kernel, _) in qmatmul._KERNELS.items():
        for n in shapes:
            w = quant.quantize(rng.standard_normal((n, k)).astype(np.float32), fmt).reshape(-1)
            wd = pyptx.to_device(w)
            for m in (1, 8):
                x = rng.standard_normal((m, k)).astype(np.float32)
                out = pyptx.to_device(np.empty(m * n, np.float32))
                xd = pyptx.to_device(x.reshape(-1))
                xs = pyptx.to_device(qmatmul.prepare_sums(x))
                q8 = [pyptx.to_device(a) for a in qmatmul.prepare_q8(x)]
                if fmt == "q8_0":
                    q8 = q8[:3]
                grid, block = -(-n // qgemv.GEMV_WARPS), 32 * qgemv.GEMV_WARPS
                for label, run in (
                        ("f32", lambda: f32_kernel[grid, block](out, xd, xs, wd, n, k, m)),
                        ("dp4a", lambda: dp4a_kernel[grid, block](out, *q8, xd, wd, n, k, m))):
                    t = timed(run, lambda: out.copy_to_host(), repeat)
                    print(f"{fmt} {label:5s} n={n:6d} k={k} m={m}: {w.nbytes / t / 1e9:8.1f} GB/s "
                          f"({t * 1e6:8.1f} us)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sass", action="store_true", help="static SASS report only")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ggml", default=os.environ.get("GGML_SRC"))
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    if not a.sass and pyptx.device() == "gpu":
        return gpu_report(a.repeat)
    return sass_report(a.arch, a.ggml)


if __name__ == "__main__":
    sys.exit(main())
