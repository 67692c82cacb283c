"""float16 KV caches, paged_attention's split plan from the actual lengths, sliding windows and
logit soft-capping (decode_attention, paged_attention, flash_attention), against independent
float64 references: torch's scaled_dot_product_attention with an explicit boolean mask where it
applies, a numpy float64 implementation for softcap (SDPA has none).  For f16 K/V the rounding is
part of the reference: K/V are rounded to float16 first (exactly what the cache holds), then
everything is float64, so the bounds below measure the kernels' f32 arithmetic only.

Error bounds (about 10x the worst error measured over these cases, written next to the
asserts): the f32 kernels (decode, paged, flash f32) compute in f32 - q·k over head_dim FMAs,
fast exp2 (~2 ulp), the split merge - measured worst |err| = 1.6e-7·max|v| (7e-7 at
max|v| ~ 4), bound 1.6e-6·max|v|; the tensor-core flash kernels round P and the output to
float16 (2^-11 relative each), measured worst 1.4e-4·max|v| (~2^-12.8), bound 1.5e-3·max|v|.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import attention, paged
from test_capture_rules import fake  # noqa: F401 - the fake-GPU fixture, by import
from test_stdlib_refs import randn, rng

#: f32 kernels: |err| <= F32_BOUND · max|v| (measured worst 1.6e-7·max|v|; module docstring)
F32_BOUND = 1.6e-6
#: tensor-core kernels (P and the output rounded to f16): |err| <= TC_BOUND · max|v| (measured
#: worst 1.4e-4·max|v|)
TC_BOUND = 1.5e-3


def f16(x):
    """The float16 cache contents, as float64 for the reference."""
    return np.asarray(x).astype(np.float16).astype(np.float64)


def attend_ref(q, k, v, lo, hi, softcap=None, scale=None):
    """float64 softmax attention of one query row over keys [lo, hi) (numpy; softcap too)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = k[lo:hi] @ q * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    if s.size == 0:
        return np.zeros(v.shape[-1])
    p = np.exp(s - s.max())
    return p / p.sum() @ v[lo:hi]


def decode_ref(q, kc, vc, seq_len, window=None, softcap=None):
    n_heads, group = q.shape[0], q.shape[0] // kc.shape[0]
    lo = 0 if window is None else max(seq_len - window, 0)
    return np.stack([attend_ref(q[h], kc[h // group], vc[h // group], lo, seq_len, softcap)
                     for h in range(n_heads)])


def paged_ref(q, kp, vp, bt, sl, window=None, softcap=None):
    batch, n_heads, hd = q.shape
    ps, group = kp.shape[2], n_heads // kp.shape[1]
    out = np.zeros((batch, n_heads, hd))
    for b in range(batch):
        t = np.arange(sl[b])
        pg, row = bt[b, t // ps], t % ps
        lo = 0 if window is None else max(int(sl[b]) - window, 0)
        for h in range(n_heads):
            out[b, h] = attend_ref(q[b, h], kp[pg, h // group, row], vp[pg, h // group, row],
                                   lo, len(t), softcap)
    return out


def sdpa_ref(q, k, v, causal, window):
    """torch SDPA in float64 with an explicit mask: query i (position p = i + sk - sq) sees key
    j iff (not causal or j <= p) and (no window or j > p - window); GQA by repeating K/V."""
    q64, k64, v64 = (torch.from_numpy(np.asarray(a, np.float64)) for a in (q, k, v))
    sq, skk = q.shape[-2], k.shape[-2]
    g = q.shape[-3] // k.shape[-3]
    k64, v64 = k64.repeat_interleave(g, -3), v64.repeat_interleave(g, -3)
    p = torch.arange(sq)[:, None] + skk - sq
    j = torch.arange(skk)[None]
    mask = torch.ones(sq, skk, dtype=torch.bool)
    if causal:
        mask &= j <= p
    if window:
        mask &= j > p - window
    return torch.nn.functional.scaled_dot_product_attention(q64, k64, v64,
                                                            attn_mask=mask).numpy()


def softcap_ref(q, k, v, causal, window, softcap):
    """numpy float64 attention with the logit cap (per head, GQA), mask as sdpa_ref."""
    sq, skk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    g = q.shape[-3] // k.shape[-3]
    out = np.zeros(q.shape)
    for h in range(q.shape[-3]):
        for i in range(sq):
            p = i + skk - sq
            hi = p + 1 if causal else skk
            lo = max(p - window + 1, 0) if window else 0
            out[h, i] = attend_ref(q[h, i], k[h // g], v[h // g], lo, hi, softcap)
    return out


def bounded(got, want, bound):
    err = np.abs(np.asarray(got, np.float64) - want)
    assert (err <= bound).all(), f"error {err.max():.3g} past the bound {bound:.3g}"
    return err.max()


# ---- float16 caches ---------------------------------------------------------------------------

@pytest.mark.parametrize("hd,seq_len,splits", [(64, 70, None), (40, 45, 3), (12, 30, 2)])
def test_decode_attention_reads_float16_caches(hd, seq_len, splits):
    """hd 64, 40: 8 halves per 128-bit load; hd 12: element-wise staging."""
    r = rng(hd)
    kc, vc = randn(r, 2, 80, hd).astype(np.float16), randn(r, 2, 80, hd).astype(np.float16)
    q = randn(r, 4, hd, scale=2.0)
    got = sk.decode_attention(q, kc, vc, seq_len, splits)
    assert got.dtype == np.float32
    bounded(got, decode_ref(q, f16(kc), f16(vc), seq_len), F32_BOUND * np.abs(f16(vc)).max())


def test_kv_scatter_rounds_into_a_float16_cache():
    r = rng(1)
    kc = np.zeros((2, 5, 12), np.float16)
    src = randn(r, 24, scale=3.0)
    assert sk.kv_scatter(src, kc, 3) is kc
    np.testing.assert_array_equal(kc[:, 3].reshape(-1), src.astype(np.float16))   # nearest
    assert not kc[:, [0, 1, 2, 4]].any()


@pytest.mark.parametrize("hd", [16, 6])
def test_paged_kv_scatter_rounds_into_float16_pools(hd):
    r = rng(hd)
    kp, vp = np.zeros((4, 2, 8, hd), np.float16), np.zeros((4, 2, 8, hd), np.float16)
    k, v = randn(r, 3, 2, hd, scale=3.0), randn(r, 3, 2, hd, scale=3.0)
    slots = np.array([0, 9, 31], np.int32)
    sk.paged_kv_scatter(k, v, kp, vp, slots)
    for t, s in enumerate(slots):
        np.testing.assert_array_equal(kp[s // 8, :, s % 8], k[t].astype(np.float16))
        np.testing.assert_array_equal(vp[s // 8, :, s % 8], v[t].astype(np.float16))


def make_paged(r, hd, ps, lens, dtype=np.float16, n_kv=2, n_heads=4, num_pages=40):
    max_pages = -(-max(max(lens), 1) // ps) + 1
    kp = randn(r, num_pages, n_kv, ps, hd).astype(dtype)
    vp = randn(r, num_pages, n_kv, ps, hd).astype(dtype)
    bt = np.stack([r.permutation(num_pages)[:max_pages] for _ in lens]).astype(np.int32)
    q = randn(r, len(lens), n_heads, hd, scale=2.0)
    return q, kp, vp, bt, np.array(lens, np.int32)


@pytest.mark.parametrize("hd,ps,lens", [(64, 8, [13, 70]), (40, 32, [45, 0]), (12, 4, [30, 1])])
def test_paged_attention_reads_float16_pools(hd, ps, lens):
    r = rng(hd + ps)
    q, kp, vp, bt, sl = make_paged(r, hd, ps, lens)
    got = sk.paged_attention(q, kp, vp, bt, sl)
    bounded(got, paged_ref(q, f16(kp), f16(vp), bt, sl), F32_BOUND * np.abs(f16(vp)).max())


def test_kv_dtype_errors():
    r = rng(2)
    kc = randn(r, 2, 8, 16)
    with pytest.raises(TypeError, match="v_cache must have k_cache's dtype float32"):
        sk.decode_attention(randn(r, 4, 16), kc, kc.astype(np.float16), 4)
    with pytest.raises(TypeError, match="k_cache must be float32 or float16, got float64"):
        sk.decode_attention(randn(r, 4, 16), kc.astype(np.float64), kc, 4)
    with pytest.raises(TypeError, match="cache must be float32 or float16, got bfloat16"):
        import ml_dtypes
        sk.kv_scatter(randn(r, 32), kc.astype(ml_dtypes.bfloat16), 0)


# ---- the split plan from the actual lengths -----------------------------------------------------

def test_paged_split_plan_follows_the_longest_sequence(monkeypatch):
    """A 70-token sequence in a 4096-token table: splits planned over 70 tokens, not 4096."""
    seen = []
    real = paged._split_plan
    monkeypatch.setattr(paged, "_split_plan", lambda *a: seen.append(a[0]) or real(*a))
    r = rng(3)
    q, kp, vp, bt, sl = make_paged(r, 16, 32, [70, 9], np.float32, num_pages=260)
    bt = np.concatenate([bt, np.zeros((2, 128 - bt.shape[1]), np.int32)], 1)   # capacity 4096
    want = paged_ref(q, kp, vp, bt, sl)
    bounded(sk.paged_attention(q, kp, vp, bt, sl), want, F32_BOUND * np.abs(vp).max())
    assert seen[-1] == 70
    with pytest.raises(ValueError, match="seq_lens holds 70 > max_seq_len = 64"):
        sk.paged_attention(q, kp, vp, bt, sl, max_seq_len=64)
    with pytest.raises(ValueError, match=r"max_seq_len must be in \[0, 4096\]"):
        sk.paged_attention(q, kp, vp, bt, sl, max_seq_len=4097)
    # device-resident lengths are not read back: the hint, else the capacity
    sl_d = pyptx.to_device(sl)
    bounded(sk.paged_attention(q, kp, vp, bt, sl_d, max_seq_len=96), want,
            F32_BOUND * np.abs(vp).max())
    assert seen[-1] == 96
    bounded(sk.paged_attention(q, kp, vp, bt, sl_d), want, F32_BOUND * np.abs(vp).max())
    assert seen[-1] == 4096


# ---- sliding window and softcap -------------------------------------------------------------

@pytest.mark.parametrize("dtype,hd,seq_len,window,softcap,splits", [
    (np.float32, 64, 70, 20, None, None), (np.float32, 64, 90, 33, 5.0, 2),
    (np.float16, 64, 90, 50, 3.0, None), (np.float16, 12, 30, 7, None, 2),
    (np.float32, 16, 20, 64, None, None), (np.float32, 16, 40, 1, 2.0, 3)])
def test_decode_attention_window_and_softcap(dtype, hd, seq_len, window, softcap, splits):
    r = rng(seq_len + hd)
    kc, vc = randn(r, 2, 96, hd).astype(dtype), randn(r, 2, 96, hd).astype(dtype)
    q = randn(r, 4, hd, scale=2.0)
    got = sk.decode_attention(q, kc, vc, seq_len, splits, window=window, softcap=softcap)
    bounded(got, decode_ref(q, f16(kc) if dtype == np.float16 else kc, f16(vc) if dtype ==
                            np.float16 else vc, seq_len, window, softcap),
            F32_BOUND * np.abs(vc.astype(np.float64)).max())


@pytest.mark.parametrize("dtype,hd,ps,lens,window,softcap", [
    (np.float32, 64, 16, [70, 33], 20, None), (np.float16, 64, 32, [90, 5], 33, 5.0),
    (np.float16, 12, 4, [30, 17], 7, 2.0), (np.float16, 16, 8, [40, 0], None, 1.5)])
def test_paged_attention_window_and_softcap(dtype, hd, ps, lens, window, softcap):
    r = rng(hd + ps + len(lens))
    q, kp, vp, bt, sl = make_paged(r, hd, ps, lens, dtype)
    kr, vr = (f16(x) if dtype == np.float16 else x for x in (kp, vp))
    got = sk.paged_attention(q, kp, vp, bt, sl, window=window, softcap=softcap)
    bounded(got, paged_ref(q, kr, vr, bt, sl, window, softcap), F32_BOUND * np.abs(vr).max())


FLASH = [  # dtype, heads, kv heads, seq_q, seq_k, head_dim, causal, window, softcap
    (np.float32, 2, 1, 70, 90, 64, True, 20, None),
    (np.float32, 2, 2, 40, 40, 40, True, None, 3.0),
    (np.float32, 1, 1, 50, 50, 64, True, 17, 4.0),
    (np.float16, 2, 1, 70, 150, 64, True, 40, None),      # the first tile loaded is odd
    (np.float16, 1, 1, 100, 100, 64, False, None, 2.0),
    (np.float16, 1, 1, 80, 130, 128, True, 33, 5.0),
    (np.float16, 1, 1, 70, 90, 144, True, 20, 3.0),       # the wide kernel
]


@pytest.mark.parametrize("dtype,h,hk,sq,skk,d,causal,window,softcap", FLASH)
def test_flash_attention_window_and_softcap(dtype, h, hk, sq, skk, d, causal, window, softcap):
    r = rng(sq + skk + d)
    q, k, v = (randn(r, n, s, d).astype(dtype) for n, s in ((h, sq), (hk, skk), (hk, skk)))
    got = sk.flash_attention(q, k, v, causal, window=window, softcap=softcap)
    if softcap:
        want = softcap_ref(q, k, v, causal, window, softcap)
    else:
        want = sdpa_ref(q, k, v, causal, window)
    bound = (F32_BOUND if dtype == np.float32 else TC_BOUND) * np.abs(v.astype(np.float64)).max()
    bounded(got, want, bound)


def test_flash_attention_skips_the_tiles_before_the_window(monkeypatch):
    """Tiles entirely before a block's window are not loaded: a NaN there changes nothing."""
    r = rng(9)
    q, k, v = (randn(r, 1, s, 64).astype(np.float16) for s in (64, 192, 192))
    want = sdpa_ref(q, k, v, True, 32)
    k[:, :64], v[:, :64] = np.nan, np.nan      # keys 0..63: before every row's window
    got = sk.flash_attention(q, k, v, True, window=32)
    bounded(got, want, TC_BOUND * np.abs(v[:, 64:].astype(np.float64)).max())


def test_window_and_softcap_errors():
    r = rng(4)
    q = randn(r, 1, 8, 16)
    with pytest.raises(ValueError, match="window needs causal=True"):
        sk.flash_attention(q, q, q, window=4)
    with pytest.raises(ValueError, match=r"window must be in \[1, "):
        sk.decode_attention(randn(r, 2, 16), randn(r, 2, 8, 16), randn(r, 2, 8, 16), 4,
                            window=0)
    with pytest.raises(ValueError, match="softcap must be a finite positive number"):
        sk.paged_attention(q.reshape(1, 8, 16)[:, :2], randn(r, 2, 2, 4, 16),
                           randn(r, 2, 2, 4, 16), np.zeros((1, 2), np.int32),
                           np.array([3], np.int32), softcap=-1.0)


def test_options_off_keep_the_default_kernels():
    """No window / softcap and float32 caches launch the default instances themselves."""
    assert paged.paged_attention_kernel.constexprs == {"KV16": False, "WINDOW": 0,
                                                      "SOFTCAP": 0.0}
    k16 = attention.kv_kernel(paged.paged_attention_kernel, ("k_pages", "v_pages"), KV16=True)
    assert k16 is attention.kv_kernel(paged.paged_attention_kernel, ("k_pages", "v_pages"),
                                      KV16=True)       # one object, one compile
    assert k16.py_func is paged.paged_attention_kernel.py_func          # not a copy


# ---- the f16 paged path on the device, in a graph, under the sanitizer -------------------------

def test_f16_paged_decode_step_captures_on_the_fake_gpu(fake):  # noqa: F811
    """paged_kv_scatter into float16 pools then paged_attention, on DeviceArrays, captured and
    replayed: the same as eager, no capture rule broken, and as the float64 reference."""
    r = rng(5)
    ps, n_kv, hd = 4, 2, 16
    table = np.array([[2, 0, 1]], np.int32)
    kp = randn(r, 3, n_kv, ps, hd).astype(np.float16)
    vp = randn(r, 3, n_kv, ps, hd).astype(np.float16)
    q, k, v = randn(r, 1, 4, hd), randn(r, 1, n_kv, hd), randn(r, 1, n_kv, hd)
    slot, lens = np.array([2 * ps + 1], np.int32), np.array([6], np.int32)

    q_d, k_d, v_d, bt_d, len_d, slot_d = (pyptx.to_device(a) for a in (q, k, v, table, lens,
                                                                       slot))

    def step(kp_d, vp_d):
        sk.paged_kv_scatter(k_d, v_d, kp_d, vp_d, slot_d)
        return sk.paged_attention(q_d, kp_d, vp_d, bt_d, len_d, window=5, softcap=3.0)

    eager_k, eager_v = pyptx.to_device(kp), pyptx.to_device(vp)
    want_d = step(eager_k, eager_v).copy_to_host()
    cap_k, cap_v = pyptx.to_device(kp), pyptx.to_device(vp)
    with pyptx.graph() as g:
        out_d = step(cap_k, cap_v)
    g.launch()
    got = out_d.copy_to_host()
    assert fake.violations == []
    np.testing.assert_array_equal(got, want_d)
    np.testing.assert_array_equal(cap_k.copy_to_host(), eager_k.copy_to_host())
    kp2, vp2 = kp.copy(), vp.copy()
    kp2[2, :, 1], vp2[2, :, 1] = k[0], v[0]                       # rounded to nearest
    want = paged_ref(q, f16(kp2), f16(vp2), table, lens, 5, 3.0)
    bounded(got, want, F32_BOUND * np.abs(f16(vp2)).max())


def test_f16_paged_kernel_over_four_tiles_runs_clean_under_the_sanitizer(monkeypatch):
    """One block per (KV head, sequence) walks 4 tiles of 32 tokens (a refilled shared stage is
    what the race sanitizer checks), pages of 16 tokens (a page id per row) and of 32."""
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    r = rng(6)
    for ps in (16, 32):
        q, kp, vp, bt, sl = make_paged(r, 64, ps, [110, 97], n_kv=1, n_heads=2)
        want = paged_ref(q, f16(kp), f16(vp), bt, sl)
        kern = attention.kv_kernel(paged.paged_attention_kernel, ("k_pages", "v_pages"),
                                   KV16=True)
        out = np.full(q.shape, np.nan, np.float32)
        dummy = np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float32)
        with pyptx.sanitize(race=True, init=True):
            # grid (n_kv, splits, batch); chunk 128 = 4 tiles; DPL, TILE, GROUP, VEC, SPLIT
            kern[(1, 1, 2), 64](out, *dummy, q, paged._rows(kp), paged._rows(vp), bt, sl, 128,
                                ps.bit_length() - 1, np.float32(paged.LOG2E / 8.0), 2, 32, 2,
                                True, False)
        bounded(out, want, F32_BOUND * np.abs(f16(vp)).max())
