"""GPU launch overhead: µs per launch of a 4-argument kernel with device arrays, pyptx vs a peer.

    pip install -e '.[bench]'
    python benchmarks/bench_launch.py [--launches 20000]
    python benchmarks/bench_launch.py --fake [--launches 20000]

`--fake` needs no GPU: it installs the test suite's fake driver (tests/fake_driver.py) and
reports pyptx's own host time per launch, i.e. the time of `k[grid, block](...)` minus the time
of calling the fake's cuLaunchKernel directly with the same arguments (the fake's own cost).
Measured for 4 device-resident arguments (2 DeviceArrays + 2 scalars; target <= 3 µs) and for
the same kernel with numpy arrays (copies in and out through the staging pool).

Without `--fake` it needs a CUDA GPU (prints why not and exits 0 otherwise).  The kernel
(`out[i] = a * x[i] + b` over 1024 elements, arguments: two device arrays and two scalars) is
tiny, so the time per launch is the host-side cost of binding, checking and packing arguments
plus `cuLaunchKernel`.  The peer is numba-cuda's `@cuda.jit` kernel on the same device arrays (CuPy's RawKernel is used instead
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


def per_launch_us(launch, sync, n: int, clock=time.perf_counter) -> float:
    for _ in range(100):
        launch()
    sync()
    t0 = clock()
    for _ in range(n):
        launch()
    sync()
    return (clock() - t0) / n * 1e6


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


def fake_main(n: int) -> int:
    """pyptx's host time per launch against the fake driver (no GPU needed)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from fake_driver import FakeDriver
    from pyptx.runtime import driver
    os.environ["PYPTX_DEVICE"] = "gpu"
    fake = FakeDriver(record=False, run_ptxas=False)
    driver.set_driver(fake)
    n_el = 1024
    x_host = np.random.default_rng(0).standard_normal(n_el).astype(np.float32)
    x = pyptx.to_device(x_host)
    out = pyptx.to_device(np.zeros_like(x_host))
    launch = affine[4, 256]
    launch(out, x, 2.0, n_el)
    ctx = driver.context()
    (fn,) = [f for (ptx, entry), f in ctx.functions.items()]
    import ctypes
    import struct
    buf = ctypes.create_string_buffer(struct.pack("<Qi4xQifi", out.device_pointer, n_el,
                                                  x.device_pointer, n_el, 2.0, n_el))
    offs = [0, 8, 16, 24, 28, 32]
    ptrs = (ctypes.c_void_p * 6)(*[ctypes.addressof(buf) + o for o in offs])
    addr = ctypes.addressof(ptrs)
    ctx.enter()                  # the direct calls below need the context current

    def direct():
        fake.cuLaunchKernel(fn.handle, 4, 1, 1, 256, 1, 1, 0, None, addr, 0)

    def sync():
        fake.run_pending()
    out_h = np.zeros_like(x_host)
    clock = time.thread_time     # CPU time of this thread: other processes' load does not count
    base = dev = host = float("inf")
    for _ in range(7):          # interleaved rounds, best of each: load on the machine cancels
        base = min(base, per_launch_us(direct, sync, n, clock))
        dev = min(dev, per_launch_us(lambda: launch(out, x, 2.0, n_el), sync, n, clock))
        host = min(host, per_launch_us(lambda: launch(out_h, x_host, 2.0, n_el), sync,
                                       max(n // 10, 100), clock))
    fake.record, fake.calls = True, []
    launch(out_h, x_host, 2.0, n_el)
    calls = {}
    for name, _args in fake.calls:
        calls[name] = calls.get(name, 0) + 1
    fake.record = False
    print(f"fake driver: cuLaunchKernel itself {base:.2f} µs")
    print("driver calls of one launch with numpy arguments: "
          + ", ".join(f"{k} x{v}" for k, v in sorted(calls.items())))
    print(f"pyptx host time per launch, 4 device-resident arguments: {dev - base:.2f} µs "
          f"(target <= 3 µs: {'met' if dev - base <= 3 else 'NOT met'})")
    print(f"pyptx host time per launch, 2 numpy arrays + 2 scalars (copies in/out): "
          f"{host - base:.2f} µs")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--fake", action="store_true",
                    help="measure pyptx's host time against the fake driver (no GPU needed)")
    ap.add_argument("--profile", action="store_true",
                    help="on a GPU: also print a cProfile of pyptx's launches (top 18 by own time)")
    args = ap.parse_args()
    if args.fake:
        return fake_main(args.launches)
    os.environ.setdefault("PYPTX_DEVICE", "auto")
    if pyptx.device() != "gpu":
        from pyptx.runtime.launch import device_reason
        print(f"no GPU ({device_reason()}): launch overhead is only measured on a GPU")
        return 0
    from pyptx.runtime import streams
    n_el = 1024
    x_host = np.random.default_rng(0).standard_normal(n_el).astype(np.float32)
    x = pyptx.to_device(x_host)
    out = pyptx.to_device(np.zeros_like(x_host))
    launch = affine[4, 256]
    ours = per_launch_us(lambda: launch(out, x, 2.0, n_el), streams.synchronize, args.launches)
    np.testing.assert_allclose(out.copy_to_host(), 2.0 * x_host + 1.0, rtol=1e-6)
    name, theirs = peer(x_host, n_el, args.launches)
    print(f"pyptx: {ours:.2f} µs/launch   {name}: {theirs:.2f} µs/launch   "
          f"ratio {theirs / ours:.2f}   (target <= 6 µs: {'met' if ours <= 6 else 'NOT met'})")
    floor = per_launch_us(direct_launch(out, x, n_el), streams.synchronize, args.launches)
    print(f"cuLaunchKernel through cuda.bindings with prepacked parameters: {floor:.2f} µs/launch "
          f"(the floor of any Python launcher on these bindings; pyptx adds {ours - floor:.2f} µs)")
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(per_launch_us, lambda: launch(out, x, 2.0, n_el), streams.synchronize,
                     args.launches)
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    return 0


def direct_launch(out, x, n_el: int):
    """A thunk calling cuda.bindings' cuLaunchKernel on affine's loaded function with a
    parameter block packed once (the layout of affine's .param list: out, its extent, x, its
    extent, a, n)."""
    import ctypes
    import struct
    from pyptx.runtime import driver
    ctx = driver.context()
    (fn,) = [f for (_ptx, entry), f in ctx.functions.items() if entry == "affine"]
    buf = ctypes.create_string_buffer(struct.pack("<Qi4xQifi", out.device_pointer, n_el,
                                                  x.device_pointer, n_el, 2.0, n_el))
    ptrs = (ctypes.c_void_p * 6)(*[ctypes.addressof(buf) + o for o in (0, 8, 16, 24, 28, 32)])
    addr = ctypes.addressof(ptrs)
    drv = ctx.drv
    ctx.enter()

    def direct():
        drv.cuLaunchKernel(fn.handle, 4, 1, 1, 256, 1, 1, 0, 0, addr, 0)
    direct.keep = (buf, ptrs)
    return direct


if __name__ == "__main__":
    sys.exit(main())
