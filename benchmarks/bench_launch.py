"""GPU launch overhead: µs per launch of a 4-argument kernel with device arrays, pyptx vs a peer.

    pip install -e '.[bench]'
    python benchmarks/bench_launch.py [--launches 20000]

Needs a CUDA GPU (prints why not and exits 0 otherwise).  The kernel (`out[i] = a * x[i] + b`
over 1024 elements, arguments: two device arrays and two scalars) is tiny, so the time per launch
is the host-side cost of binding, checking and packing arguments plus `cuLaunchKernel`.  The peer
is numba-cuda's `@cuda.jit` kernel on the same device arrays (CuPy's RawKernel is used instead
when CuPy is installed).  Both are timed as N back-to-back launches followed by one synchronise.
Target: <= 6 µs per pyptx launch.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import pyptx
from pyptx import f32, i32


@pyptx.kernel
def affine(out: f32[:], x: f32[:], a: f32, n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = a * x[i] + 1.0


def per_launch_us(launch, sync, n: int) -> float:
    for _ in range(100):
        launch()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def peer(x_host, n_el, n):
    try:
        import cupy as cp
        src = r'''extern "C" __global__ void affine(float* out, const float* x, float a, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a * x[i] + 1.0f; }'''
        k = cp.RawKernel(src, "affine")
        x = cp.asarray(x_host)
        out = cp.empty_like(x)
        return "cupy RawKernel", per_launch_us(
            lambda: k((4,), (256,), (out, x, np.float32(2.0), np.int32(n_el))),
            cp.cuda.Device().synchronize, n)
    except ImportError:
        pass
    from numba import cuda

    @cuda.jit
    def affine_nb(out, x, a, m):
        i = cuda.grid(1)
        if i < m:
            out[i] = a * x[i] + 1.0

    x = cuda.to_device(x_host)
    out = cuda.device_array_like(x_host)
    return "numba-cuda", per_launch_us(lambda: affine_nb[4, 256](out, x, np.float32(2.0), n_el),
                                       cuda.synchronize, n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=20000)
    args = ap.parse_args()
    os.environ.setdefault("PYPTX_DEVICE", "auto")
    if pyptx.device() != "gpu":
        from pyptx.runtime.launch import device_reason
        print(f"no GPU ({device_reason()}): launch overhead is only measured on a GPU")
        return 0
    from pyptx.runtime import driver
    n_el = 1024
    x_host = np.random.default_rng(0).standard_normal(n_el).astype(np.float32)
    x = pyptx.to_device(x_host)
    out = pyptx.to_device(np.zeros_like(x_host))
    launch = affine[4, 256]
    ours = per_launch_us(lambda: launch(out, x, 2.0, n_el), driver.synchronize, args.launches)
    np.testing.assert_allclose(out.copy_to_host(), 2.0 * x_host + 1.0, rtol=1e-6)
    name, theirs = peer(x_host, n_el, args.launches)
    print(f"pyptx: {ours:.2f} µs/launch   {name}: {theirs:.2f} µs/launch   "
          f"ratio {theirs / ours:.2f}   (target <= 6 µs: {'met' if ours <= 6 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
