"""The benchmark kernels, written once for pyptx and once for numba-cuda (the peer).

Both spellings compute the same thing: saxpy, a one-block-per-row softmax with shared-memory tree
reductions, and a 16x16 shared-memory tiled matmul.  `load(src, name)` imports a source string
from a real file so `inspect.getsource` works on its functions.
"""
from __future__ import annotations

import os
import textwrap

PYPTX_SRC = textwrap.dedent('''
    import pyptx
    from pyptx import f32, i32, thread_idx, block_idx, block_dim, syncthreads

    def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
        i = block_idx.x * block_dim.x + thread_idx.x
        if i < n:
            out[i] = a * x[i] + y[i]

    def softmax_rows(out: f32[:, :], x: f32[:, :], ncols: i32):
        row = block_idx.x
        tid = thread_idx.x
        buf = pyptx.shared.array(256, f32)
        m = -3.0e38
        j = tid
        while j < ncols:
            m = max(m, x[row, j])
            j += 256
        buf[tid] = m
        syncthreads()
        s = 128
        while s > 0:
            if tid < s:
                buf[tid] = max(buf[tid], buf[tid + s])
            syncthreads()
            s //= 2
        m = buf[0]
        syncthreads()
        acc = 0.0
        j = tid
        while j < ncols:
            acc += pyptx.math.exp(x[row, j] - m)
            j += 256
        buf[tid] = acc
        syncthreads()
        s = 128
        while s > 0:
            if tid < s:
                buf[tid] = buf[tid] + buf[tid + s]
            syncthreads()
            s //= 2
        total = buf[0]
        j = tid
        while j < ncols:
            out[row, j] = pyptx.math.exp(x[row, j] - m) / total
            j += 256

    def matmul_tiled(c: f32[:, :], a: f32[:, :], b: f32[:, :]):
        ta = pyptx.shared.array((16, 16), f32)
        tb = pyptx.shared.array((16, 16), f32)
        tx = thread_idx.x
        ty = thread_idx.y
        row = block_idx.y * 16 + ty
        col = block_idx.x * 16 + tx
        n = a.shape[1]
        acc = 0.0
        for t in range(0, (n + 15) // 16):
            k0 = t * 16
            ta[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < n else 0.0
            tb[ty, tx] = b[k0 + ty, col] if k0 + ty < n and col < b.shape[1] else 0.0
            syncthreads()
            for k in range(16):
                acc += ta[ty, k] * tb[k, tx]
            syncthreads()
        if row < c.shape[0] and col < c.shape[1]:
            c[row, col] = acc
''')

NUMBA_SRC = textwrap.dedent('''
    import math
    from numba import cuda, float32

    def saxpy(out, x, y, a, n):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if i < n:
            out[i] = a * x[i] + y[i]

    def softmax_rows(out, x, ncols):
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        buf = cuda.shared.array(256, float32)
        m = float32(-3.0e38)
        j = tid
        while j < ncols:
            m = max(m, x[row, j])
            j += 256
        buf[tid] = m
        cuda.syncthreads()
        s = 128
        while s > 0:
            if tid < s:
                buf[tid] = max(buf[tid], buf[tid + s])
            cuda.syncthreads()
            s //= 2
        m = buf[0]
        cuda.syncthreads()
        acc = float32(0.0)
        j = tid
        while j < ncols:
            acc += math.exp(x[row, j] - m)
            j += 256
        buf[tid] = acc
        cuda.syncthreads()
        s = 128
        while s > 0:
            if tid < s:
                buf[tid] = buf[tid] + buf[tid + s]
            cuda.syncthreads()
            s //= 2
        total = buf[0]
        j = tid
        while j < ncols:
            out[row, j] = math.exp(x[row, j] - m) / total
            j += 256

    def matmul_tiled(c, a, b):
        ta = cuda.shared.array((16, 16), float32)
        tb = cuda.shared.array((16, 16), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * 16 + ty
        col = cuda.blockIdx.x * 16 + tx
        n = a.shape[1]
        acc = float32(0.0)
        for t in range(0, (n + 15) // 16):
            k0 = t * 16
            ta[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < n else float32(0.0)
            tb[ty, tx] = b[k0 + ty, col] if k0 + ty < n and col < b.shape[1] else float32(0.0)
            cuda.syncthreads()
            for k in range(16):
                acc += ta[ty, k] * tb[k, tx]
            cuda.syncthreads()
        if row < c.shape[0] and col < c.shape[1]:
            c[row, col] = acc
''')

NUMBA_SIGS = {
    "saxpy": "void(float32[::1], float32[::1], float32[::1], float32, int32)",
    "softmax_rows": "void(float32[:, ::1], float32[:, ::1], int32)",
    "matmul_tiled": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])",
}
KERNELS = ("saxpy", "softmax_rows", "matmul_tiled")


def load(src: str, name: str):
    """Write the source to a file (so inspect.getsource works) and import it."""
    import importlib.util
    import tempfile
    d = tempfile.mkdtemp(prefix="pyptx_bench_")
    path = os.path.join(d, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


