"""Numba-CUDA host programs (streams, events, signatures, device arrays), written the way the
numba-cuda documentation and tests write them, with only the imports changed: `from pyptx
import cuda` and `from pyptx import float32, ...` (was `from numba import ...`).

Each `prog_*` runs its kernels and checks the result against numpy itself (assertions), so the
same file validates under Numba's CUDA simulator (test_host_programs.py rewrites the imports back
to numba when numba is installed) and under pyptx (CPU executor and the fake GPU driver).
"""
import math

import numpy as np

from pyptx import cuda
from pyptx import float32, int32, void

N = 200
TPB = 32


def blocks(n, tpb=TPB):
    return (n + tpb - 1) // tpb


# ---- kernels ----------------------------------------------------------------------------------

@cuda.jit("void(float32[::1], float32[::1], float32, float32[::1])")
def axpy_contig(x, y, a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit(["void(float32[:], float32[:], float32)", "void(float64[:], float64[:], float64)",
           "void(int64[:], int64[:], int64)"])
def scaled_copy(src, dst, factor):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i] * factor


@cuda.jit((int32[:], int32[:]))
def increment_by_one(a, b):
    i = cuda.grid(1)
    if i < a.size:
        b[i] = a[i] + 1


@cuda.jit(void(float32[:, :], float32[:]))
def row_sums(m, out):
    r = cuda.grid(1)
    if r < m.shape[0]:
        s = float32(0.0)
        for c in range(m.shape[1]):
            s += m[r, c]
        out[r] = s


@cuda.jit("float64(float64, float64)", device=True)
def hypot2(a, b):
    return a * a + b * b


@cuda.jit("void(f8[:], f8[:], f8[:])")
def norms(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sqrt(hypot2(x[i], y[i]))


@cuda.jit(fastmath=True)
def rsqrt_fast(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 1.0 / math.sqrt(x[i])


@cuda.jit
def claim_first(flag, winners):
    tid = cuda.grid(1)
    old = cuda.atomic.compare_and_swap(flag, 0, tid + 1)
    if old == 0:
        cuda.atomic.add(winners, 0, 1)


@cuda.jit
def claim_slots(slots, owner):
    tid = cuda.grid(1)
    if tid < owner.size:
        slot = tid % slots.size
        old = cuda.atomic.cas(slots, slot, -1, tid)
        owner[tid] = 1 if old == -1 else 0


@cuda.jit
def double_in_place(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2


@cuda.jit
def square_all(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * x[i]


@cuda.jit
def fill_value(out, v):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = v


@cuda.jit
def reverse_block(x):
    buf = cuda.shared.array(0, dtype=float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * cuda.blockDim.x
    buf[t] = x[base + t]
    cuda.syncthreads()
    x[base + t] = buf[cuda.blockDim.x - 1 - t]


# ---- host programs ----------------------------------------------------------------------------

def prog_streams_pipeline():
    """Chunks copied, computed and copied back on their own streams (the docs' pattern)."""
    rng = np.random.default_rng(1)
    x = rng.random(N).astype(np.float32)
    y = rng.random(N).astype(np.float32)
    out = np.zeros(N, np.float32)
    chunk = 64
    streams = [cuda.stream() for _ in range(0, N, chunk)]
    for k, s in enumerate(streams):
        lo, hi = k * chunk, min(N, (k + 1) * chunk)
        dx = cuda.to_device(x[lo:hi], stream=s)
        dy = cuda.to_device(y[lo:hi], stream=s)
        dout = cuda.device_array(hi - lo, dtype=np.float32, stream=s)
        axpy_contig[blocks(hi - lo), TPB, s](dx, dy, np.float32(2.0), dout)
        dout.copy_to_host(out[lo:hi], stream=s)
    for s in streams:
        s.synchronize()
    np.testing.assert_allclose(out, np.float32(2.0) * x + y, rtol=1e-6)


def prog_events_time_a_kernel():
    """Events around a launch; the elapsed time is a float (the simulator's is -1.0)."""
    stream = cuda.stream()
    start, end = cuda.event(), cuda.event()
    d = cuda.to_device(np.arange(N, dtype=np.float32), stream=stream)
    start.record(stream=stream)
    double_in_place[blocks(N), TPB, stream](d)
    end.record(stream=stream)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    np.testing.assert_array_equal(d.copy_to_host(stream=stream), np.arange(N) * 2)


def prog_auto_synchronize():
    stream = cuda.stream()
    with stream.auto_synchronize():
        d = cuda.to_device(np.ones(N, np.float64), stream)
        fill_value[blocks(N), TPB, stream](d, 4.5)
        host = d.copy_to_host(stream=stream)
    assert (host == 4.5).all()


def prog_dynamic_shared_memory_launch():
    """`k[grid, block, stream, shared_bytes]`."""
    x = np.arange(2 * 64, dtype=np.float32)
    d = cuda.to_device(x)
    reverse_block[2, 64, 0, 64 * 4](d)
    np.testing.assert_array_equal(d.copy_to_host(), x.reshape(2, 64)[:, ::-1].ravel())


def prog_signature_overloads():
    """One kernel, three signatures: each launch takes the one its arguments match."""
    for dtype, factor in ((np.float32, np.float32(0.5)), (np.float64, 0.25), (np.int64, 3)):
        src = np.arange(N, dtype=dtype)
        dst = np.zeros(N, dtype)
        scaled_copy[blocks(N), TPB](src, dst, factor)
        np.testing.assert_array_equal(dst, src * dtype(factor))


def prog_tuple_and_type_object_signatures():
    a = np.arange(N, dtype=np.int32)
    b = np.zeros(N, np.int32)
    increment_by_one[blocks(N), TPB](a, b)
    np.testing.assert_array_equal(b, a + 1)
    m = np.random.default_rng(2).random((40, 7)).astype(np.float32)
    out = np.zeros(40, np.float32)
    row_sums[blocks(40), TPB](m, out)
    np.testing.assert_allclose(out, m.sum(1), rtol=1e-5)


def prog_device_function_signature():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(N), rng.standard_normal(N)
    out = np.zeros(N)
    norms[blocks(N), TPB](x, y, out)
    np.testing.assert_allclose(out, np.hypot(x, y), rtol=1e-12)


def prog_fastmath():
    x = np.random.default_rng(4).random(N).astype(np.float32) + np.float32(0.1)
    out = np.zeros_like(x)
    rsqrt_fast[blocks(N), TPB](x, out)
    np.testing.assert_allclose(out, 1 / np.sqrt(x), rtol=1e-5)


def prog_compare_and_swap():
    flag = cuda.to_device(np.zeros(1, np.int32))
    winners = cuda.to_device(np.zeros(1, np.int32))
    claim_first[2, TPB](flag, winners)
    assert winners.copy_to_host()[0] == 1
    assert 1 <= flag.copy_to_host()[0] <= 2 * TPB
    slots = np.full(8, -1, np.int32)
    owner = np.zeros(50, np.int32)
    claim_slots[blocks(50), TPB](slots, owner)
    assert owner.sum() == 8 and sorted(slots % 8) == list(range(8))
    assert all(owner[t] == 1 for t in slots)


def prog_device_array_item_assignment():
    d = cuda.device_array(10, dtype=np.float64)
    d[:] = 0.0
    d[3] = 1.0
    d[5:8] = np.array([2.0, 3.0, 4.0])
    double_in_place[1, TPB](d)
    host = d.copy_to_host()
    np.testing.assert_array_equal(host, [0, 0, 0, 2, 0, 4, 6, 8, 0, 0])
    assert d[6] == 6.0


def prog_copy_to_device():
    host = np.linspace(0.0, 1.0, N)
    d = cuda.device_array_like(host)
    d.copy_to_device(host)
    square_all[blocks(N), TPB](d)
    e = cuda.device_array_like(d)
    e.copy_to_device(d)
    out = np.empty_like(host)
    e.copy_to_host(out)
    np.testing.assert_allclose(out, host * host)
    f = cuda.to_device(np.zeros_like(host), copy=True)
    cuda.to_device(host, to=f)
    np.testing.assert_array_equal(f.copy_to_host(), host)


def prog_forall():
    x = np.arange(N, dtype=np.float64)
    square_all.forall(N)(x)
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float64) ** 2)


def prog_pinned_and_mapped():
    stream = cuda.stream()
    p = cuda.pinned_array(N, dtype=np.float32)
    p[:] = np.arange(N)
    d = cuda.to_device(p, stream=stream)
    double_in_place[blocks(N), TPB, stream](d)
    d.copy_to_host(p, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(p, np.arange(N) * 2)
    m = cuda.mapped_array(N, dtype=np.int32)
    m[:] = 7
    double_in_place[blocks(N), TPB](m)
    cuda.synchronize()
    assert (m == 14).all()


def prog_default_stream_and_devices():
    d = cuda.device_array(N, dtype=np.float32)
    fill_value[blocks(N), TPB, cuda.default_stream()](d, np.float32(1.25))
    cuda.synchronize()
    assert (d.copy_to_host() == 1.25).all()
    cc = cuda.get_current_device().compute_capability
    assert len(cc) == 2 and cc >= (5, 0)


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("prog_")}
