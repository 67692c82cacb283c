"""A corpus of Numba-CUDA style kernels, written as a Numba user writes them (tutorial and
numba-cuda documentation style) with only the import changed to `from pyptx import cuda`.

`test_numba_corpus.py` runs each against numpy on the CPU executor, and runs a second copy
of this file with every `cuda.*` spelling rewritten to its pyptx spelling (the table in
docs/coming-from-numba.md), so both surfaces are exercised by the same kernels.
"""
import math

import numpy as np

from pyptx import cuda

TPB = 32                      # threads per block
TILE = (16, 16)               # shared tile shape (a module-level tuple of constants)
COEFFS = (0.5, -1.25, 2.0, 0.75)
NBINS = 16
FIR_TAPS = np.array([0.0625, 0.25, 0.375, 0.25, 0.0625, -0.125], dtype=np.float32)


@cuda.jit
def vec_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit("void(float32, float32[:], float32[:], float32[:])")
def saxpy(a, x, y, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def scale_gridstride(x, factor):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        x[i] *= factor


@cuda.jit
def mat_add(a, b, c):
    i, j = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        c[i, j] = a[i, j] + b[i, j]


@cuda.jit
def block_sum(x, total):
    buf = cuda.shared.array(TPB, dtype=np.float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        cuda.atomic.add(total, 0, buf[0])


@cuda.jit
def warp_sum(x, total):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(total, 0, v)


@cuda.jit
def histogram_global(data, hist):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i] % NBINS, 1)


@cuda.jit
def histogram_shared(data, hist):
    local_hist = cuda.shared.array(NBINS, dtype=np.int32)
    t = cuda.threadIdx.x
    if t < NBINS:
        local_hist[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local_hist, data[i] % NBINS, 1)
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local_hist[t])


@cuda.jit
def stencil_1d(x, out):
    sm = cuda.shared.array(TPB + 2, dtype=np.float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x + 1
    n = x.size
    sm[t] = x[i] if i < n else 0.0
    if cuda.threadIdx.x == 0:
        sm[0] = x[i - 1] if i > 0 else 0.0
    if cuda.threadIdx.x == TPB - 1:
        sm[TPB + 1] = x[i + 1] if i + 1 < n else 0.0
    cuda.syncthreads()
    if i < n:
        out[i] = 0.25 * sm[t - 1] + 0.5 * sm[t] + 0.25 * sm[t + 1]


@cuda.jit
def jacobi_2d(u, unew):
    i, j = cuda.grid(2)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        unew[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@cuda.jit
def matmul_naive(a, b, c):
    i, j = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@cuda.jit
def matmul_shared(a, b, c):
    sa = cuda.shared.array(TILE, dtype=np.float32)
    sb = cuda.shared.array(TILE, dtype=np.float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    acc = 0.0
    for t in range((a.shape[1] + TILE[0] - 1) // TILE[0]):
        sa[tx, ty] = 0.0
        sb[tx, ty] = 0.0
        if x < a.shape[0] and ty + t * TILE[0] < a.shape[1]:
            sa[tx, ty] = a[x, ty + t * TILE[0]]
        if y < b.shape[1] and tx + t * TILE[0] < b.shape[0]:
            sb[tx, ty] = b[tx + t * TILE[0], y]
        cuda.syncthreads()
        for k in range(TILE[0]):
            acc += sa[tx, k] * sb[k, ty]
        cuda.syncthreads()
    if x < c.shape[0] and y < c.shape[1]:
        c[x, y] = acc


@cuda.jit
def transpose(a, out):
    tile = cuda.shared.array((TPB, TPB + 1), dtype=np.float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    if y < a.shape[0] and x < a.shape[1]:
        tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    ox = cuda.blockIdx.y * TPB + tx
    oy = cuda.blockIdx.x * TPB + ty
    if oy < out.shape[0] and ox < out.shape[1]:
        out[oy, ox] = tile[tx, ty]


@cuda.jit(device=True)
def escape_count(c, max_iters):
    z = 0j
    for n in range(max_iters):
        z = z * z + c
        if z.real * z.real + z.imag * z.imag > 4.0:
            return n
    return max_iters


@cuda.jit
def mandelbrot(out, x0, y0, step, max_iters):
    j, i = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = escape_count(complex(x0 + j * step, y0 + i * step), max_iters)


@cuda.jit
def nbody_accel(pos, mass, acc, eps2):
    sh = cuda.shared.array((TPB, 3), dtype=np.float32)
    shm = cuda.shared.array(TPB, dtype=np.float32)
    i = cuda.grid(1)
    n = pos.shape[0]
    px = pos[i, 0] if i < n else 0.0
    py = pos[i, 1] if i < n else 0.0
    pz = pos[i, 2] if i < n else 0.0
    ax = 0.0
    ay = 0.0
    az = 0.0
    t = cuda.threadIdx.x
    for tile in range(0, n, TPB):
        j = tile + t
        for d in range(3):
            sh[t, d] = pos[j, d] if j < n else 0.0
        shm[t] = mass[j] if j < n else 0.0
        cuda.syncthreads()
        for k in range(TPB):
            dx = sh[k, 0] - px
            dy = sh[k, 1] - py
            dz = sh[k, 2] - pz
            r2 = dx * dx + dy * dy + dz * dz + eps2
            inv = 1.0 / (r2 * math.sqrt(r2))
            ax += shm[k] * dx * inv
            ay += shm[k] * dy * inv
            az += shm[k] * dz * inv
        cuda.syncthreads()
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@cuda.jit
def warp_inclusive_scan(x, out):
    i = cuda.grid(1)
    v = x[i]
    lane = cuda.laneid
    d = 1
    while d < 32:
        up = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if lane >= d:
            v += up
        d *= 2
    out[i] = v


@cuda.jit
def block_scan(x, out):
    buf = cuda.shared.array(TPB, dtype=np.int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    d = 1
    while d < TPB:
        v = buf[t - d] if t >= d else 0
        cuda.syncthreads()
        buf[t] += v
        cuda.syncthreads()
        d *= 2
    out[i] = buf[t]


@cuda.jit
def dot(a, b, result):
    acc = cuda.local.array(1, dtype=np.float64)
    acc[0] = 0.0
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        acc[0] += a[i] * b[i]
    cuda.atomic.add(result, 0, acc[0])


@cuda.jit
def nan_aware_max(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.nanmax(out, 0, x[i])
        cuda.atomic.max(out, 1, x[i])


@cuda.jit
def count_positive(x, counts):
    i = cuda.grid(1)
    c = cuda.syncthreads_count(x[i] > 0)
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = c


@cuda.jit
def compact_positive(x, out, n_out):
    i = cuda.grid(1)
    keep = i < x.size and x[i] > 0
    mask = cuda.ballot_sync(0xFFFFFFFF, keep)
    lane = cuda.laneid
    leader_base = 0
    if lane == 0:
        leader_base = cuda.atomic.add(n_out, 0, cuda.popc(mask))
    base = cuda.shfl_sync(0xFFFFFFFF, leader_base, 0)
    if keep:
        out[base + cuda.popc(mask & cuda.lanemask_lt())] = x[i]


@cuda.jit(device=True)
def row_max(r):
    m = r[0]
    for k in range(1, r.size):
        m = max(m, r[k])
    return m


@cuda.jit
def softmax_rows(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        row = x[i]
        m = row_max(row)
        s = 0.0
        for k in range(row.size):
            s += math.exp(row[k] - m)
        for k in range(row.size):
            out[i, k] = math.exp(row[k] - m) / s


@cuda.jit("int32(float32, float32)", device=True)
def bin_of(v, width):
    return v / width


@cuda.jit
def bin_values(x, width, bins):
    i = cuda.grid(1)
    if i < x.size:
        bins[i] = bin_of(x[i], width)


@cuda.jit
def ring_slots(slots, counter, cap):
    i = cuda.grid(1)
    if i < slots.size:
        slots[i] = cuda.atomic.inc(counter, 0, cap)


@cuda.jit(device=True)
def cnd(d):
    a1, a2, a3, a4, a5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    k = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    poly = k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5))))
    ret = 0.3989422804014327 * math.exp(-0.5 * d * d) * poly
    return 1.0 - ret if d > 0 else ret


@cuda.jit
def black_scholes(call, put, s, x, t, r, v):
    i = cuda.grid(1)
    if i < s.size:
        sqrt_t = math.sqrt(t[i])
        d1 = (math.log(s[i] / x[i]) + (r + 0.5 * v * v) * t[i]) / (v * sqrt_t)
        d2 = d1 - v * sqrt_t
        exp_rt = math.exp(-r * t[i])
        call[i] = s[i] * cnd(d1) - x[i] * exp_rt * cnd(d2)
        put[i] = x[i] * exp_rt * (1.0 - cnd(d2)) - s[i] * (1.0 - cnd(d1))


@cuda.jit
def monte_carlo_pi(hits, seeds, n_per_thread):
    i = cuda.grid(1)
    state = seeds[i]
    count = 0
    for _ in range(n_per_thread):
        state = state * np.uint32(1664525) + np.uint32(1013904223)
        x = (state >> 8) * (1.0 / 16777216.0)
        state = state * np.uint32(1664525) + np.uint32(1013904223)
        y = (state >> 8) * (1.0 / 16777216.0)
        if x * x + y * y <= 1.0:
            count += 1
    cuda.atomic.add(hits, 0, count)


@cuda.jit
def reverse_dynamic(x):
    buf = cuda.shared.array(0, dtype=np.float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    base = cuda.blockIdx.x * n
    buf[t] = x[base + t]
    cuda.syncthreads()
    x[base + t] = buf[n - 1 - t]


@cuda.jit
def life_step(board, nxt):
    i, j = cuda.grid(2)
    n, m = board.shape
    if i < n and j < m:
        alive = 0
        for di in range(-1, 2):
            for dj in range(-1, 2):
                if di != 0 or dj != 0:
                    alive += board[(i + di + n) % n, (j + dj + m) % m]
        nxt[i, j] = 1 if alive == 3 or (alive == 2 and board[i, j] == 1) else 0


@cuda.jit
def rgb_to_gray(img, gray):
    i, j = cuda.grid(2)
    if i < img.shape[0] and j < img.shape[1]:
        gray[i, j] = 0.299 * img[i, j, 0] + 0.587 * img[i, j, 1] + 0.114 * img[i, j, 2]


@cuda.jit
def horner(x, out):
    i = cuda.grid(1)
    if i < x.size:
        acc = COEFFS[0]
        for k in range(1, len(COEFFS)):
            acc = cuda.fma(acc, x[i], COEFFS[k])
        out[i] = acc


@cuda.jit
def same_key_counts(keys, counts):
    i = cuda.grid(1)
    peers = cuda.match_any_sync(cuda.activemask(), keys[i])
    counts[i] = cuda.popc(peers)
    leader = cuda.ffs(peers) - 1
    if leader != cuda.laneid:
        counts[i] = -counts[i]


@cuda.jit
def rotate_complex(z, theta, out):
    i = cuda.grid(1)
    if i < z.size:
        w = complex(math.cos(theta[i]), math.sin(theta[i]))
        out[i] = z[i] * w.conjugate()


@cuda.jit
def normalize_rows(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        row = x[i]
        s = 0.0
        for k in range(row.size):
            s += row[k] * row[k]
        inv = 1.0 / math.sqrt(s)
        for k in range(row.size):
            row[k] *= inv


@cuda.jit
def spend_budget(budget, costs, granted):
    i = cuda.grid(1)
    if i < costs.size:
        before = cuda.atomic.sub(budget, 0, costs[i])
        granted[i] = 1 if before >= costs[i] else 0


@cuda.jit
def warp_all_any(x, flags):
    i = cuda.grid(1)
    p = x[i] > 0
    a = cuda.all_sync(0xFFFFFFFF, p)
    b = cuda.any_sync(0xFFFFFFFF, p)
    e = cuda.eq_sync(0xFFFFFFFF, p)
    flags[i] = (1 if a else 0) + (2 if b else 0) + (4 if e else 0)


@cuda.jit
def gamma_correct(img, out, gamma):
    i = cuda.grid(1)
    if i < img.size:
        out[i] = math.pow(img[i], 1.0 / gamma)


@cuda.jit
def int_powers(base, exps, out):
    i = cuda.grid(1)
    if i < base.size:
        out[i] = base[i] ** exps[i] + 2 ** exps[i]


@cuda.jit
def column_sums(a, out):
    j = cuda.grid(1)
    if j < a.shape[1]:
        col = a[:, j]
        s = 0.0
        for i in range(col.shape[0]):
            s += col[i]
        out[j] = s


@cuda.jit
def downsample2d(img, out):
    i, j = cuda.grid(2)
    sub = img[::2, 1::2]
    if i < sub.shape[0] and j < sub.shape[1]:
        out[i, j] = sub[i, j]


@cuda.jit
def reverse_every_third(x, out):
    i = cuda.grid(1)
    picked = x[::-3]
    if i < picked.size:
        out[i] = picked[i]


@cuda.jit
def fir_const(x, out):
    taps = cuda.const.array_like(FIR_TAPS)
    i = cuda.grid(1)
    if i + taps.size <= x.size:
        s = 0.0
        for k in range(taps.size):
            s += taps[k] * x[i + k]
        out[i] = s


@cuda.jit
def ring_slots_u64(counter, n_slots, slot_of):
    i = cuda.grid(1)
    if i < slot_of.size:
        slot_of[i] = cuda.atomic.inc(counter, 0, n_slots - 1)


# ---- Numba parity II: tuple loops, module arrays, dynamic shared slices ------------------------

GAMMA_LUT = (np.arange(16, dtype=np.float32) / np.float32(15.0)) ** np.float32(2.2)


@cuda.jit
def warp_sum_tuple(x, total):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for offset in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
    if cuda.laneid == 0:
        cuda.atomic.add(total, 0, v)


@cuda.jit
def weighted_taps(x, out):
    i = cuda.grid(1)
    if i + 3 <= x.size:
        s = 0.0
        for k, (w, b) in enumerate(zip(COEFFS, (1.0, 0.0, -1.0))):
            s += w * x[i + k] + b
        out[i] = s


@cuda.jit
def lut_lookup(levels, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = GAMMA_LUT[levels[i] % GAMMA_LUT.size]


@cuda.jit
def split_dynamic(x, out):
    buf = cuda.shared.array(0, dtype=np.float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    a = buf[:n]
    b = buf[n:]
    a[t] = x[t]
    b[t] = 2.0 * x[t]
    cuda.syncthreads()
    out[t] = a[n - 1 - t] + b[t]
