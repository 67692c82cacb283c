"""CPU executor speed: pyptx kernels on the CPU PTX executor vs numba-cuda's CUDA simulator.

    pip install -e '.[bench]'
    python benchmarks/bench_executor.py [--no-numba]

The same three kernels as bench_compile.py (benchmarks/peer_kernels.py), launched on the same
inputs: saxpy over 16,384 threads; a 16-row x 256-column row softmax (one 256-thread block per
row, shared-memory tree reductions with barriers); a 32x32 matmul with 16x16 shared-memory tiles.
pyptx runs the PTX it compiled, on the CPU executor (compile and PTX parse are cached, as in any
repeated launch; we report the best of several launches).  numba's simulator runs each thread as
a Python thread; one launch each.  Both outputs are checked against numpy before timing counts.
Prints the ratio simulator / executor (target >= 100x on each).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"        # must precede any numba import
os.environ["PYPTX_DEVICE"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from peer_kernels import KERNELS, NUMBA_SRC, PYPTX_SRC, load  # noqa: E402


def cases(rng):
    """name -> (grid, block, make_args(), check(args))"""
    n = 16384
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    sm = (rng.standard_normal((16, 256)) * 4).astype(np.float32)
    a = rng.standard_normal((32, 32)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)

    def soft_ref(v):
        e = np.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return {
        "saxpy": ((n + 255) // 256, 256,
                  lambda: [np.full(n, np.nan, np.float32), x, y, np.float32(2.0), n],
                  lambda args: np.allclose(args[0], 2.0 * x + y, rtol=1e-6, atol=1e-6)),
        "softmax_rows": (16, 256,
                         lambda: [np.full((16, 256), np.nan, np.float32), sm, 256],
                         lambda args: np.allclose(args[0], soft_ref(sm), rtol=1e-5, atol=1e-7)),
        "matmul_tiled": ((2, 2), (16, 16),
                         lambda: [np.full((32, 32), np.nan, np.float32), a, b],
                         lambda args: np.allclose(args[0], a @ b, rtol=1e-4, atol=1e-4)),
    }


def time_pyptx(kernel, grid, block, make_args, check, repeat=7) -> float:
    args = make_args()
    kernel[grid, block](*args)                       # compile + parse + first run
    assert check(args), f"pyptx {kernel.name}: wrong result"
    best = float("inf")
    for _ in range(repeat):
        args = make_args()
        t0 = time.perf_counter()
        kernel[grid, block](*args)
        best = min(best, time.perf_counter() - t0)
    return best


def time_numba(fn, grid, block, make_args, check) -> float:
    from numba import cuda
    jitted = cuda.jit(fn)
    args = make_args()
    t0 = time.perf_counter()
    jitted[grid, block](*args)
    dt = time.perf_counter() - t0
    assert check(args), f"numba simulator {fn.__name__}: wrong result"
    return dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-numba", action="store_true", help="time the executor only")
    opts = ap.parse_args()
    import pyptx
    pmod = load(PYPTX_SRC, "bench_pyptx_kernels")
    nmod = None
    if not opts.no_numba:
        try:
            nmod = load(NUMBA_SRC, "bench_numba_kernels")
        except Exception as e:  # noqa: BLE001
            print(f"numba-cuda unavailable ({e}); install the 'bench' extra for ratios")
    rng = np.random.default_rng(0)
    print(f"{'kernel':14s} {'executor ms':>12s} {'simulator ms':>13s} {'ratio':>9s}")
    ok = True
    for name in KERNELS:
        grid, block, make_args, check = cases(rng)[name]
        p = time_pyptx(pyptx.kernel(getattr(pmod, name)), grid, block, make_args, check)
        if nmod is not None:
            s = time_numba(getattr(nmod, name), grid, block, make_args, check)
            ok &= s / p >= 100
            print(f"{name:14s} {p * 1e3:12.2f} {s * 1e3:13.0f} {s / p:8.0f}x")
        else:
            print(f"{name:14s} {p * 1e3:12.2f} {'-':>13s} {'-':>9s}")
    if nmod is not None:
        print("target (>= 100x on each) met" if ok else "target NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
