"""Each kernel of `kernels.py` (Numba spellings through `from pyptx import cuda`) and of its
pyptx-spelling copy runs on the CPU executor against a numpy reference, inputs random, outputs
poisoned first."""
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from . import kernels as numba_style
from .translate import to_pyptx

HERE = Path(__file__).parent
TPB = numba_style.TPB


@pytest.fixture(scope="module", params=["numba", "pyptx"])
def mod(request, tmp_path_factory):
    if request.param == "numba":
        return numba_style
    path = tmp_path_factory.mktemp("corpus") / "pyptx_style_kernels.py"
    path.write_text(to_pyptx((HERE / "kernels.py").read_text()))
    spec = importlib.util.spec_from_file_location("pyptx_style_kernels", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


def rng():
    return np.random.default_rng(2024)


def blocks(n, tpb=TPB):
    return (n + tpb - 1) // tpb


def poison(shape, dtype=np.float32):
    dt = np.dtype(dtype)
    return np.full(shape, np.nan if dt.kind in "fc" else -12345, dt)


def close(a, b, tol=2e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---- one check per kernel ---------------------------------------------------------------------

def check_vec_add(m):
    r = rng(); a, b = r.random(100, np.float32), r.random(100, np.float32)
    out = poison(100); m.vec_add[blocks(100), TPB](a, b, out)
    np.testing.assert_array_equal(out, a + b)


def check_saxpy(m):
    r = rng(); x, y = r.random(77, np.float32), r.random(77, np.float32)
    out = poison(77); m.saxpy[blocks(77), TPB](np.float32(1.5), x, y, out)
    close(out, np.float32(1.5) * x + y, 1e-6)


def check_scale_gridstride(m):
    x = rng().random(1000, np.float32); exp = x * np.float32(3)
    m.scale_gridstride[2, TPB](x, np.float32(3))
    np.testing.assert_array_equal(x, exp)


def check_mat_add(m):
    r = rng(); a, b = r.random((19, 23), np.float32), r.random((19, 23), np.float32)
    c = poison((19, 23)); m.mat_add[(2, 3), (16, 8)](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def check_block_sum(m):
    x = rng().random(300, np.float32); tot = np.zeros(1, np.float32)
    m.block_sum[blocks(300), TPB](x, tot)
    close(tot[0], x.sum(dtype=np.float64), 1e-5)


def check_warp_sum(m):
    x = rng().random(256, np.float32); tot = np.zeros(1, np.float32)
    m.warp_sum[8, 32](x, tot)
    close(tot[0], x.sum(dtype=np.float64), 1e-5)


def check_histogram_global(m):
    d = rng().integers(0, 1000, 500).astype(np.int32); h = np.zeros(16, np.int32)
    m.histogram_global[blocks(500), TPB](d, h)
    np.testing.assert_array_equal(h, np.bincount(d % 16, minlength=16))


def check_histogram_shared(m):
    d = rng().integers(0, 1000, 999).astype(np.int32); h = np.zeros(16, np.int32)
    m.histogram_shared[4, TPB](d, h)
    np.testing.assert_array_equal(h, np.bincount(d % 16, minlength=16))


def check_stencil_1d(m):
    x = rng().random(100, np.float32); out = poison(100)
    m.stencil_1d[blocks(100), TPB](x, out)
    p = np.r_[0, x, 0].astype(np.float32)
    close(out, 0.25 * p[:-2] + 0.5 * p[1:-1] + 0.25 * p[2:], 1e-6)


def check_jacobi_2d(m):
    u = rng().random((20, 30), np.float32); un = u.copy()
    m.jacobi_2d[(2, 4), (16, 8)](u, un)
    exp = u.copy()
    exp[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    close(un, exp, 1e-6)


def check_matmul_naive(m):
    r = rng(); a, b = r.random((20, 13), np.float32), r.random((13, 9), np.float32)
    c = poison((20, 9)); m.matmul_naive[(3, 2), (8, 8)](a, b, c)
    close(c, a @ b)


def check_matmul_shared(m):
    r = rng(); a, b = r.random((40, 37), np.float32), r.random((37, 21), np.float32)
    c = poison((40, 21)); m.matmul_shared[(3, 2), (16, 16)](a, b, c)
    close(c, a @ b)


def check_transpose(m):
    a = rng().random((45, 70), np.float32); out = poison((70, 45))
    m.transpose[(3, 2), (32, 32)](a, out)
    np.testing.assert_array_equal(out, a.T)


def check_mandelbrot(m):
    h, w, it = 16, 24, 40
    out = poison((h, w), np.int32)
    x0, y0, step = np.float32(-2.0), np.float32(-1.0), np.float32(0.125)
    m.mandelbrot[(3, 2), (8, 8)](out, x0, y0, step, it)
    exp = np.zeros((h, w), np.int32)
    for i in range(h):
        for j in range(w):
            c = complex(np.float32(x0 + np.float32(j) * step), np.float32(y0 + np.float32(i) * step))
            z, n = 0j, 0
            while n < it:
                z = z * z + c
                if z.real * z.real + z.imag * z.imag > 4.0:
                    break
                n += 1
            exp[i, j] = n
    assert (out == exp).mean() > 0.98 and (out >= 0).all()


def check_nbody_accel(m):
    r = rng(); n = 50
    pos = r.standard_normal((n, 3)).astype(np.float32)
    mass = r.random(n, np.float32) + np.float32(0.5)
    acc = poison((n, 3)); eps2 = np.float32(0.01)
    m.nbody_accel[blocks(n), TPB](pos, mass, acc, eps2)
    d = pos[None, :, :].astype(np.float64) - pos[:, None, :]
    r2 = (d ** 2).sum(-1) + 0.01
    exp = (mass[None, :, None] * d / (r2 * np.sqrt(r2))[..., None]).sum(1)
    close(acc, exp, 2e-4)


def check_warp_inclusive_scan(m):
    x = rng().integers(-50, 50, 96).astype(np.int32); out = poison(96, np.int32)
    m.warp_inclusive_scan[1, 96](x, out)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(3, 32), 1).ravel())


def check_block_scan(m):
    x = rng().integers(-50, 50, 96).astype(np.int32); out = poison(96, np.int32)
    m.block_scan[3, TPB](x, out)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(3, 32), 1).ravel())


def check_dot(m):
    r = rng(); a, b = r.random(500), r.random(500); res = np.zeros(1)
    m.dot[2, TPB](a, b, res)
    close(res[0], a @ b, 1e-12)


def check_nan_aware_max(m):
    x = rng().standard_normal(100).astype(np.float32); x[::7] = np.nan
    out = np.array([np.nan, np.nan], np.float32)
    m.nan_aware_max[blocks(100), TPB](x, out)
    assert out[0] == np.nanmax(x) and np.isnan(out[1])


def check_count_positive(m):
    x = rng().standard_normal(128).astype(np.float32); c = poison(4, np.int32)
    m.count_positive[4, TPB](x, c)
    np.testing.assert_array_equal(c, (x.reshape(4, 32) > 0).sum(1))


def check_compact_positive(m):
    x = rng().standard_normal(200).astype(np.float32)
    out = poison(200); n = np.zeros(1, np.int32)
    m.compact_positive[blocks(200), TPB](x, out, n)
    k = int(n[0])
    assert k == (x > 0).sum()
    np.testing.assert_array_equal(np.sort(out[:k]), np.sort(x[x > 0]))


def check_softmax_rows(m):
    x = rng().standard_normal((10, 7)).astype(np.float32); out = poison((10, 7))
    m.softmax_rows[1, TPB](x, out)
    e = np.exp(x - x.max(1, keepdims=True))
    close(out, e / e.sum(1, keepdims=True), 1e-6)


def check_bin_values(m):
    x = (rng().random(90, np.float32) * 10).astype(np.float32); bins = poison(90, np.int32)
    m.bin_values[blocks(90), TPB](x, np.float32(0.75), bins)
    np.testing.assert_array_equal(bins, np.trunc(x / np.float32(0.75)).astype(np.int32))


def check_ring_slots(m):
    slots = np.full(100, 77777, np.uint32); counter = np.zeros(1, np.uint32)
    m.ring_slots[blocks(100), TPB](slots, counter, np.uint32(9))
    assert sorted(slots.tolist()) == sorted([k % 10 for k in range(100)])
    assert counter[0] == 100 % 10


def check_black_scholes(m):
    r = rng(); n = 64
    s = (r.random(n) * 20 + 10).astype(np.float32); x = (r.random(n) * 20 + 10).astype(np.float32)
    t = (r.random(n) * 2 + 0.25).astype(np.float32)
    call, put = poison(n), poison(n)
    m.black_scholes[blocks(n), TPB](call, put, s, x, t, np.float32(0.02), np.float32(0.3))

    def cnd(d):
        k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
        poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
        ret = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
        return np.where(d > 0, 1.0 - ret, ret)
    S, X, T = s.astype(np.float64), x.astype(np.float64), t.astype(np.float64)
    d1 = (np.log(S / X) + (0.02 + 0.5 * 0.09) * T) / (0.3 * np.sqrt(T))
    d2 = d1 - 0.3 * np.sqrt(T)
    e = np.exp(-0.02 * T)
    close(call, S * cnd(d1) - X * e * cnd(d2), 2e-4)
    close(put, X * e * (1 - cnd(d2)) - S * (1 - cnd(d1)), 2e-4)


def check_monte_carlo_pi(m):
    seeds = rng().integers(0, 2**32, 64, dtype=np.uint32); hits = np.zeros(1, np.int32)
    m.monte_carlo_pi[2, TPB](hits, seeds, 50)
    exp = 0
    for sd in seeds.tolist():
        st = sd
        for _ in range(50):
            st = (st * 1664525 + 1013904223) & 0xFFFFFFFF
            xx = np.float32((st >> 8) * (1.0 / 16777216.0))
            st = (st * 1664525 + 1013904223) & 0xFFFFFFFF
            yy = np.float32((st >> 8) * (1.0 / 16777216.0))
            exp += (xx * xx + yy * yy) <= 1.0
    assert abs(int(hits[0]) - exp) <= 2 and abs(4 * hits[0] / 3200 - math.pi) < 0.15


def check_reverse_dynamic(m):
    x = rng().random(128, np.float32); exp = x.reshape(2, 64)[:, ::-1].ravel().copy()
    k = m.reverse_dynamic
    if hasattr(k, "__getitem__") and type(k).__name__ == "CudaKernel":
        k[2, 64, 0, 64 * 4](x)
    else:
        k[2, 64](x, shared_mem=64 * 4)
    np.testing.assert_array_equal(x, exp)


def check_life_step(m):
    b = (rng().random((20, 25)) < 0.4).astype(np.int32); nxt = poison((20, 25), np.int32)
    m.life_step[(3, 4), (8, 8)](b, nxt)
    nb = sum(np.roll(np.roll(b, di, 0), dj, 1) for di in (-1, 0, 1) for dj in (-1, 0, 1)
             if di or dj)
    np.testing.assert_array_equal(nxt, ((nb == 3) | ((nb == 2) & (b == 1))).astype(np.int32))


def check_rgb_to_gray(m):
    img = rng().random((17, 21, 3), np.float32); g = poison((17, 21))
    m.rgb_to_gray[(3, 3), (8, 8)](img, g)
    close(g, 0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2], 1e-6)


def check_horner(m):
    x = rng().standard_normal(50).astype(np.float32); out = poison(50)
    m.horner[blocks(50), TPB](x, out)
    c = numba_style.COEFFS
    close(out, ((c[0] * x + c[1]) * x + c[2]) * x + c[3], 1e-5)


def check_same_key_counts(m):
    keys = rng().integers(0, 5, 64).astype(np.int32); counts = poison(64, np.int32)
    m.same_key_counts[1, 64](keys, counts)
    for w in range(2):
        ks = keys[32 * w:32 * w + 32]
        for l in range(32):
            n = (ks == ks[l]).sum()
            first = np.flatnonzero(ks == ks[l])[0]
            assert counts[32 * w + l] == (n if first == l else -n)


def check_rotate_complex(m):
    r = rng(); z = (r.standard_normal(40) + 1j * r.standard_normal(40)).astype(np.complex64)
    th = r.random(40, np.float32); out = poison(40, np.complex64)
    m.rotate_complex[blocks(40), TPB](z, th, out)
    close(out, z * np.exp(-1j * th.astype(np.float64)), 1e-5)


def check_normalize_rows(m):
    x = rng().standard_normal((9, 5)).astype(np.float32); exp = x / np.linalg.norm(x, axis=1, keepdims=True)
    m.normalize_rows[1, TPB](x)
    close(x, exp, 1e-6)


def check_spend_budget(m):
    costs = rng().integers(1, 20, 64).astype(np.int32); budget = np.array([300], np.int32)
    granted = poison(64, np.int32)
    m.spend_budget[2, TPB](budget, costs, granted)
    assert budget[0] == 300 - costs.sum()
    assert granted.min() >= 0 and granted.sum() >= 1


def check_warp_all_any(m):
    x = rng().standard_normal(96).astype(np.float32)
    x[32:64] = np.abs(x[32:64]) + 1; x[64:] = -np.abs(x[64:]) - 1
    flags = poison(96, np.int32)
    m.warp_all_any[1, 96](x, flags)
    p = (x > 0).reshape(3, 32)
    exp = p.all(1) * 1 + p.any(1) * 2 + (p.all(1) | ~p.any(1)) * 4
    np.testing.assert_array_equal(flags, np.repeat(exp, 32))


def check_gamma_correct(m):
    img = rng().random(70, np.float32); out = poison(70)
    m.gamma_correct[blocks(70), TPB](img, out, 2.2)
    close(out, np.power(img.astype(np.float64), 1 / 2.2), 1e-6)


def check_int_powers(m):
    base = rng().integers(-6, 7, 50).astype(np.int64); exps = rng().integers(0, 21, 50)
    out = poison(50, np.int64)
    m.int_powers[blocks(50), TPB](base, exps, out)
    np.testing.assert_array_equal(out, base ** exps + 2 ** exps)


def check_column_sums(m):
    a = rng().standard_normal((13, 21)).astype(np.float32); out = poison(21)
    m.column_sums[1, TPB](a, out)
    close(out, a.sum(0, dtype=np.float64), 1e-5)


def check_downsample2d(m):
    img = rng().standard_normal((11, 14)).astype(np.float32)
    want = img[::2, 1::2]; out = poison((8, 8))
    m.downsample2d[(1, 1), (8, 8)](img, out)
    np.testing.assert_array_equal(out[:want.shape[0], :want.shape[1]], want)
    assert np.isnan(out[want.shape[0]:]).all() and np.isnan(out[:, want.shape[1]:]).all()


def check_reverse_every_third(m):
    x = rng().standard_normal(50).astype(np.float32); out = poison(50)
    m.reverse_every_third[blocks(50), TPB](x, out)
    want = x[::-3]
    np.testing.assert_array_equal(out[:want.size], want)
    assert np.isnan(out[want.size:]).all()


def check_fir_const(m):
    x = rng().standard_normal(90).astype(np.float32); out = poison(90)
    m.fir_const[blocks(90), TPB](x, out)
    taps = numba_style.FIR_TAPS.astype(np.float64)
    n = 90 - taps.size + 1
    close(out[:n], np.convolve(x.astype(np.float64), taps[::-1], "valid"), 1e-5)
    assert np.isnan(out[n:]).all()


def check_ring_slots_u64(m):
    start, n_slots, n = 2**64 - 3, np.uint64(2**40 + 5), 200
    counter = np.array([start], np.uint64); slots = np.full(n, 0xBAD, np.uint64)
    m.ring_slots_u64[blocks(n), TPB](counter, n_slots, slots)
    seen, v = [], start
    for _ in range(n):                       # the sequential model of atomic.inc's wrap-around
        seen.append(v)
        v = 0 if v >= int(n_slots) - 1 else v + 1
    assert int(counter[0]) == v
    assert sorted(int(s) for s in slots) == sorted(seen)


def check_warp_sum_tuple(m):
    x = rng().random(256, np.float32); tot = np.zeros(1, np.float32)
    m.warp_sum_tuple[8, 32](x, tot)
    close(tot[0], x.sum(dtype=np.float64), 1e-5)


def check_weighted_taps(m):
    x = rng().standard_normal(70).astype(np.float32); out = poison(70)
    m.weighted_taps[blocks(70), TPB](x, out)
    c, b = numba_style.COEFFS, (1.0, 0.0, -1.0)
    n = 70 - 3 + 1
    exp = sum(c[k] * x[k:k + n].astype(np.float64) + b[k] for k in range(3))
    close(out[:n], exp, 1e-5)
    assert np.isnan(out[n:]).all()


def check_lut_lookup(m):
    levels = rng().integers(0, 1000, 100).astype(np.int32); out = poison(100)
    m.lut_lookup[blocks(100), TPB](levels, out)
    np.testing.assert_array_equal(out, numba_style.GAMMA_LUT[levels % 16])


def check_split_dynamic(m):
    x = rng().random(64, np.float32); out = poison(64)
    k = m.split_dynamic
    if type(k).__name__ == "CudaKernel":
        k[1, 64, 0, 2 * 64 * 4](x, out)
    else:
        k[1, 64](x, out, shared_mem=2 * 64 * 4)
    np.testing.assert_array_equal(out, x[::-1] + 2 * x)


CHECKS = {name[6:]: fn for name, fn in dict(globals()).items() if name.startswith("check_")}


def test_corpus_is_complete():
    kernels = {n for n, v in vars(numba_style).items() if type(v).__name__ == "CudaKernel"}
    assert kernels == set(CHECKS) and len(kernels) >= 30


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_kernel(mod, name):
    CHECKS[name](mod)
