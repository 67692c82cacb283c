"""CPU PTX executor speed: µs per launch for three kernels written as PTX text.

    python benchmarks/bench_executor.py            # the executor only
    python benchmarks/bench_executor.py --numba    # + numba-cuda's simulator on the same kernels

Kernels: saxpy over 16,384 threads; a 16-row x 256-column row softmax (one block per row,
shared-memory tree reductions with bar.sync); a 32x32 matmul with 16x16 shared-memory tiles.
(The lead will switch these to pyptx-compiled kernels once the whole pipeline is in.)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

if "--numba" in sys.argv:                  # must precede any numba import
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402

from pyptx.runtime.cpu import ArrayArg, launch  # noqa: E402

HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n"

SAXPY = HEADER + r"""
.visible .entry saxpy(.param .u64 out, .param .u64 x, .param .u64 y, .param .f32 a,
                      .param .s32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [x];
    ld.param.u64 %rd3, [y];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.global.f32 %f2, [%rd6];
    add.s64 %rd7, %rd3, %rd5;
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    add.s64 %rd8, %rd1, %rd5;
    st.global.f32 [%rd8], %f4;
DONE:
    ret;
}
"""

# one block of 256 threads per row; row length == blockDim.x
SOFTMAX = HEADER + r"""
.visible .entry softmax(.param .u64 out, .param .u64 x)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .f32 %f<12>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 red[1024];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, red;
    add.s32 %r7, %r6, %r5;
    // max
    st.shared.f32 [%r7], %f1;
    bar.sync 0;
    shr.u32 %r8, %r3, 1;
MAXLOOP:
    setp.ge.u32 %p1, %r1, %r8;
    @%p1 bra MAXSKIP;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r7, %r9;
    ld.shared.f32 %f2, [%r10];
    ld.shared.f32 %f3, [%r7];
    max.f32 %f3, %f3, %f2;
    st.shared.f32 [%r7], %f3;
MAXSKIP:
    bar.sync 0;
    shr.u32 %r8, %r8, 1;
    setp.ne.u32 %p2, %r8, 0;
    @%p2 bra MAXLOOP;
    ld.shared.f32 %f4, [red];
    bar.sync 0;
    // e = 2^((x - m) * log2 e)
    sub.rn.f32 %f5, %f1, %f4;
    mul.rn.f32 %f5, %f5, 0f3FB8AA3B;
    ex2.approx.f32 %f6, %f5;
    st.shared.f32 [%r7], %f6;
    bar.sync 0;
    shr.u32 %r8, %r3, 1;
SUMLOOP:
    setp.ge.u32 %p1, %r1, %r8;
    @%p1 bra SUMSKIP;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r7, %r9;
    ld.shared.f32 %f2, [%r10];
    ld.shared.f32 %f3, [%r7];
    add.rn.f32 %f3, %f3, %f2;
    st.shared.f32 [%r7], %f3;
SUMSKIP:
    bar.sync 0;
    shr.u32 %r8, %r8, 1;
    setp.ne.u32 %p2, %r8, 0;
    @%p2 bra SUMLOOP;
    ld.shared.f32 %f7, [red];
    div.rn.f32 %f8, %f6, %f7;
    add.s64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f8;
    ret;
}
"""

# C[n x n] = A @ B, 16x16 tiles, block (16, 16), grid (n/16, n/16)
MATMUL = HEADER + r"""
.visible .entry matmul(.param .u64 c, .param .u64 a, .param .u64 b, .param .s32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<32>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<12>;
    .shared .align 4 .b8 ta[1024];
    .shared .align 4 .b8 tb[1024];
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ctaid.y;
    mad.lo.s32 %r6, %r5, 16, %r3;          // row
    mad.lo.s32 %r7, %r4, 16, %r2;          // col
    mov.f32 %f1, 0f00000000;
    mad.lo.s32 %r8, %r3, 16, %r2;          // tile slot
    shl.b32 %r9, %r8, 2;
    mov.u32 %r10, ta;
    add.s32 %r11, %r10, %r9;
    mov.u32 %r12, tb;
    add.s32 %r13, %r12, %r9;
    mov.u32 %r14, 0;                       // k0
TILE:
    // ta[ty][tx] = A[row, k0 + tx];  tb[ty][tx] = B[k0 + ty, col]
    add.s32 %r15, %r14, %r2;
    mad.lo.s32 %r16, %r6, %r1, %r15;
    mul.wide.s32 %rd4, %r16, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.f32 %f2, [%rd5];
    st.shared.f32 [%r11], %f2;
    add.s32 %r17, %r14, %r3;
    mad.lo.s32 %r18, %r17, %r1, %r7;
    mul.wide.s32 %rd6, %r18, 4;
    add.s64 %rd7, %rd2, %rd6;
    ld.global.f32 %f3, [%rd7];
    st.shared.f32 [%r13], %f3;
    bar.sync 0;
    mov.u32 %r19, 0;
INNER:
    mad.lo.s32 %r20, %r3, 16, %r19;
    shl.b32 %r21, %r20, 2;
    add.s32 %r22, %r10, %r21;
    ld.shared.f32 %f4, [%r22];
    mad.lo.s32 %r23, %r19, 16, %r2;
    shl.b32 %r24, %r23, 2;
    add.s32 %r25, %r12, %r24;
    ld.shared.f32 %f5, [%r25];
    fma.rn.f32 %f1, %f4, %f5, %f1;
    add.s32 %r19, %r19, 1;
    setp.lt.u32 %p1, %r19, 16;
    @%p1 bra INNER;
    bar.sync 0;
    add.s32 %r14, %r14, 16;
    setp.lt.s32 %p2, %r14, %r1;
    @%p2 bra TILE;
    mad.lo.s32 %r26, %r6, %r1, %r7;
    mul.wide.s32 %rd8, %r26, 4;
    add.s64 %rd9, %rd3, %rd8;
    st.global.f32 [%rd9], %f1;
    ret;
}
"""


def _cases():
    rng = np.random.default_rng(0)
    n = 16384
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    o = np.zeros(n, np.float32)
    sx = rng.standard_normal((16, 256)).astype(np.float32)
    so = np.zeros_like(sx)
    m = 32
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    c = np.zeros((m, m), np.float32)
    return [
        ("saxpy 16384 threads", SAXPY, "saxpy", (n // 256, 1, 1), (256, 1, 1),
         [ArrayArg(o, True), ArrayArg(x), ArrayArg(y), 2.0, n],
         lambda: np.allclose(o, 2 * x + y)),
        ("softmax 16x256 (shared)", SOFTMAX, "softmax", (16, 1, 1), (256, 1, 1),
         [ArrayArg(so, True), ArrayArg(sx)],
         lambda: np.allclose(so, np.exp(sx - sx.max(1, keepdims=True))
                             / np.exp(sx - sx.max(1, keepdims=True)).sum(1, keepdims=True),
                             rtol=1e-5)),
        ("matmul 32x32, 16x16 tiles", MATMUL, "matmul", (2, 2, 1), (16, 16, 1),
         [ArrayArg(c, True), ArrayArg(a), ArrayArg(b), m],
         lambda: np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)),
    ], (x, y, sx, a, b)


def _time(fn, min_time=0.5):
    fn()                                   # parse/decode once (cached by PTX text)
    reps, t0 = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        dt = time.perf_counter() - t0
        if dt >= min_time and reps >= 3:
            return dt / reps


def _numba_times(data):
    """The same kernels on numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1), one launch each."""
    global cuda
    from numba import cuda, float32   # a module global: the simulator patches kernel globals

    @cuda.jit
    def saxpy(o, x, y, a, n):
        i = cuda.grid(1)
        if i < n:
            o[i] = a * x[i] + y[i]

    @cuda.jit
    def softmax(o, x):
        red = cuda.shared.array(256, float32)
        t = cuda.threadIdx.x
        r = cuda.blockIdx.x
        v = x[r, t]
        red[t] = v
        cuda.syncthreads()
        s = 128
        while s > 0:
            if t < s:
                red[t] = max(red[t], red[t + s])
            cuda.syncthreads()
            s //= 2
        m = red[0]
        cuda.syncthreads()
        e = np.float32(np.exp(v - m))
        red[t] = e
        cuda.syncthreads()
        s = 128
        while s > 0:
            if t < s:
                red[t] += red[t + s]
            cuda.syncthreads()
            s //= 2
        o[r, t] = e / red[0]

    @cuda.jit
    def matmul(c, a, b, n):
        ta = cuda.shared.array((16, 16), float32)
        tb = cuda.shared.array((16, 16), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * 16 + ty
        col = cuda.blockIdx.x * 16 + tx
        acc = float32(0)
        for k0 in range(0, n, 16):
            ta[ty, tx] = a[row, k0 + tx]
            tb[ty, tx] = b[k0 + ty, col]
            cuda.syncthreads()
            for k in range(16):
                acc += ta[ty, k] * tb[k, tx]
            cuda.syncthreads()
        c[row, col] = acc

    x, y, sx, a, b = data
    out = {}
    o = np.zeros_like(x)
    t = time.perf_counter()
    saxpy[64, 256](o, x, y, np.float32(2), len(x))
    out["saxpy"] = time.perf_counter() - t
    so = np.zeros_like(sx)
    t = time.perf_counter()
    softmax[16, 256](so, sx)
    out["softmax"] = time.perf_counter() - t
    c = np.zeros_like(a)
    t = time.perf_counter()
    matmul[(2, 2), (16, 16)](c, a, b, 32)
    out["matmul"] = time.perf_counter() - t
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numba", action="store_true", help="also time numba-cuda's simulator")
    args = ap.parse_args()
    cases, data = _cases()
    sim = _numba_times(data) if args.numba else {}
    for (label, ptx, entry, grid, block, argv, check), key in zip(
            cases, ("saxpy", "softmax", "matmul")):
        sec = _time(lambda: launch(ptx, entry, grid, block, argv))
        ok = check()
        line = f"{label:28s} {sec * 1e6:10.0f} us/launch  {'ok' if ok else 'WRONG RESULT'}"
        if key in sim:
            line += f"   numba sim {sim[key] * 1e6:12.0f} us  ({sim[key] / sec:,.0f}x)"
        print(line)


if __name__ == "__main__":
    main()
