"""The Hopper FlashAttention (`flash_attention(..., variant="wgmma")`, TMA K/V ring + wgmma,
sm_90a) against a float64 reference, on the CPU executor (its 48 KiB blocks: the small
configuration, `flash_attention_wgmma.config(d, False)`) and on a fake sm_90 GPU (the executor
behind a fake driver granting Hopper's 227 KiB: the configuration a GPU runs); the automatic
choice of `variant="tensor_core"`, the fallbacks to mma.sync, the sanitizer, ptxas / SASS.

Error analysis (`wgmma_bound`, every accuracy assert).  It is `test_stdlib_flash_attention
.error_bound`'s (the mma.sync kernel's) with the logit error of this kernel's softmax:
  * S = Q Kᵀ by wgmma: each product of two f16/bf16 values is exact in f32; the f32 sum over d
    terms is bounded by γ(d)·|scale|·Σ_c|q_c k_jc| (γ = `_gamma`, as for mma.sync: the order of a
    tensor core's additions is unspecified, the bound does not depend on it);
  * the exponent is (s_j − m)·c with m the row's running maximum of raw scores and c =
    RN(scale·log2 e): c's rounding, the subtraction and the multiply are three relative errors
    of 2^-24 on (s_j − m), and each later rescale factor 2^((m_old − m_new)·c) carries the same
    three on (m_new − m_old); these telescope to at most (m_final − s_j), so η_j gains
    6·2^-24·(M_row − s_j) (M_row the row's maximum logit); ex2.approx (2 ulp, 2^-21 relative)
    applies once to p_j and once per rescale factor: (tiles + 1)·2^-21;
  * O·a and l·a are rounded in f32 once per tile: tiles·2^-24·(Σ p|v| + |o|);
  * softcap: the capped logit C·tanh(s/C) moves by at most the raw logit's error (|tanh'| <= 1),
    plus tanh's 1 ulp and the roundings of its argument's scale and of the products by
    C·log2 e: (2^-23 + 3·2^-24)·C;
  * the rest is unchanged: P rounded to the storage type for the P·V wgmma (u·Σ p|v| + u·|o|),
    the f32 P·V sum over n keys (γ(n)·Σ p|v|), the output rounded to the storage type (u·|o|),
    a logit error η_j moving o by p_j η_j |v_j − o|; times 2 for second-order terms.
Measured on the CPU executor: up to ~20 % of this bound (the f16/bf16 rounding terms dominate).
A wrong layout, stage, parity, mask or edge puts O(1)·max|v| errors somewhere: far outside it.
"""
from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import flash_attention_wgmma as fw

from test_stdlib_flash_attention import UNIT, _gamma

fa = importlib.import_module("stdlib_kernels.flash_attention")   # the package exports the function
rng = np.random.default_rng(90_90)
BF16 = ml_dtypes.bfloat16


def wgmma_bound(q, k, v, causal, scale=None, kind="f16", window=0, softcap=0.0, bkv=None):
    """(float64 reference, per-element bound on |out − reference|): the module docstring's
    analysis.  q [.., h, sq, d], k, v [.., hk, sk, d] (GQA by repeating K/V); bkv: the kernel's
    keys per tile (the number of rescales); rows that see no key: NaN reference."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    h, sq, d = q.shape[-3:]
    hk, skn = k.shape[-3], k.shape[-2]
    k = np.repeat(k, h // hk, axis=-3)
    v = np.repeat(v, h // hk, axis=-3)
    sc = 1 / np.sqrt(d) if scale is None else scale
    s = np.einsum("...qd,...kd->...qk", q, k) * sc
    eta = _gamma(d) * abs(sc) * np.einsum("...qd,...kd->...qk", np.abs(q), np.abs(k))
    if softcap:
        s = softcap * np.tanh(s / softcap)
        eta = eta + (2.0**-23 + 3 * 2.0**-24) * softcap
    p_pos = np.arange(sq)[:, None] + skn - sq          # query i's position; keys j
    j = np.arange(skn)[None, :]
    seen = np.ones((sq, skn), bool)
    if causal:
        seen &= j <= p_pos
    if window:
        seen &= j > p_pos - window
    s = np.where(seen, s, -np.inf)
    tiles = -(-skn // (bkv or 16))
    with np.errstate(invalid="ignore"):
        mx = s.max(-1, keepdims=True)
        eta = eta + 6 * 2.0**-24 * np.where(seen, mx - s, 0) + (tiles + 1) * 2.0**-21
        p = np.exp(s - mx)
        p = p / p.sum(-1, keepdims=True)
    o = p @ v
    pv = p @ np.abs(v)
    pe = (p * eta).reshape(-1, sq, skn)
    vf = v.reshape(-1, skn, d)
    of = o.reshape(-1, sq, d)
    shift = np.stack([np.einsum("qk,qkc->qc", pe[i], np.abs(vf[i][None] - of[i][:, None]))
                      for i in range(pe.shape[0])]).reshape(o.shape)
    u = UNIT[kind]
    bound = 2 * (u * (2 * np.abs(o) + pv) + _gamma(skn) * pv + shift
                 + tiles * 2.0**-24 * (pv + np.abs(o)))
    return o, bound


def check(out, q, k, v, causal, scale=None, window=0, softcap=0.0, bkv=None):
    """|out − reference| <= wgmma_bound; rows that see no key are exactly 0.  Returns the
    fraction of the bound used."""
    kind = "bf16" if q.dtype == BF16 else "f16"
    ref, bound = wgmma_bound(q, k, v, causal, scale, kind, window, softcap, bkv)
    o = np.asarray(out).astype(np.float64).reshape(ref.shape)
    assert out.dtype == q.dtype and out.shape == q.shape
    live = np.isfinite(ref).all(-1)
    assert not np.isnan(o).any()
    np.testing.assert_array_equal(o[~live], 0.0)
    used = np.abs(o[live] - ref[live]) / bound[live]
    assert used.max() <= 1, (f"error {np.abs(o[live] - ref[live]).max():.3g} exceeds the bound "
                             f"at {np.unravel_index(used.argmax(), used.shape)}")
    return used.max()


def _inputs(qs, kvs, dt, mag=1.0):
    return tuple((rng.standard_normal(s) * mag).astype(dt) for s in (qs, kvs, kvs))


class Launches:
    """Records which flash-attention kernels a call launched (wraps their module globals)."""

    def __init__(self, monkeypatch):
        self.names = []
        for mod, attr in ((fw, "flash_attention_wgmma_kernel"), (fa, "flash_attention_tc_kernel"),
                          (fa, "flash_attention_tc_wide_kernel")):
            monkeypatch.setattr(mod, attr, self._wrap(getattr(mod, attr)))

    def _wrap(self, k):
        names = self.names
        wrap = self._wrap

        class Spy:
            arch = k.arch

            def specialize(self, **constexprs):      # kv_kernel(kernel, REGS=...) and such
                return wrap(k.specialize(**constexprs))

            def __getitem__(self, cfg):
                launch = k[cfg]

                def call(*args, **kw):
                    names.append(k.name)
                    return launch(*args, **kw)
                return call
        return Spy()


WG = "flash_attention_wgmma_kernel"
TC = "flash_attention_tc_kernel"

# ---- the CPU executor (d = 64: 2 warpgroups, 32-key tiles; d = 128: 1, 16-key tiles; 2 stages) --

CASES = [  # (q shape, kv shape, causal, dtype)
    # 5 tiles through 2 stages: stage 0 filled with parities 0, 1, 0; every empty barrier waited
    ((2, 40, 64), (2, 150, 64), False, np.float16),
    # GQA, causal with seq_k - seq_q = 10: the block needs 4 tiles, its warpgroup 0 (rows
    # 0..63, keys up to 73) 3 of them: it only releases tile 3
    ((4, 100, 64), (2, 110, 64), True, np.float16),
    ((1, 70, 128), (1, 100, 128), True, BF16),                  # 7 tiles of 16
    ((2, 2, 33, 64), (2, 1, 33, 64), False, BF16),              # batch + GQA, one ragged tile
    ((1, 5, 128), (1, 97, 128), False, np.float16),
    ((2, 20, 128), (1, 90, 128), True, np.float16),
]


@pytest.mark.parametrize("qs, kvs, causal, dt", CASES)
def test_cpu_matches_float64_reference(cpu, monkeypatch, qs, kvs, causal, dt):
    spy = Launches(monkeypatch)
    q, k, v = _inputs(qs, kvs, dt)
    out = sk.flash_attention(q, k, v, causal=causal, variant="wgmma")
    check(out, q, k, v, causal, bkv=fw.config(qs[-1], False)[1])
    assert spy.names == [WG]


def test_rows_that_see_no_key_and_scale(cpu):
    """seq_q > seq_k, causal: the first rows see no key (exactly 0); two query blocks."""
    q, k, v = _inputs((1, 150, 64), (1, 40, 64), np.float16)
    out = sk.flash_attention(q, k, v, causal=True, scale=0.3, variant="wgmma")
    assert (out[0, :110] == 0).all()
    check(out, q, k, v, True, 0.3, bkv=32)


def test_negative_scale(cpu):
    """A negative scale is the softmax of -q (the caller flips q's sign bits)."""
    q, k, v = _inputs((1, 30, 64), (1, 70, 64), BF16)
    check(sk.flash_attention(q, k, v, scale=-0.2, variant="wgmma"), q, k, v, False, -0.2, bkv=32)


def test_every_output_written(cpu):
    """The launch on NaN-poisoned uint16 outputs (f16 NaN bits)."""
    q, k, v = _inputs((2, 45, 64), (1, 45, 64), np.float16)
    out = np.full(q.shape, 0x7E00, np.uint16)
    fw.flash_attention_wgmma_arrays("f16", *(x.view(np.uint16) for x in (q, k, v)), 2, True,
                                    np.float32(fa.LOG2E / 8), out)
    check(out.view(np.float16), q, k, v, True, bkv=32)


def test_released_tiles_are_refilled(cpu):
    """16-key tiles with two warpgroups (cfg): causal, the block's warpgroup 0 does not need the
    last 4 of its tiles, more than the 2 stages, so the producer refills stages that only
    warpgroup 0's releases free (without them the launch deadlocks)."""
    q, k, v = _inputs((1, 128, 64), (1, 140, 64), np.float16)
    out = np.full(q.shape, 0x7E00, np.uint16)
    fw.flash_attention_wgmma_arrays("f16", *(x.view(np.uint16) for x in (q, k, v)), 1, True,
                                    np.float32(fa.LOG2E / 8), out, cfg=(2, 16, 2))
    check(out.view(np.float16), q, k, v, True, bkv=16)


WINDOWED = [  # dtype, heads, kv heads, seq_q, seq_k, head_dim, causal, window, softcap
    (np.float16, 2, 1, 70, 150, 64, True, 40, 0.0),      # the block's tiles start at 1,
    # its warpgroup 1's at 3 (it only releases tiles 1 and 2)
    (BF16, 1, 1, 80, 130, 128, True, 33, 5.0),
    (np.float16, 1, 1, 100, 100, 64, False, 0, 2.0),
]


@pytest.mark.parametrize("dt, h, hk, sq, skn, d, causal, window, softcap", WINDOWED)
def test_window_and_softcap(cpu, dt, h, hk, sq, skn, d, causal, window, softcap):
    q, k, v = _inputs((h, sq, d), (hk, skn, d), dt)
    out = sk.flash_attention(q, k, v, causal, window=window or None, softcap=softcap or None,
                             variant="wgmma")
    check(out, q, k, v, causal, None, window, softcap, bkv=fw.config(d, False)[1])


def test_tiles_before_the_window_are_not_loaded(cpu):
    """NaN in keys before every row's window changes nothing (they are never loaded)."""
    q, k, v = _inputs((1, 64, 64), (1, 192, 64), np.float16)
    kn, vn = k.copy(), v.copy()
    kn[:, :64], vn[:, :64] = np.nan, np.nan     # keys 0..63: rows start at key 128 - 32 + 1
    out = sk.flash_attention(q, kn, vn, True, window=32, variant="wgmma")
    check(out, q, k, v, True, None, 32, bkv=32)


@pytest.mark.parametrize("dt, mag, scale", [(np.float16, 200.0, None), (BF16, 1.0, 1e10)])
def test_huge_logits(cpu, dt, mag, scale):
    """Logits of ~1e4..1e10: the softmax is one-hot (every row is v's row at its top logit); the
    exponent (s − m)·c is 0 at the top score however large m is (no bias rounding, no inf)."""
    q, k, v = _inputs((1, 40, 64), (1, 70, 64), dt, mag)
    v = rng.standard_normal((1, 70, 64)).astype(dt)
    out = sk.flash_attention(q, k, v, True, scale=scale, variant="wgmma")
    assert np.isfinite(out.astype(np.float32)).all()
    check(out, q, k, v, True, scale, bkv=32)


def test_sanitizer_finds_no_race_and_no_uninitialised_read(cpu):
    q, k, v = _inputs((1, 20, 64), (1, 100, 64), np.float16)
    with pyptx.sanitize():
        out = sk.flash_attention(q, k, v, causal=True, variant="wgmma")
    check(out, q, k, v, True, bkv=32)


# ---- a fake sm_90 GPU (2 warpgroups, 128-key tiles, 2 stages: what an H100 runs) ----------------

def test_hopper_auto_choice_every_stage_both_parities(hopper, monkeypatch):
    """variant='tensor_core' (the default) on compute capability 9.0 runs the Hopper kernel;
    seq_k = 1100: 9 tiles of 128 (the last 76 keys) through 4 stages, each filled with both
    parities; seq_q = 70: one block whose second warpgroup has 6 live rows; causal."""
    assert fw.config(64, True) == (2, 128, 4)
    spy = Launches(monkeypatch)
    q, k, v = _inputs((1, 70, 64), (1, 1100, 64), np.float16)
    dq, dk, dv = (pyptx.to_device(x) for x in (q, k, v))
    out = sk.flash_attention(dq, dk, dv, causal=True)
    assert isinstance(out, pyptx.DeviceArray)
    check(out.copy_to_host(), q, k, v, True, bkv=128)
    assert spy.names == [WG]


def test_hopper_head_dim_128_bf16(hopper, monkeypatch):
    """GQA, seq_k = 700: 6 tiles of 128 (the last 60 keys) through 3 stages (each with both
    parities), the producer warpgroup and the consumers re-sized by setmaxnreg (24 / 240)."""
    assert fw.config(128, True) == (2, 128, 3) and fw.regs(128, True) == 240
    spy = Launches(monkeypatch)
    q, k, v = _inputs((2, 20, 128), (1, 700, 128), BF16)
    out = sk.flash_attention(q, k, v)                   # numpy inputs: to the device and back
    check(out, q, k, v, False, bkv=fw.config(128, True)[1])
    assert spy.names == [WG]


def test_hopper_window_and_softcap(hopper):
    """The GPU configuration with a sliding window and a logit cap: two query blocks, the
    second starting its tiles at 3 (keys before every row's window are never loaded), its
    warpgroup 1 releasing the tiles before its own window."""
    q, k, v = _inputs((1, 200, 64), (1, 700, 64), np.float16)
    out = sk.flash_attention(q, k, v, True, window=150, softcap=30.0)
    check(out, q, k, v, True, None, 150, 30.0, bkv=128)
    assert [ln.entry for ln in hopper.launches] == [WG]


def test_mma_sync_on_sm80_on_the_cpu_and_when_sanitizing(ampere, monkeypatch):
    spy = Launches(monkeypatch)
    q, k, v = _inputs((1, 20, 64), (1, 20, 64), np.float16)
    check(sk.flash_attention(q, k, v), q, k, v, False)
    with pyptx.sanitize():                  # sanitized launches run on the CPU executor
        check(sk.flash_attention(q, k, v), q, k, v, False)
    assert spy.names == [TC, TC]


def test_cpu_default_keeps_mma_sync(cpu, monkeypatch):
    spy = Launches(monkeypatch)
    q, k, v = _inputs((1, 20, 64), (1, 20, 64), np.float16)
    check(sk.flash_attention(q, k, v), q, k, v, False)
    assert spy.names == [TC]


def test_wgmma_on_an_sm80_gpu_says_what_to_use(ampere):
    q = _inputs((1, 16, 64), (1, 16, 64), np.float16)[0]
    with pytest.raises(ValueError, match="variant='tensor_core'"):
        sk.flash_attention(q, q, q, variant="wgmma")


# ---- what the Hopper kernel does not take --------------------------------------------------------

def test_other_head_dims_and_misaligned_arrays_take_mma_sync(cpu, monkeypatch):
    spy = Launches(monkeypatch)
    q, k, v = _inputs((1, 20, 80), (1, 30, 80), np.float16)
    check(sk.flash_attention(q, k, v, variant="wgmma"), q, k, v, False)
    buf = rng.standard_normal(20 * 64 + 1).astype(np.float16)
    qm = buf[1:].reshape(1, 20, 64)         # 2 bytes past an aligned start
    k, v = _inputs((1, 30, 64), (1, 30, 64), np.float16)[1:]
    check(sk.flash_attention(qm, k, v, variant="wgmma"), qm, k, v, False)
    assert spy.names == [TC, TC]


def test_variant_errors(cpu):
    x32 = np.zeros((1, 8, 64), np.float32)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        sk.flash_attention(x32, x32, x32, variant="wgmma")
    with pytest.raises(ValueError, match="variant must be one of"):
        sk.flash_attention(x32, x32, x32, variant="hopper")


# ---- ptxas and SASS (sm_90a) ---------------------------------------------------------------------

@pytest.mark.parametrize("d", fw.HEAD_DIMS)
@pytest.mark.parametrize("gpu", [False, True], ids=["cpu_config", "gpu_config"])
def test_ptxas_sm90a_no_spills_hgmma_utmaldg_no_f64(d, gpu):
    nwg, bkv, st = fw.config(d, gpu)
    nregs = fw.regs(d, gpu)
    ck = pyptx.compile(fw.flash_attention_wgmma_kernel.specialize(REGS=nregs),
                       constexprs={"D": d, "NWG": nwg, "BKV": bkv, "STAGES": st,
                                   "causal": True, "bf": d == 128})
    assert ck.arch == "sm_90a" and ".target sm_90a" in ck.ptx
    res = ck.resources()
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    # the registers at entry; with setmaxnreg, the producer warpgroup's and the consumers'
    assert res["registers"] * fw.threads(nwg, nregs) <= 65536, res
    if nregs:
        assert 128 * fw.PRODUCER_REGS + nwg * 128 * nregs <= 65536
        assert f"setmaxnreg.inc.sync.aligned.u32 {nregs};" in ck.ptx
    from benchmarks.sass_count import is_f64
    from conftest import hopper_sass
    ins = hopper_sass(ck.ptx)
    ops = {i.base for i in ins}
    assert {"HGMMA", "UTMALDG", "SYNCS"} <= ops
    assert not any(is_f64(i) for i in ins)


# ---- a warp-dependent branch before a wgmma: legal, the warps meet at wgmma.fence ----------------

@pyptx.kernel(arch="sm_90a")
def _warp_dependent_branch_before_wgmma(out: pyptx.f32[:], x: pyptx.f32[:]):
    sa = pyptx.shared.array(64 * 64, pyptx.u16)
    sb = pyptx.shared.array(8 * 64, pyptx.u16)
    t = pyptx.thread_idx.x
    for i in range(t, 64 * 64, 128):
        sa[i] = 0
    for i in range(t, 8 * 64, 128):
        sb[i] = 0
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    v = x[t]
    y = v * 2.0 if v > 0.0 else 0.0          # `x if c else y` is a branch in the IR
    acc = (y, 0.0, 0.0, 0.0)
    pyptx.wgmma_fence()
    acc = pyptx.wgmma(pyptx.wgmma_desc(sa, 0), pyptx.wgmma_desc(sb, 0), acc, atype="f16")
    pyptx.wgmma_commit()
    pyptx.wgmma_wait(0)
    out[t] = acc[0]


def test_executor_runs_a_wgmma_after_a_warp_dependent_branch(cpu):
    x = np.ones(128, np.float32)
    x[:32] = -1.0                              # warp 0 takes the other side
    out = np.zeros(128, np.float32)
    _warp_dependent_branch_before_wgmma[1, 128](out, x)
    np.testing.assert_array_equal(out, np.where(x > 0, 2.0, 0.0))
