"""`gemm(a, b, variant="wgmma")`: the Hopper GEMM (TMA ring + mbarriers + wgmma, sm_90a) against
numpy float64, on the CPU executor (its 48 KiB blocks: a 1-stage ring) and on a fake sm_90 GPU
(the executor behind a fake driver granting Hopper's 227 KiB: the 4-stage ring a GPU runs), the
automatic choice of `variant="tensor_core"`, the fallbacks, the sanitizer, and ptxas / SASS for
sm_90a.  Also `@pyptx.kernel(arch=...)`, the target pin the kernel uses.

Error analysis (every assert below): A and B hold f16 (11-bit significands) or bf16 (8-bit)
values, so each product a·b has at most 22 significant bits and is exact in f32 (and in the
float64 reference).  The only error is the f32 accumulation over k terms: whatever the order and
grouping of the additions, each is one f32 rounding of a partial sum bounded by Σ|a||b|, so
|C - C_exact| <= k·u·Σ_k |a_ik||b_kj| (first order, u = 2^-24 for round-to-nearest).  A tensor
core may truncate instead of round its partial sums (error up to 2u each), so the bound used is
2·k·u·Σ|a||b| + tiny, which the CPU executor (one rounding of an exact sum per wgmma) meets with
room to spare.  The float64 reference adds at most k·2^-53·Σ|a||b| (negligible).  A wrong
layout, stage, parity or edge puts O(1)·Σ|a||b| errors somewhere: far outside the bound.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import gemm_tc, gemm_wgmma as gw


U = 2.0 ** -24
rng = np.random.default_rng(90)


def _halves(shape, dt):
    return (rng.standard_normal(shape) * 0.5).astype(dt)


def _check(c, a, b):
    """c against the float64 product, within the module docstring's bound."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    bound = 2 * max(a.shape[1], 1) * U * (np.abs(a64) @ np.abs(b64)) + 1e-30
    assert c.dtype == np.float32 and c.shape == exact.shape
    err = np.abs(c.astype(np.float64) - exact)
    assert (err <= bound).all(), (err.max(), np.unravel_index(np.argmax(err - bound), err.shape))


class _Launches:
    """Records which stdlib GEMM kernels a call launched (wraps their launch configs)."""

    def __init__(self, monkeypatch):
        self.names = []
        for mod, attr in ((gw, "gemm_wgmma_kernel"), (gemm_tc, "gemm_tc_kernel")):
            k = getattr(mod, attr)
            monkeypatch.setattr(mod, attr, self._wrap(k))

    def _wrap(self, k):
        names = self.names

        class Spy:
            arch = k.arch

            def __getitem__(self, cfg):
                launch = k[cfg]

                def call(*args, **kw):
                    names.append(k.name)
                    return launch(*args, **kw)
                return call
        return Spy()


# ---- the CPU executor (1 stage) ------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_cpu_three_k_tiles_through_one_stage(cpu, monkeypatch, dt):
    """m = n = 128 (one block), k = 192: three K steps through the 1-stage ring, so the stage's
    full and empty barriers each complete phases of both parities."""
    spy = _Launches(monkeypatch)
    a, b = _halves((128, 192), dt), _halves((192, 128), dt)
    _check(sk.gemm(a, b, "wgmma"), a, b)
    assert spy.names == ["gemm_wgmma_kernel"]


def test_cpu_ragged_edges(cpu, monkeypatch):
    """m = 130 (a second block row with 2 live rows), n = 72 (half a B box live), k = 136 (the
    last K step 8 wide): TMA's zero fill covers every edge, the stores skip what is outside C."""
    spy = _Launches(monkeypatch)
    a, b = _halves((130, 136), np.float16), _halves((136, 72), np.float16)
    _check(sk.gemm(a, b, "wgmma"), a, b)
    assert spy.names == ["gemm_wgmma_kernel"]


def test_sanitizer_finds_no_race_and_no_uninitialised_read(cpu):
    a, b = _halves((64, 128), ml_dtypes.bfloat16), _halves((128, 40), ml_dtypes.bfloat16)
    with pyptx.sanitize():
        c = sk.gemm(a, b, "wgmma")
    _check(c, a, b)


@pytest.mark.parametrize("shape", [(20, 13, 24), (20, 24, 12), (16, 0, 8)],
                         ids=["k_odd", "n_not_8", "k_zero"])
def test_what_a_tensor_map_cannot_describe_goes_to_mma_sync(cpu, monkeypatch, shape):
    """Rows that are not 16-byte multiples (k or n % 8) and k == 0: the mma.sync kernel."""
    spy = _Launches(monkeypatch)
    m, k, n = shape
    a, b = _halves((m, k), np.float16), _halves((k, n), np.float16)
    _check(sk.gemm(a, b, "wgmma"), a, b)
    assert "gemm_wgmma_kernel" not in spy.names


@pytest.mark.parametrize("shape", [(0, 16, 8), (8, 16, 0)], ids=["m_zero", "n_zero"])
def test_an_empty_result_launches_nothing(cpu, monkeypatch, shape):
    spy = _Launches(monkeypatch)
    m, k, n = shape
    c = sk.gemm(np.ones((m, k), np.float16), np.ones((k, n), np.float16), "wgmma")
    assert c.shape == (m, n) and c.dtype == np.float32 and spy.names == []


def test_a_misaligned_start_goes_to_mma_sync(cpu, monkeypatch):
    spy = _Launches(monkeypatch)
    buf = _halves(16 * 24 + 1, np.float16)
    a = buf[1:].reshape(16, 24)             # 2 bytes past an aligned start
    b = _halves((24, 16), np.float16)
    _check(sk.gemm(a, b, "wgmma"), a, b)
    assert spy.names == ["gemm_tc_kernel"]


# ---- a fake sm_90 GPU (4 stages, as on an H100) --------------------------------------------------

def test_hopper_every_stage_both_parities_and_ragged_edges(hopper, monkeypatch):
    """k = 584: 10 K steps (the last 8 wide) through 4 stages: stages 0 and 1 are filled three
    times (parities 0, 1, 0) and 2, 3 twice, and the producer waits on every empty barrier;
    m = 70, n = 136: ragged in both (two block columns)."""
    spy = _Launches(monkeypatch)
    a, b = _halves((70, 584), np.float16), _halves((584, 136), np.float16)
    da, db = pyptx.to_device(a), pyptx.to_device(b)
    c = sk.gemm(da, db, "wgmma")
    assert isinstance(c, pyptx.DeviceArray)
    _check(c.copy_to_host(), a, b)
    assert spy.names == ["gemm_wgmma_kernel"]


def test_tensor_core_picks_wgmma_on_sm90(hopper, monkeypatch):
    spy = _Launches(monkeypatch)
    a, b = _halves((64, 64), ml_dtypes.bfloat16), _halves((64, 64), ml_dtypes.bfloat16)
    _check(sk.gemm(a, b, "tensor_core"), a, b)
    assert spy.names == ["gemm_wgmma_kernel"]


def test_tensor_core_keeps_mma_sync_on_sm80_and_on_the_cpu(ampere, monkeypatch):
    spy = _Launches(monkeypatch)
    a, b = _halves((32, 64), np.float16), _halves((64, 32), np.float16)
    _check(sk.gemm(a, b, "tensor_core"), a, b)
    with pyptx.sanitize():                  # sanitized launches run on the CPU executor
        _check(sk.gemm(a, b, "tensor_core"), a, b)
    assert spy.names == ["gemm_tc_kernel", "gemm_tc_kernel"]


def test_wgmma_on_an_sm80_gpu_says_what_to_use(ampere):
    a = _halves((16, 16), np.float16)
    with pytest.raises(ValueError, match="variant='tensor_core'"):
        sk.gemm(a, a, "wgmma")


# ---- ptxas and SASS (sm_90a) ---------------------------------------------------------------------

@pytest.mark.parametrize("bf", [False, True], ids=["f16", "bf16"])
@pytest.mark.parametrize("stages", [gw.CPU_STAGES, gw.GPU_STAGES])
def test_ptxas_sm90a_no_spills_hgmma_and_utmaldg(bf, stages):
    ck = pyptx.compile(gw.gemm_wgmma_kernel, constexprs={"BF": bf, "STAGES": stages})
    assert ck.arch == "sm_90a" and ".target sm_90a" in ck.ptx
    res = ck.resources()
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["registers"] * gw.THREADS <= 65536, res
    from pyptx.toolchain import assemble
    log = assemble(ck.ptx, "sm_90a", verbose=True)
    # ptxas kept the wgmma pipeline asynchronous: no serialisation (C7510) and no wait it had
    # to inject (C7517) — it would for an accumulator read before its group's wait
    assert "serialized" not in log and "C75" not in log, log
    from benchmarks.sass_count import is_f64
    from conftest import hopper_sass
    ins = hopper_sass(ck.ptx)
    ops = {i.base for i in ins}
    assert {"HGMMA", "UTMALDG", "SYNCS"} <= ops
    assert not any(is_f64(i) for i in ins)


# ---- @pyptx.kernel(arch=...) ---------------------------------------------------------------------

@pyptx.kernel(arch="sm_90a")
def _pinned(x: pyptx.f32[:]):
    x[0] = 1.0


def test_a_pinned_kernel_compiles_for_its_arch_unless_told_otherwise():
    assert pyptx.compile(_pinned).arch == "sm_90a"
    assert pyptx.compile(_pinned.specialize()).arch == "sm_90a"
    assert pyptx.compile(_pinned, arch="sm_80").arch == "sm_80"


def test_a_pinned_kernel_runs_its_ptx_on_the_cpu_executor(cpu):
    x = np.zeros(1, np.float32)
    _pinned[1, 1](x)
    assert x[0] == 1.0


def test_a_pinned_kernel_refuses_a_gpu_it_does_not_run_on(ampere):
    with pytest.raises(pyptx.LaunchError, match=r"compiled for sm_90a.*\(sm_80\)"):
        _pinned[1, 1](pyptx.to_device(np.zeros(1, np.float32)))


def test_a_pinned_kernel_runs_on_its_gpu(hopper):
    x = pyptx.to_device(np.zeros(1, np.float32))
    _pinned[1, 1](x)
    assert x.copy_to_host()[0] == 1.0


def test_arch_must_be_a_string():
    with pytest.raises(pyptx.CompileError, match="string like 'sm_90a'"):
        pyptx.kernel(arch=90)


@pytest.mark.parametrize("kernel_arch, device_arch, ok", [
    ("sm_90a", "sm_90", True), ("sm_90a", "sm_100", False), ("sm_90a", "sm_89", False),
    ("sm_80", "sm_90", True), ("sm_90", "sm_80", False), ("sm_90", "sm_90", True),
    ("sm_100f", "sm_103", True), ("sm_100f", "sm_120", False), ("sm_103f", "sm_100", False),
])
def test_runs_on(kernel_arch, device_arch, ok):
    from pyptx.target import runs_on
    assert runs_on(kernel_arch, device_arch) is ok


# ---- the SASS counting of benchmarks/bench_gemm_wgmma_sass.py (hand-made listing) ----------------

PRODUCER_CONSUMER = [
    "MOV R0, RZ",                                           # 0x00
    "IADD3 R1, R1, 0x1, RZ",                                # 0x10  main loop header
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2], R3",          # 0x20  spin-wait retry (nested)
    "@!P0 BRA 0x20",                                        # 0x30
    "WARPGROUP.ARRIVE",                                     # 0x40
    "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4].tnspB, R24",  # 0x50
    "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8].tnspB, R24",  # 0x60
    "@P1 BRA 0x10",                                         # 0x70  main loop back edge
    "IADD3 R5, R5, 0x1, RZ",                                # 0x80  producer loop header
    "ELECT P2, URZ, PT",                                    # 0x90  ptxas's ELECT wrapper
    "UTMALDG.2D [UR8], [UR4]",                              # 0xa0
    "@P2 BRA 0x90",                                         # 0xb0
    "@P3 BRA 0x80",                                         # 0xc0  producer back edge
    "EXIT"]                                                 # 0xd0


def test_sass_count_skips_spin_waits_and_elect_wrappers():
    from benchmarks.bench_gemm_wgmma_sass import count
    from benchmarks.sass_count import parse_sass
    from test_sass_report import _listing
    ins = parse_sass(_listing("k", PRODUCER_CONSUMER))["k"]
    row = count("k", ins, 90, "")
    assert row.main["insns"] == 5 and row.main["HGMMA"] == 2    # 0x10, 0x40..0x70
    assert row.main["WARPGROUP"] == 1 and row.main["SYNCS"] == 0
    assert row.producer["insns"] == 5 and row.producer["UTMALDG"] == 1   # 0x80..0xc0
    assert row.hgmma == 2 and row.utmaldg == 1 and not row.error


# ---- generated shapes (CPU executor) -------------------------------------------------------------

from hypothesis import given, settings, strategies as hs  # noqa: E402


@settings(max_examples=6, deadline=None, derandomize=True)
@given(m=hs.integers(1, 160), n8=hs.integers(1, 20), k8=hs.integers(1, 24),
       bf=hs.booleans(), seed=hs.integers(0, 2**32 - 1))
def test_generated_shapes_on_the_cpu_executor(m, n8, k8, bf, seed):
    """Any m, and n, k multiples of 8 (what a tensor map takes): up to 2 block rows, 2 block
    columns, 3 K steps, ragged everywhere."""
    import os
    old = os.environ.get("PYPTX_DEVICE")
    os.environ["PYPTX_DEVICE"] = "cpu"
    try:
        r = np.random.default_rng(seed)
        dt = ml_dtypes.bfloat16 if bf else np.float16
        a = (r.standard_normal((m, 8 * k8)) * 0.5).astype(dt)
        b = (r.standard_normal((8 * k8, 8 * n8)) * 0.5).astype(dt)
        _check(sk.gemm(a, b, "wgmma"), a, b)
    finally:
        if old is None:
            del os.environ["PYPTX_DEVICE"]
        else:
            os.environ["PYPTX_DEVICE"] = old
