"""Where compile time goes, stage by stage, and the host-side costs that used to be timed in tests.

    python benchmarks/bench_stages.py [--repeat 15]

Prints (no pass/fail, timings on a shared machine are noisy):
  * frontend (`lower_kernel`), passes (`run_pipeline -O2`), PTX emission, per peer kernel, with
    emission also per 100 IR instructions, and the sum next to numba-cuda's `compile_ptx` for the
    same kernel (the peer; skipped when numba-cuda is not installed);
  * `pyptx.compile` answered by a Kernel's in-memory cache, and a new Kernel's compile answered
    by the disk cache (dependency key + reading and checksumming the entry);
  * host-side cost of one CPU launch (bind + check + flatten) with the executor replaced by a
    no-op, so only pyptx's own launch path is measured (there is no peer for this without a GPU:
    see bench_launch.py for the GPU comparison).
Stage times: medians of `--repeat` runs after one warm-up; per-call costs: best of 5 rounds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

os.environ["PYPTX_NO_CACHE"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_kernels import KERNELS, NUMBA_SIGS, NUMBA_SRC, PYPTX_SRC, load  # noqa: E402

import pyptx  # noqa: E402
from pyptx.compiler import resolve_param_types  # noqa: E402
from pyptx.frontend import lower_kernel  # noqa: E402
from pyptx.passes import run_pipeline  # noqa: E402
from pyptx.ptx import emit  # noqa: E402

ARCH = "sm_90"


def _median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def stages(py_func, repeat: int) -> dict:
    """Median ms of each stage; the passes and emission run on a freshly lowered IR each time."""
    types = resolve_param_types(py_func)
    out = {"frontend": _median_ms(lambda: lower_kernel(py_func, types, {}), repeat)}
    t_pass, t_emit, n_instr = [], [], 0
    for k in range(repeat + 1):
        fn = lower_kernel(py_func, types, {})
        t0 = time.perf_counter()
        run_pipeline(fn, opt_level=2, fma=True)
        t1 = time.perf_counter()
        emit(fn, ARCH)
        t2 = time.perf_counter()
        if k:                                   # the first round is the warm-up
            t_pass.append((t1 - t0) * 1e3)
            t_emit.append((t2 - t1) * 1e3)
        n_instr = sum(len(b.instrs) for b in fn.blocks)
    out["passes"] = statistics.median(t_pass)
    out["emit"] = statistics.median(t_emit)
    out["emit_per_100"] = out["emit"] / max(n_instr, 1) * 100
    out["n_instr"] = n_instr
    return out


def numba_ms(name: str, repeat: int) -> float | None:
    try:
        nmod = load(NUMBA_SRC, "bench_stages_numba")
        from numba import cuda
    except Exception as e:  # noqa: BLE001 - the peer is optional
        print(f"(numba-cuda unavailable: {e})")
        return None
    return _median_ms(lambda: cuda.compile_ptx(getattr(nmod, name), NUMBA_SIGS[name],
                                               cc=(9, 0)), max(3, repeat // 3))


def _best_us(fn, n: int, rounds: int = 5) -> float:
    """Best of `rounds` averages of `n` calls: the least disturbed by other load."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def cache_hit_us(py_func, n: int = 4000) -> float:
    k = pyptx.kernel(py_func)
    pyptx.compile(k, arch=ARCH)
    return _best_us(lambda: pyptx.compile(k, arch=ARCH), n)


def disk_hit_us(py_func, n: int = 300) -> float:
    """`pyptx.compile` of a new Kernel answered by the disk cache: the dependency key (source,
    globals, closure cells), reading the entry and checking its checksum."""
    import tempfile
    saved = {k: os.environ.get(k) for k in ("PYPTX_NO_CACHE", "PYPTX_CACHE_DIR")}
    os.environ.pop("PYPTX_NO_CACHE", None)
    os.environ["PYPTX_CACHE_DIR"] = tempfile.mkdtemp(prefix="pyptx_bench_cache_")
    try:
        pyptx.compile(pyptx.kernel(py_func), arch=ARCH)
        return _best_us(lambda: pyptx.compile(pyptx.kernel(py_func), arch=ARCH), n)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def launch_host_us(py_func, n: int = 2000) -> float | None:
    """Per-launch host cost on the CPU device with the executor replaced by a no-op."""
    from pyptx.runtime import launch as L
    if not hasattr(L, "_cpu_entry"):
        return None                             # the runtime's internals changed: skip
    os.environ["PYPTX_DEVICE"] = "cpu"
    L._cpu_entry[:] = [lambda *a, **kw: None]
    try:
        k = pyptx.kernel(py_func)
        rng = np.random.default_rng(0)
        x, y = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
        out = np.full(1000, np.nan, np.float32)
        k[4, 256](out, x, y, np.float32(2.0), 1000)
        return _best_us(lambda: k[4, 256](out, x, y, np.float32(2.0), 1000), n)
    finally:
        L._cpu_entry[:] = []
        if hasattr(L, "invalidate_plans"):
            L.invalidate_plans()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    pmod = load(PYPTX_SRC, "bench_stages_pyptx")
    print(f"{'kernel':14s} {'instrs':>6s} {'frontend':>9s} {'passes':>8s} {'emit':>7s} "
          f"{'emit/100':>9s} {'total':>7s} {'numba':>8s} {'ratio':>7s}   (ms)")
    for name in KERNELS:
        s = stages(getattr(pmod, name), args.repeat)
        total = s["frontend"] + s["passes"] + s["emit"]
        peer = numba_ms(name, args.repeat)
        peer_txt = f"{peer:8.1f} {peer / total:6.1f}x" if peer else f"{'-':>8s} {'-':>7s}"
        print(f"{name:14s} {s['n_instr']:6d} {s['frontend']:9.3f} {s['passes']:8.3f} "
              f"{s['emit']:7.3f} {s['emit_per_100']:9.3f} {total:7.3f} {peer_txt}")
    print(f"pyptx.compile answered by the in-memory cache: {cache_hit_us(pmod.saxpy):.2f} us")
    for name in KERNELS:
        print(f"pyptx.compile of a new Kernel answered by the disk cache, {name}: "
              f"{disk_hit_us(getattr(pmod, name)):.1f} us")
    host = launch_host_us(pmod.saxpy)
    if host is not None:
        print(f"CPU launch, host side only (bind+check+flatten, executor stubbed): {host:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
