"""The sections of `python -m benchmarks`, each a function returning markdown text.

Every section measures pyptx and its peer in the same run and reuses the measuring functions of
the standalone scripts (bench_compile, bench_executor, bench_stdlib, bench_launch, and
sass_report where this checkout has it).  `python -m benchmarks.sections NAME [--quick]` runs one
section in its own interpreter: the sections set conflicting process-wide state (the numba
simulator flag, PYPTX_DEVICE), so the driver runs each in a subprocess.

Without numba-cuda (the `bench` extra) the peer columns are left out, not filled with "—"; the
driver says once, at the top, that the peer is missing.  A section reports how far it got with
`progress(...)` lines on stderr, which the driver shows while it runs (stdout is the report).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                      # the scripts import `peer_kernels` as a top module
os.environ["PYPTX_NO_CACHE"] = "1"            # compile timings must not be answered from disk


def _table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


#: the start of a stderr line that `python -m benchmarks` shows as progress (the rest of a
#: section's stderr is kept for the failure report)
PROGRESS = "progress: "


def progress(message: str) -> None:
    print(PROGRESS + message, file=sys.stderr, flush=True)


def _ratio(peer, ours) -> str:
    return f"{peer / ours:.0f}×" if peer and ours else "—"


def _numba_or_reason():
    try:
        from numba import cuda  # noqa: F401
        return None
    except Exception as e:  # noqa: BLE001 - any import failure means "peer missing"
        return f"numba-cuda not available ({type(e).__name__}: {e}); install the 'bench' extra"


def compile_latency(quick: bool) -> str:
    """pyptx.compile vs numba-cuda compile_ptx on the peer kernels; pyptx alone on the stdlib."""
    import pyptx
    from bench_compile import _median_ms, first_compile_seconds
    from peer_kernels import KERNELS, NUMBA_SIGS, NUMBA_SRC, PYPTX_SRC, load
    from stdlib_kernels.catalog import SPECIALISATIONS
    repeat = 5 if quick else 15
    missing = _numba_or_reason()
    pmod = load(PYPTX_SRC, "bench_pyptx_kernels")
    nmod = None if missing else load(NUMBA_SRC, "bench_numba_kernels")
    rows = []
    for i, name in enumerate(KERNELS, 1):
        progress(f"peer kernel {i}/{len(KERNELS)}: {name}")
        ours = _median_ms(lambda f: pyptx.compile(f, arch="sm_90"), getattr(pmod, name), repeat)
        theirs = None
        if nmod is not None:
            from numba import cuda
            theirs = _median_ms(lambda f, s=NUMBA_SIGS[name]: cuda.compile_ptx(f, s, cc=(9, 0)),
                                getattr(nmod, name), max(3, repeat // 3))
        rows.append((name, f"{ours:.2f}") if missing else
                    (name, f"{ours:.2f}", f"{theirs:.1f}" if theirs else "—",
                     _ratio(theirs, ours)))
    head = ("kernel", "pyptx ms") + (() if missing else ("numba-cuda ms", "ratio"))
    out = ["`pyptx.compile(fn, arch=\"sm_90\")`" + ("" if missing else
           " vs numba-cuda `cuda.compile_ptx(fn, sig, cc=(9, 0))`")
           + f", warm median of {repeat} compiles of fresh function objects, disk cache off.",
           "", _table(head, rows)]
    srows = []
    for i, spec in enumerate(SPECIALISATIONS, 1):
        if i % 5 == 1:
            progress(f"stdlib specialisation {i}/{len(SPECIALISATIONS)}: {spec.label}")
        fn = spec.kernel.py_func
        ms = _median_ms(lambda f, s=spec: pyptx.compile(f, arch="sm_90",
                                                        constexprs=s.constexprs),
                        fn, max(2, repeat // 2))
        srows.append((spec.label, f"{ms:.1f}"))
    out += ["", "Every stdlib kernel specialisation (pyptx only: numba-cuda has no version of "
            "these kernels to compile):", "",
            _table(("stdlib kernel", "pyptx compile ms"), srows), "",
            f"`import pyptx` + first compile of saxpy in a fresh interpreter: "
            f"{first_compile_seconds():.3f} s"]
    return "\n".join(out)


def stages(quick: bool) -> str:
    """Compile time per stage next to numba-cuda, cache hits, host launch cost (bench_stages)."""
    try:
        from bench_stages import main as stages_main
    except ImportError:
        return "benchmarks/bench_stages.py is not in this checkout."
    saved = sys.argv
    sys.argv = ["bench_stages", "--repeat", "5" if quick else "15"]
    try:
        text = _captured(stages_main)
    finally:
        sys.argv = saved
    if _numba_or_reason():              # no peer: its columns and the per-kernel notes go
        text = "\n".join(re.sub(r"\s+numba\s+ratio(?=\s+\(ms\)$)|\s+-\s+-$", "", line)
                         for line in text.splitlines()
                         if not line.startswith("(numba-cuda unavailable"))
        peer = ""
    else:
        peer = " with numba-cuda's `compile_ptx` as the peer"
    return "\n".join([f"Compile time by stage (frontend, passes, PTX emission; medians){peer}, "
                      f"then cache hits and the host side of a CPU launch "
                      f"(`benchmarks/bench_stages.py`):", "", "```", text, "```"])


def executor(quick: bool) -> str:
    """The CPU executor vs numba-cuda's CUDA simulator on the same kernels and inputs."""
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numpy as np
    import pyptx
    from bench_executor import cases, time_numba, time_pyptx
    from peer_kernels import KERNELS, NUMBA_SRC, PYPTX_SRC, load
    missing = _numba_or_reason()
    pmod = load(PYPTX_SRC, "bench_pyptx_kernels")
    nmod = None if missing else load(NUMBA_SRC, "bench_numba_kernels")
    rows = []
    for i, name in enumerate(KERNELS, 1):
        progress(f"kernel {i}/{len(KERNELS)}: {name}")
        grid, block, make_args, check = cases(np.random.default_rng(0))[name]
        ours = time_pyptx(pyptx.kernel(getattr(pmod, name)), grid, block, make_args, check,
                          repeat=3 if quick else 7)
        theirs = (time_numba(getattr(nmod, name), grid, block, make_args, check)
                  if nmod is not None else None)
        rows.append((name, f"{ours * 1e3:.2f}") if missing else
                    (name, f"{ours * 1e3:.2f}", f"{theirs * 1e3:.0f}" if theirs else "—",
                     _ratio(theirs, ours)))
    if missing:
        return "\n".join(["CPU executor (best of several launches, PTX parse cached); results "
                          "checked against numpy.", "",
                          _table(("kernel", "executor ms"), rows)])
    return "\n".join(["CPU executor (best of several launches, PTX parse cached) vs numba-cuda's "
                      "simulator (`NUMBA_ENABLE_CUDASIM=1`, one launch); both results checked "
                      "against numpy.", "",
                      _table(("kernel", "executor ms", "simulator ms", "ratio"), rows)])


def _captured(fn, *args) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fn(*args)
    return buf.getvalue().rstrip()


def sass(quick: bool) -> str:
    """Static code quality: ptxas resources of every stdlib kernel, the SASS report where this
    checkout has benchmarks/sass_report.py, and llama.cpp where it is installed."""
    from bench_stdlib import resource_report
    archs = ["sm_90"] if quick else ["sm_80", "sm_90"]
    no_peer = _numba_or_reason() is not None
    progress("ptxas resources of the stdlib kernels")
    out = ["`ptxas -v` resources of every stdlib specialisation:", "", "```",
           _captured(resource_report, archs), "```"]
    try:
        report = importlib.import_module("benchmarks.sass_report")
    except ImportError:
        out += ["", "SASS instruction counts vs numba-cuda: benchmarks/sass_report.py is not "
                "in this checkout."]
    else:
        progress("SASS report")
        text = report.format_report(report.run("sm_90"), "sm_90")
        if no_peer:                     # drop the numba rows that only say it is missing
            text = "\n".join(line for line in text.splitlines()
                             if not re.match(r"\S+\s+numba\s", line))
        out += ["", f"SASS report (sm_90, pyptx{'' if no_peer else ' vs numba-cuda'}; "
                f"benchmarks/sass_report.py):", "", "```", text, "```"]
    try:
        gguf = importlib.import_module("bench_gguf")
    except ImportError:
        out += ["", "GGUF GEMV vs llama.cpp: benchmarks/bench_gguf.py is not in this checkout."]
    else:
        ggml = os.environ.get("GGML_SRC")
        progress("GGUF GEMV vs llama.cpp")
        out += ["", "GGUF GEMV hot loops vs llama.cpp's `mul_mat_vec_q` (benchmarks/bench_gguf.py; "
                "the llama.cpp column needs `GGML_SRC=<local ggml checkout>`"
                f"{', given' if ggml else ', not set in this run'}):", "", "```",
                _captured(gguf.sass_report, "sm_90", ggml), "```"]
    try:
        attn = importlib.import_module("bench_attention_sass")
    except ImportError:
        out += ["", "Attention vs llama.cpp: benchmarks/bench_attention_sass.py is not in this "
                "checkout."]
    else:
        progress("attention vs llama.cpp")
        out += ["", "Attention main loops vs llama.cpp's fattn-mma-f16 / fattn-vec "
                "(benchmarks/bench_attention_sass.py; the llama.cpp rows need `GGML_SRC`):", "",
                "```", attn.report("sm_90", os.environ.get("GGML_SRC")), "```"]
    try:
        hopper = importlib.import_module("bench_gemm_wgmma_sass")
    except ImportError:
        pass
    else:
        progress("Hopper GEMM vs CUTLASS")
        out += ["", "Hopper GEMM main loop vs CUTLASS (benchmarks/bench_gemm_wgmma_sass.py; the "
                "CUTLASS rows need `CUTLASS_SRC`):", "", "```",
                hopper.report(os.environ.get("CUTLASS_SRC")), "```"]
    return "\n".join(out)


def gpu(quick: bool) -> str:
    """Kernel time on a GPU: stdlib bandwidth / GEMM vs cuBLAS, launch overhead."""
    import pyptx
    if pyptx.device() != "gpu":
        from pyptx.runtime.launch import device_reason
        return f"No GPU here ({device_reason()}): nothing measured."
    from bench_gguf import gpu_report as gguf_report
    from bench_launch import main as launch_main
    from bench_stdlib import gpu_report
    saved = sys.argv
    sys.argv = ["bench_launch", "--launches", "2000" if quick else "20000"]
    progress("launch overhead")
    try:
        launch = _captured(launch_main)
    finally:
        sys.argv = saved
    repeat = 5 if quick else 20
    progress("stdlib kernels on the GPU")
    stdlib = _captured(gpu_report, repeat)
    progress("GGUF GEMV on the GPU")
    return "\n".join(["```", stdlib, _captured(gguf_report, repeat), launch, "```"])


def _stdlib_calls(quick: bool):
    """(label, call) for every public stdlib function at small shapes (the CPU executor runs them)."""
    import numpy as np
    import stdlib_kernels as S
    from stdlib_kernels.quant import quantize
    r = np.random.default_rng(0)

    def rn(*shape, dtype=np.float32):
        return r.standard_normal(shape).astype(dtype)
    n = 64 if quick else 128
    return [
        ("softmax 64x1024", lambda: S.softmax(rn(64, 1024))),
        ("rmsnorm 64x1024", lambda: S.rmsnorm(rn(64, 1024), rn(1024))),
        ("layernorm 64x1024", lambda: S.layernorm(rn(64, 1024), rn(1024), rn(1024))),
        (f"gemm tiled {n}^3", lambda: S.gemm(rn(n, n), rn(n, n), "tiled")),
        (f"gemm tensor_core {n}^3 f16",
         lambda: S.gemm(rn(n, n, dtype=np.float16), rn(n, n, dtype=np.float16), "tensor_core")),
        ("kv_scatter 8x128", lambda: S.kv_scatter(rn(8 * 128), rn(8, 64, 128), 5)),
        ("decode_attention 32q/8kv heads, 256 keys",
         lambda: S.decode_attention(rn(32, 128), rn(8, 256, 128), rn(8, 256, 128), 256)),
        ("flash_attention f16 4 heads x 128 x 64",
         lambda: S.flash_attention(rn(4, 128, 64, dtype=np.float16),
                                   rn(4, 128, 64, dtype=np.float16),
                                   rn(4, 128, 64, dtype=np.float16), causal=True)),
        ("rope 16 tokens x 8 heads x 128", lambda: S.rope(rn(16, 8, 128),
                                                         np.arange(16, dtype=np.int32))),
        ("swiglu 64x1024", lambda: S.swiglu(rn(64, 1024), rn(64, 1024))),
        ("gate_up_swiglu 4x512 -> 256", lambda: S.gate_up_swiglu(rn(4, 512), rn(256, 512),
                                                                rn(256, 512))),
        ("q4k_matmul 1x1024 -> 256 (dp4a)",
         lambda: S.q4k_matmul(rn(1, 1024), quantize(rn(256, 1024), "q4_k"), 256, path="dp4a")),
        ("q8_0_matmul 1x1024 -> 256 (f32)",
         lambda: S.q8_0_matmul(rn(1, 1024), quantize(rn(256, 1024), "q8_0"), 256, path="f32")),
    ]


def counters(quick: bool) -> str:
    """pyptx.profile() counters of every stdlib function on the CPU executor: the x-axis of a
    roofline (flops per DRAM byte), coalescing, bank conflicts, divergence."""
    os.environ["PYPTX_DEVICE"] = "cpu"
    import pyptx
    rows = []
    calls = _stdlib_calls(quick)
    for i, (label, call) in enumerate(calls, 1):
        progress(f"call {i}/{len(calls)}: {label}")
        with pyptx.profile() as prof:
            call()
        for rec in prof.launches:
            rows.append((label, rec.kernel, f"{rec.flops:,}", f"{32 * rec.global_sectors:,}",
                         f"{rec.arithmetic_intensity:.2f}", f"{rec.coalescing:.2f}",
                         rec.shared_bank_conflicts, f"{rec.branch_divergence:.3f}"))
    return "\n".join([
        "Counted by `pyptx.profile()` on the CPU executor (as the GPU counts: 32-byte sectors "
        "per warp request). Intensity = flops / DRAM bytes with no cache reuse, so a lower "
        "bound; no peer (numba-cuda's simulator has no counters). GPU time per kernel, the "
        "other roofline axis, needs `--gpu` on a machine with a GPU.", "",
        _table(("call", "kernel", "flops", "DRAM bytes", "flops/byte", "coalescing",
                "bank conflicts", "divergence"), rows)])


SECTIONS = {"compile": ("Compile latency", compile_latency),
            "stages": ("Compile stages and caches", stages),
            "executor": ("CPU executor", executor),
            "sass": ("Static code quality", sass),
            "counters": ("Stdlib kernels: profiler counters (CPU executor)", counters),
            "gpu": ("GPU kernels", gpu)}


if __name__ == "__main__":
    print(SECTIONS[sys.argv[1]][1]("--quick" in sys.argv[2:]))
