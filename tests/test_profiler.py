"""pyptx.profile counters against values computed by hand from the GPU's counting rules:
32-byte sectors per warp request, 32 banks x 4 bytes (64-bit per half-warp, 128-bit per
quarter-warp), branch splits per warp, 1 flop per add/mul and 2 per fma."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx import f32, f64, i32

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.delenv("PYPTX_SANITIZE", raising=False)


@pyptx.kernel
def copy(out: f32[:], x: f32[:]):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    out[i] = x[i]


@pyptx.kernel
def strided_read(out: f32[:], x: f32[:], STRIDE: pyptx.constexpr):
    t = pyptx.thread_idx.x
    out[t] = x[t * STRIDE]


@pyptx.kernel
def shared_stride(out: f32[:], x: f32[:], STRIDE: pyptx.constexpr):
    s = pyptx.shared.array(1024, f32)
    t = pyptx.thread_idx.x
    s[t * STRIDE] = x[t]
    out[t] = s[t * STRIDE]


@pyptx.kernel
def shared_stride64(out: f64[:], x: f64[:], STRIDE: pyptx.constexpr):
    s = pyptx.shared.array(512, f64)
    t = pyptx.thread_idx.x
    s[t * STRIDE] = x[t]
    out[t] = s[t * STRIDE]


@pyptx.kernel
def split_at(out: f32[:], x: f32[:], LIMIT: pyptx.constexpr):
    t = pyptx.thread_idx.x
    if t < LIMIT:
        out[t] = x[t]


@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


def _profile(fn):
    with pyptx.profile() as prof:
        fn()
    assert len(prof.launches) == 1
    return prof.launches[0]


def test_coalesced_f32_copy_is_perfectly_coalesced():
    n = 1024
    x, out = rng.standard_normal(n).astype(np.float32), np.full(n, np.nan, np.float32)
    r = _profile(lambda: copy[n // 128, 128](out, x))
    np.testing.assert_array_equal(out, x)
    assert (r.kernel, r.grid, r.block) == ("copy", (8, 1, 1), (128, 1, 1))
    assert r.global_bytes == 2 * 4 * n                        # one load + one store per thread
    assert r.global_sectors == 2 * n * 4 // 32                # 4 sectors per warp request
    assert r.coalescing == 1.0
    assert r.instructions["ld.global"] == r.instructions["st.global"] == n // 32


def test_stride_32_f32_read_touches_32_sectors_per_warp_request():
    x = rng.standard_normal(32 * 64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    r = _profile(lambda: strided_read[1, 64](out, x, 32))
    np.testing.assert_array_equal(out, x[::32])
    # 2 warps: the load needs 32 sectors each, the contiguous store 4 each
    assert r.global_sectors == 2 * 32 + 2 * 4
    assert r.global_bytes == 2 * 64 * 4
    assert r.coalescing == pytest.approx(512 / (32 * 72))


def test_shared_stride_32_is_a_32_way_bank_conflict():
    x = rng.standard_normal(32).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    r = _profile(lambda: shared_stride[1, 32](out, x, 32))
    np.testing.assert_array_equal(out, x)
    assert r.shared_bank_conflicts == 2 * 31                 # the store and the load
    r1 = _profile(lambda: shared_stride[1, 32](out, x, 1))
    assert r1.shared_bank_conflicts == 0
    r2 = _profile(lambda: shared_stride[1, 32](out, x, 2))   # 2 lanes per bank, 2 words
    assert r2.shared_bank_conflicts == 2 * 1


def test_64_bit_shared_accesses_are_served_per_half_warp():
    x = rng.standard_normal(32)
    out = np.full(32, np.nan)
    assert _profile(lambda: shared_stride64[1, 32](out, x, 1)).shared_bank_conflicts == 0
    np.testing.assert_array_equal(out, x)
    # stride 16 doubles = 128 bytes: each half-warp's 16 lanes all hit banks 0-1 -> 16
    # wavefronts per half-warp, 15 extra each, for the store and the load
    r = _profile(lambda: shared_stride64[1, 32](out, x, 16))
    assert r.shared_bank_conflicts == 2 * 2 * 15


@pytest.mark.parametrize("limit, expected", [(32, 0.0), (48, 0.5), (64, 0.0), (16, 0.5)])
def test_branch_divergence_is_the_fraction_of_warp_branches_that_split(limit, expected):
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    r = _profile(lambda: split_at[1, 64](out, x, limit))
    np.testing.assert_array_equal(out[:limit], x[:limit])
    assert r.branches == 2                                    # one `if`, two warps
    assert r.branch_divergence == expected


def test_saxpy_does_two_flops_per_element():
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    r = _profile(lambda: saxpy[(n + 255) // 256, 256](out, x, y, np.float32(2.0), n))
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    assert r.flops == 2 * n
    assert r.global_bytes == 3 * 4 * n
    assert r.arithmetic_intensity == pytest.approx(2 * n / (32 * r.global_sectors))


def test_print_shows_a_table_and_nested_profiles_both_record():
    n = 256
    x, out = rng.standard_normal(n).astype(np.float32), np.full(n, np.nan, np.float32)
    with pyptx.profile() as outer:
        copy[2, 128](out, x)
        with pyptx.profile() as inner:
            strided_read[1, 8](out, x, 32)
    assert [r.kernel for r in outer.launches] == ["copy", "strided_read"]
    assert [r.kernel for r in inner.launches] == ["strided_read"]
    text = str(outer)
    assert text.splitlines()[0].split()[:3] == ["kernel", "grid", "block"]
    assert "coalescing" in text and "strided_read" in text and "ld.global" in text
    assert "gpu ms" not in text                               # no GPU launch recorded
    assert "no launches" in str(pyptx.runtime.profiler.Profile())


def test_profile_and_sanitize_together():
    x = rng.standard_normal(1024).astype(np.float32)
    out = np.full(1024, np.nan, np.float32)
    with pyptx.sanitize(), pyptx.profile() as prof:
        copy[8, 128](out, x)
    assert prof.launches[0].coalescing == 1.0


# ---- on a GPU (the fake driver): CUDA-event times, no counters --------------------------------

def test_profile_on_a_gpu_records_event_time_and_no_counters(monkeypatch):
    import gc

    from fake_driver import FakeDriver, hand_compiled
    from pyptx.runtime import driver
    from test_driver_fake import SCALE, scale, scale_body, use_compiled
    fd = FakeDriver()
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    try:
        use_compiled(monkeypatch, hand_compiled("scale", SCALE))
        fd.bodies["scale"] = scale_body
        x = rng.standard_normal(300).astype(np.float32)
        out = np.full_like(x, np.nan)
        with pyptx.profile() as prof:
            scale[2, 256](out, x, 2.0, 300)
        np.testing.assert_array_equal(out, x * np.float32(2.0))
        (r,) = prof.launches
        assert (r.kernel, r.device, r.grid, r.block) == ("scale", "gpu", (2, 1, 1), (256, 1, 1))
        assert r.gpu_ms is not None and r.gpu_ms > 0
        assert r.instructions is r.global_sectors is r.coalescing is r.flops is None
        records = [c for c in fd.calls if c[0] == "cuEventRecord"]
        launch_at = next(i for i, c in enumerate(fd.calls) if c[0] == "cuLaunchKernel")
        assert len(records) == 2
        assert fd.calls.index(records[0]) < launch_at < fd.calls.index(records[1])
        assert "gpu ms" in str(prof) and "coalescing" not in str(prof)
    finally:
        gc.collect()
        driver.set_driver(prev)


@pyptx.kernel
def copy4(out: f32[:], x: f32[:], OVERLAP: pyptx.constexpr):
    i = (pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x) * 4
    a, b, c, d = pyptx.vload(x, i, 4)
    pyptx.vstore(out, i - OVERLAP * 4 * pyptx.block_idx.x, (a, b, c, d))


def test_128_bit_vector_accesses_go_through_the_same_tracking():
    n = 1024
    x, out = rng.standard_normal(n).astype(np.float32), np.full(n, np.nan, np.float32)
    r = _profile(lambda: copy4[2, 128](out, x, 0))
    np.testing.assert_array_equal(out, x)
    assert r.global_bytes == 2 * 4 * n
    assert r.global_sectors == 2 * n * 4 // 32 and r.coalescing == 1.0
    assert r.instructions["ld.global"] == r.instructions["st.global"] == 256 // 32
    # block 1 shifted back by one vector overlaps block 0's last store: a cross-block race
    with pytest.raises(pyptx.SanitizerError) as ei:
        with pyptx.sanitize(race=True, init=False):
            copy4[2, 128](out, x, 1)
    assert ei.value.kind == "race" and ei.value.space == "global"
    assert ei.value.block != ei.value.other_block


def test_tensor_core_gemm_counts_2mnk_flops_from_its_mma_instructions():
    import stdlib_kernels as S
    m = n = k = 64                     # one 64 x 64 block tile, no masked tails
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    with pyptx.profile() as prof:
        c = S.gemm(a, b, "tensor_core")
    from test_stdlib_gemm_tc import assert_gemm_close
    assert_gemm_close(c, a, b)                  # the tensor-core GEMM's error bound
    (r,) = prof.launches
    assert r.instructions["tensor"] == m * n * k // (16 * 8 * 16)   # mma.m16n8k16 per warp
    assert r.flops == 2 * m * n * k
