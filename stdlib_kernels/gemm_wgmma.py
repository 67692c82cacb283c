"""Hopper GEMM: C (float32) = A @ B for float16 or bfloat16 A [m, k] and B [k, n] on TMA, mbarriers
and warpgroup MMA (sm_90a).

A block of 288 threads owns a 128 x 128 tile of C and walks K in steps of 64:

* warp 8 is the producer: one lane (`elect_one`) issues the TMA loads of each K step's A [128 x 64]
  tile (one box) and B [64 x 128] tile (two 64 x 64 boxes) into a ring of STAGES shared-memory
  stages, each guarded by a "full" mbarrier (the producer's arrive.expect_tx of the stage's bytes,
  completed by the copies' byte counts) and an "empty" one (an arrival of each of the 256
  consumer threads once their warpgroup's MMAs have read the stage);
* warps 0-3 and 4-7 are two consumer warpgroups; warpgroup g multiplies rows 64g .. 64g+63 of the
  tile: per K step four `wgmma m64n128k16` read A and B straight from shared memory through
  matrix descriptors, accumulating 64 f32 registers per thread.  A step's group is committed,
  then `wgmma_wait(1)` retires the previous step's and its stage is released, so one group is
  always queued behind the running one (with 1 stage the step retires at once: the producer is
  waiting for that very stage).

A and B rows of 64 halves are 128 bytes, so both are staged with the 128-byte swizzle (the tensor
maps' and the descriptors' modes agree; every stage starts at a multiple of 1024 bytes): A is
K-major (rows 128 bytes apart, 8-row groups 1024 bytes apart: SBO = 1024; the k16 steps advance the
start address by 32 bytes inside the swizzled row), B is MN-major (`trans_b`; rows of 64 n, 8-k
groups 1024 bytes apart: SBO = 1024; the second 64-column box 8192 bytes on: LBO = 8192; the k16
steps advance 16 rows = 2048 bytes).  The descriptors are built once and advanced by adding those
offsets >> 4 to their start-address field; the warpgroup index is broadcast (shfl_idx) so ptxas
keeps them in uniform registers, where wgmma reads them.  Stage phases: K step t uses stage t %
STAGES, whose full barrier completes its (t // STAGES)-th phase (parity (t // STAGES) & 1); the
producer refills a stage after its empty barrier completes the phase of the previous use.

The epilogue writes the accumulators by the wgmma D fragment layout (thread l of warp w of a
warpgroup holds rows 16w + l/4 and +8, columns 8i + 2(l%4), +1) with bounds checks; the TMA boxes'
out-of-bounds elements read as zeros, so ragged m, n, k take the same path as interior tiles.

TMA needs 16-byte global strides: `k % 8 == 0` and `n % 8 == 0` (16-bit elements) and 16-byte
aligned base addresses.  Otherwise `gemm_wgmma` falls back to the mma.sync kernel (gemm_tc.py).

The ring lives in dynamic shared memory (131136 bytes at STAGES = 4 on a GPU: above the 48 KiB
static limit), with no static shared memory before it, so it starts where the block's shared window
does (aligned beyond the 1024 bytes the swizzle needs; CUTLASS relies on the same).  The CPU
executor grants 48 KiB a block (as a GPU does without the opt-in), so launches on it use STAGES = 1
(the same kernel, every K step through one stage and both parities).
"""
from __future__ import annotations

import numpy as np

import pyptx
from pyptx import block_idx, f32, i32, thread_idx, u16

from . import _validate as V
from ._args import result
from .gemm_tc import _store2      # the epilogue's bounds-checked pair store, as gemm_tc's

BM, BN, BK = 128, 128, 64
THREADS = 288                        # two consumer warpgroups and the producer warp
CONSUMERS = 256
#: ring depth on a GPU, and on the CPU executor (whose blocks get 48 KiB of shared memory)
GPU_STAGES, CPU_STAGES = 4, 1
A_STAGE = BM * BK                    # halves per stage of A (16 KiB)
B_STAGE = BK * BN                    # halves per stage of B (two 64 x 64 boxes, 16 KiB)
B_BOX = BK * 64                      # halves in one B box (8 KiB)
STAGE_BYTES = 2 * (A_STAGE + B_STAGE)
#: descriptor byte offsets (module docstring)
ROW_GROUP = 1024                     # 8 rows of 128 bytes
B_BOX_BYTES = 2 * B_BOX


def shared_bytes(stages: int) -> int:
    """Dynamic shared memory of a launch: the tile ring, then 2·stages mbarriers."""
    return stages * STAGE_BYTES + 16 * stages


@pyptx.kernel(arch="sm_90a")
def gemm_wgmma_kernel(c: f32[:, :], amap: pyptx.tensormap, bmap: pyptx.tensormap, k: i32,
                      BF: pyptx.constexpr, STAGES: pyptx.constexpr):
    """c = a @ b from the tensor maps of a [m, k] (box 128 x 64) and b [k, n] (box 64 x 64),
    both 128-byte swizzled; BF: bf16 (else f16) bit patterns; STAGES: the ring depth."""
    ring = pyptx.shared.dynamic(u16)
    bars = pyptx.shared.dynamic(pyptx.u64)[STAGES * STAGE_BYTES // 8:]   # full[s], empty[s]
    tid = thread_idx.x
    warp = tid >> 5
    m0 = block_idx.y * BM
    n0 = block_idx.x * BN
    ntiles = (k + BK - 1) // BK
    b_base = STAGES * A_STAGE
    if tid == 0:
        for s in pyptx.static_range(STAGES):
            pyptx.mbarrier_init(bars, s, 1)
            pyptx.mbarrier_init(bars, STAGES + s, CONSUMERS)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if warp == 8:
        if pyptx.elect_one():             # one lane, which ptxas sees is one: no loop
            s = 0                             # stage of K step t, and the parity of its use
            ph = 0
            for t in range(ntiles):
                if t >= STAGES:               # the consumers released the stage's last use
                    pyptx.mbarrier_wait(bars, STAGES + s, ph ^ 1)
                pyptx.mbarrier_arrive_expect_tx(bars, s, STAGE_BYTES)
                k0 = t * BK
                pyptx.tma_load(ring, s * A_STAGE, amap, (m0, k0), bars, s)
                pyptx.tma_load(ring, b_base + s * B_STAGE, bmap, (k0, n0), bars, s)
                pyptx.tma_load(ring, b_base + s * B_STAGE + B_BOX, bmap, (k0, n0 + 64), bars, s)
                s += 1
                if s == STAGES:
                    s = 0
                    ph ^= 1
    else:
        wg = pyptx.shfl_idx(warp >> 2, 0)     # the same in every lane: ptxas keeps what
        # depends on it in uniform registers, where wgmma wants its descriptors.  These are
        # stage 0's first k16 slice; a stage, a k16 slice of A (32 bytes on in its swizzled
        # rows) and of B (16 rows of 128 bytes) are constant additions to the start-address
        # field (bytes >> 4), as CUTLASS advances its descriptors
        a_desc = pyptx.wgmma_desc(ring, wg * (64 * BK), swizzle=128, lbo=16, sbo=ROW_GROUP)
        b_desc = pyptx.wgmma_desc(ring, b_base, swizzle=128, lbo=B_BOX_BYTES, sbo=ROW_GROUP)
        acc = (0.0,) * 64
        s = 0
        ph = 0
        prev = 0
        for t in range(ntiles):
            pyptx.mbarrier_wait(bars, s, ph)
            pyptx.wgmma_fence()
            off = pyptx.u64(pyptx.u32(s) * (STAGE_BYTES // 32))   # A_STAGE = B_STAGE bytes >> 4
            for kk in pyptx.static_range(BK // 16):
                acc = pyptx.wgmma(a_desc + off + 2 * kk, b_desc + off + 128 * kk, acc,
                                  atype="bf16" if BF else "f16", trans_b=True)
            pyptx.wgmma_commit()
            if STAGES == 1:                   # the producer waits for this very stage
                pyptx.wgmma_wait(0)
                pyptx.mbarrier_arrive(bars, STAGES + s)
            else:                             # keep this step's group in flight, retire the
                pyptx.wgmma_wait(1)           # previous one and release its stage
                if t > 0:
                    pyptx.mbarrier_arrive(bars, STAGES + prev)
            prev = s
            s += 1
            if s == STAGES:
                s = 0
                ph ^= 1
        pyptx.wgmma_wait(0)
        lane = tid & 31
        row = m0 + wg * 64 + (warp & 3) * 16 + (lane >> 2)
        col = n0 + (lane & 3) * 2
        for i in pyptx.static_range(BN // 8):
            _store2(c, row, col + 8 * i, acc[4 * i], acc[4 * i + 1])
            _store2(c, row + 8, col + 8 * i, acc[4 * i + 2], acc[4 * i + 3])


def tma_ok(x) -> bool:
    """Can a tensor map describe this 2-D array of 16-bit elements?  Rows 16-byte multiples and a
    16-byte aligned start (the driver's cuTensorMapEncodeTiled rules)."""
    if x.shape[1] % 8:
        return False
    if V.is_device(x):      # the CPU executor's DeviceArrays keep a host copy (same offsets)
        ptr = x.device_pointer if x._host is None else x._host.ctypes.data
    else:
        ptr = x.ctypes.data
    return ptr % 16 == 0


def launch_arch() -> str | None:
    """The arch of the GPU a launch from here runs on, or None when it runs on the CPU executor
    (PYPTX_DEVICE=cpu or no GPU, a CPU-only scope, pyptx.sanitize)."""
    from pyptx.runtime import checking, launch, profile
    chk = checking.current()
    if (chk is not None and chk.sanitizing) or launch._scope.__dict__.get("cpu"):
        return None
    if launch.device() == "cpu":
        return None
    return profile.current_arch()


def hopper_launch() -> bool:
    """Does a launch from here run on a GPU the sm_90a kernel runs on (compute capability 9.0)?
    `gemm(variant="tensor_core")` picks this kernel then."""
    from pyptx.target import runs_on
    arch = launch_arch()
    return arch is not None and runs_on(gemm_wgmma_kernel.arch, arch)


def gemm_wgmma_bits(a, b, bf: bool, c, stages: int | None = None):
    """C = A @ B (float32, into `c`) for C-contiguous uint16 arrays of f16/bf16 bit patterns
    (numpy or DeviceArrays) whose tensor maps can be made (`tma_ok`); `stages`: the ring depth
    (default: GPU_STAGES on a GPU, CPU_STAGES on the CPU executor)."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return c
    gpu = launch_arch() is not None
    st = (GPU_STAGES if gpu else CPU_STAGES) if stages is None else stages
    if gpu:       # a tensor map for a GPU launch describes device memory: host inputs go there
        a = a if V.is_device(a) else pyptx.to_device(a)
        b = b if V.is_device(b) else pyptx.to_device(b)
    amap = pyptx.TensorMap(a, (BM, BK), swizzle=128)
    bmap = pyptx.TensorMap(b, (BK, 64), swizzle=128)
    grid = (V.ceil_div(n, BN), V.ceil_div(m, BM))
    gemm_wgmma_kernel[grid, THREADS](c, amap, bmap, k, bool(bf), st,
                                     shared_mem=shared_bytes(st))
    return c


def gemm_wgmma(a, b, out=None):
    """gemm(a, b, variant="wgmma"): float16 (or bfloat16) inputs, float32 result (in `out` when
    given).  Arrays a tensor map cannot describe (k or n not a multiple of 8, a start not 16-byte
    aligned) and empty products (k == 0) go to the mma.sync kernel."""
    from .gemm_tc import gemm_tc_bits, half_bits, same_place
    a16, abf = half_bits("gemm", "a", a, (2,))
    b16, bbf = half_bits("gemm", "b", b, (2,))
    if abf != bbf:
        raise TypeError(f"gemm: a and b must have the same dtype for variant='wgmma', got "
                        f"{a.dtype} and {b.dtype}")
    same_place("gemm", "b", b, a, "a")
    if a16.shape[1] != b16.shape[0]:
        raise ValueError(f"gemm: b must have {a16.shape[1]} rows (a's columns), got shape "
                         f"{tuple(b16.shape)}")
    arch = launch_arch()
    if arch is not None and not hopper_launch():
        raise ValueError(f"gemm: variant='wgmma' runs on compute capability 9.0 GPUs (sm_90a) "
                         f"and on the CPU executor, not on this GPU ({arch}); use "
                         f"variant='tensor_core'")
    c = result("gemm", out, (a16.shape[0], b16.shape[1]), np.float32, a)
    if a16.shape[1] == 0 or not (tma_ok(a16) and tma_ok(b16)):
        return gemm_tc_bits(a16, b16, abf, c)
    return gemm_wgmma_bits(a16, b16, abf, c)
