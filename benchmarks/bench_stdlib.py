"""stdlib_kernels benchmark.

    python benchmarks/bench_stdlib.py [--arch sm_90] [--repeat 20]

On a GPU (pyptx.device() == "gpu"): achieved DRAM bandwidth of softmax and RMSNorm (bytes read +
written once / time) and GFLOP/s of the tiled GEMM next to cuBLAS (through CuPy or PyTorch, if
installed), at Llama-style shapes (hidden 4096, vocab 32000, heads 32, head_dim 128).
Inputs live on the device (CuPy/PyTorch tensors, else pyptx.to_device) so no host copies are timed.

Without a GPU: the `ptxas -v` resources (registers, spills, shared and local bytes) of every kernel
specialisation in stdlib_kernels.catalog, for the given arch (default sm_80 and sm_90).  Exits 1 if
any kernel spills.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from importlib import import_module

import numpy as np

import pyptx
from stdlib_kernels.catalog import LLAMA, SPECIALISATIONS
from stdlib_kernels._rows import row_config
from stdlib_kernels._validate import ceil_div

# the submodules (the package re-binds their names to the public functions)
attention = import_module("stdlib_kernels.attention")
gemm_mod = import_module("stdlib_kernels.gemm")
norms = import_module("stdlib_kernels.norms")
softmax_mod = import_module("stdlib_kernels.softmax")


# ---- without a GPU: resource report ------------------------------------------------------------

def resource_report(archs) -> int:
    spilled = 0
    print(f"{'kernel':42s} {'arch':6s} {'regs':>5s} {'spill st/ld':>12s} {'shared':>7s} "
          f"{'local':>6s}")
    for spec in SPECIALISATIONS:
        for arch in archs:
            r = pyptx.compile(spec.kernel, arch=arch, constexprs=spec.constexprs).resources()
            spills = r["spill_stores"] + r["spill_loads"]
            spilled += spills > 0
            print(f"{spec.label:42s} {arch:6s} {r['registers']:5d} "
                  f"{r['spill_stores']:5d}/{r['spill_loads']:<6d} {r['shared_bytes']:7d} "
                  f"{r['local_bytes']:6d}{'  SPILLS' if spills else ''}")
    print("no spills" if not spilled else f"{spilled} specialisation(s) spill")
    return 1 if spilled else 0


# ---- on a GPU ------------------------------------------------------------------------------------

class Backend:
    """Device arrays, synchronisation and a cuBLAS matmul from CuPy or PyTorch when present."""

    def __init__(self):
        self.name, self.mod = "pyptx", None
        for name in ("cupy", "torch"):
            try:
                self.mod = __import__(name)
                self.name = name
                break
            except ImportError:
                continue

    def put(self, a: np.ndarray):
        if self.name == "cupy":
            return self.mod.asarray(a)
        if self.name == "torch":
            return self.mod.from_numpy(a).cuda()
        return pyptx.to_device(a)

    def empty(self, shape):
        return self.put(np.empty(shape, np.float32))

    def sync(self, probe):
        if self.name == "cupy":
            self.mod.cuda.Device().synchronize()
        elif self.name == "torch":
            self.mod.cuda.synchronize()
        else:
            probe.copy_to_host()         # a blocking copy orders after the launches

    def matmul(self, a, b):
        return a @ b if self.mod is not None else None


def timed(fn, sync, repeat: int) -> float:
    """Median seconds per call (one warm-up call, which also compiles)."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: tiled-GEMM shapes: a prefill projection and a square one
GEMM_SHAPES = ((512, LLAMA["hidden"], LLAMA["hidden"]), (2048, 2048, 2048))


def gpu_report(repeat: int) -> int:
    be = Backend()
    rng = np.random.default_rng(0)
    print(f"device: GPU, device arrays via {be.name}")
    rows, vocab, hidden = 64, LLAMA["vocab"], LLAMA["hidden"]

    x = be.put(rng.standard_normal((rows, vocab)).astype(np.float32))
    out = be.empty((rows, vocab))
    kind, cfg = softmax_mod.plan(vocab)
    assert kind == "block"
    t = timed(lambda: softmax_mod.softmax_block_kernel[rows, cfg.block](out, x, *cfg),
              lambda: be.sync(out), repeat)
    print(f"softmax  [{rows}x{vocab}]   {2 * rows * vocab * 4 / t / 1e9:8.1f} GB/s  "
          f"({t * 1e6:.1f} us)")

    x = be.put(rng.standard_normal((rows * 16, hidden)).astype(np.float32))
    w = be.put(rng.standard_normal(hidden).astype(np.float32))
    out = be.empty((rows * 16, hidden))
    cfg = row_config(hidden)
    t = timed(lambda: norms.rmsnorm_kernel[rows * 16, cfg.block](out, x, w, 1e-6, *cfg),
              lambda: be.sync(out), repeat)
    print(f"rmsnorm  [{rows * 16}x{hidden}]  {2 * rows * 16 * hidden * 4 / t / 1e9:8.1f} GB/s  "
          f"({t * 1e6:.1f} us)")

    for m, k, n in GEMM_SHAPES:
        a = be.put(rng.standard_normal((m, k)).astype(np.float32))
        b = be.put(rng.standard_normal((k, n)).astype(np.float32))
        c = be.empty((m, n))
        grid = (ceil_div(n, gemm_mod.TILE_N), ceil_div(m, gemm_mod.TILE_M))
        vec = gemm_mod.tiled_vec(k, n)
        t = timed(lambda: gemm_mod.gemm_tiled_kernel[grid, gemm_mod.TILED_THREADS](c, a, b, vec),
                  lambda: be.sync(c), repeat)
        line = f"gemm tiled {m}x{k}x{n}  {2 * m * k * n / t / 1e9:8.1f} GFLOP/s"
        if be.mod is not None:
            tb = timed(lambda: be.matmul(a, b), lambda: be.sync(c), repeat)
            line += f"   cuBLAS ({be.name}) {2 * m * k * n / tb / 1e9:8.1f} GFLOP/s"
        print(line)

    h, kv, hd = LLAMA["n_heads"], LLAMA["n_kv_heads"], LLAMA["head_dim"]
    seq = LLAMA["max_seq"] // 2
    q = be.put(rng.standard_normal((h, hd)).astype(np.float32))
    kc = be.put(rng.standard_normal((kv, LLAMA["max_seq"], hd)).astype(np.float32))
    vc = be.put(rng.standard_normal((kv, LLAMA["max_seq"], hd)).astype(np.float32))
    group = h // kv
    tile = attention._tile(ceil_div(hd, 32), group)
    splits = attention._auto_splits(seq, kv, tile)
    chunk = ceil_div(ceil_div(seq, splits), tile) * tile
    splits = ceil_div(seq, chunk)
    out = be.empty((h, hd))
    pml, pacc = be.empty((h, splits, 2)), be.empty((h, splits, hd))
    scale = np.float32(attention.LOG2E * hd ** -0.5)

    def decode():
        attention.decode_attention_kernel[(kv, splits), 32 * group](
            out, pml, pacc, q, kc, vc, seq, chunk, scale, ceil_div(hd, 32), tile, group,
            hd % 4 == 0, True)
        attention.decode_merge_kernel[ceil_div(h * hd, 128), 128](out, pml, pacc)
    t = timed(decode, lambda: be.sync(out), repeat)
    print(f"decode_attention split-K seq {seq}  {2 * kv * seq * hd * 4 / t / 1e9:8.1f} GB/s "
          f"of KV cache  ({t * 1e6:.1f} us)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", help="arch(s) for the resource report")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    if pyptx.device() == "gpu":
        return gpu_report(args.repeat)
    print("device: no GPU (CPU executor): ptxas -v resources per kernel")
    return resource_report(args.arch or ["sm_80", "sm_90"])


if __name__ == "__main__":
    sys.exit(main())
